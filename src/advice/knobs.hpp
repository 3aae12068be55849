#pragma once

// Private to advice: the knobs a search turns (DESIGN §2's settings that keep
// the job), as a table of rows in knobs.cpp. search.cpp walks them.

#include "oomplan/advice/search.hpp"
#include "oomplan/model/gpu.hpp"
#include "oomplan/setup/setup.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace oomplan {

// The tensor- and pipeline-parallel sizes the layouts knob tries (tp inside
// a node of k_gpus_per_node).
inline constexpr std::array k_tp_sizes = {1, 2, 4, 8};
inline constexpr std::array k_pp_sizes = {1, 2, 4, 8, 16};

// What the walk knows of a knob beyond its levels: the layouts are not
// nested (ranked by time, one per seed); a side knob's frugal level never
// needs more memory (the search's relaxation).
enum class KnobRole : std::uint8_t { other, layout, side };

// One level of a knob. `factor` is its step time per token relative to the
// start (estimate_time), used only to order the walk: 1 until the search
// ranks the knob.
struct KnobLevel {
  Move move;
  std::function<void(Setup&)> apply;
  double factor = 1;
};

// One knob of a search: levels[0] is the setup as the search found it (no
// move), the others its moves.
struct Knob {
  std::string_view name;  // what it changes: "ZeRO stage", ...
  std::vector<KnobLevel> levels;
  std::size_t frugal = 0;              // the level that saves the most memory
  KnobScope scope = KnobScope::plain;  // the search scope that adds it
  KnobRole role = KnobRole::other;
};

// The knobs of the table that apply around `start` (resolved as `r` on
// `gpu`) within `scope`, in the table's order, each with at least one move.
std::vector<Knob> knobs_for(const Gpu& gpu, const Setup& start,
                            const Resolved& r, const SearchScope& scope);

}  // namespace oomplan
