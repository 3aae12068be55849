#pragma once

// The CLI's file access: the only place oomplan opens a path. Inputs are
// bounded before the core sees them: only regular files (after following
// links), each under a size no real input reaches.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace oomplan::cli {

// A config file (config.json, a safetensors index, a catalog file, a launch
// config) is at most 16 MiB: the largest real config.json files are tens of
// kB; a safetensors index of a 1,000-shard checkpoint is about 10 MB.
inline constexpr std::uintmax_t k_max_config_bytes = std::uintmax_t{16} << 20;

// The text of the regular file at `path` (`what` names it in messages: "config
// file"). Throws Error naming the path when it does not exist, is not a
// regular file (a FIFO, a device, a folder), is larger than `max_bytes` or
// cannot be read.
std::string read_input_file(const std::filesystem::path& path,
                            std::string_view what,
                            std::uintmax_t max_bytes = k_max_config_bytes);

// True when `path` names a regular file, after following links.
bool is_regular(const std::filesystem::path& path);

// `message` on one line: newlines, tabs and other control characters escaped
// as \n, \t, \xNN, so an echoed user value cannot break the one-line error
// contract.
std::string one_line(std::string_view message);

}  // namespace oomplan::cli
