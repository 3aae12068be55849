// The golden corpus (tests/golden): every command of commands.txt is run
// in-process and its exit code, stdout, stderr and the files it writes must be
// byte for byte what tests/golden/expected/ holds. A refactor keeps them all;
// an intended change of output regenerates them with tests/golden/regen.sh
// (OOMPLAN_GOLDEN_UPDATE=1) and the diff is reviewed in the commit.

#include "support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <set>

namespace {

namespace fs = std::filesystem;

struct GoldenCommand {
  std::string line;  // as written in commands.txt
  std::vector<std::string> args;
  std::string stdin_file;  // `< FILE`, empty when none
};

// Splits `line` into words the way a POSIX shell does for the quoting that
// commands.txt uses: '...' literal, "..." with \" and \\, \x outside quotes.
std::vector<std::string> shell_words(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t') {
      if (in_word) {
        words.push_back(word);
        word.clear();
        in_word = false;
      }
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const std::size_t end = line.find('\'', i + 1);
      REQUIRE(end != std::string::npos);
      word += line.substr(i + 1, end - i - 1);
      i = end;
    } else if (c == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size() &&
            (line[i + 1] == '"' || line[i + 1] == '\\')) {
          ++i;
        }
        word += line[i];
      }
      REQUIRE(i < line.size());
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i];
    } else {
      word += c;
    }
  }
  if (in_word) {
    words.push_back(word);
  }
  return words;
}

std::vector<GoldenCommand> read_commands(const fs::path& path) {
  std::istringstream in(oomplan::test::read_required_file(path));
  std::vector<GoldenCommand> commands;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '#') {
      continue;
    }
    GoldenCommand command{line, shell_words(line), {}};
    const auto redirect =
        std::find(command.args.begin(), command.args.end(), "<");
    if (redirect != command.args.end()) {
      REQUIRE(redirect + 2 == command.args.end());
      command.stdin_file = *(redirect + 1);
      command.args.erase(redirect, command.args.end());
    }
    commands.push_back(command);
  }
  return commands;
}

// A stable file name: the command's words made safe, cut at 60 characters,
// and a 64-bit FNV-1a hash of the whole line (two lines never share a file).
std::string golden_name(const std::string& line) {
  std::string slug;
  for (const char c : line.substr(0, 60)) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '-' ||
                      (c == '.' && !slug.empty());  // no hidden files
    slug += safe ? c : '_';
  }
  std::uint64_t hash = 14695981039346656037ULL;
  for (const char c : line) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return fmt::format("{}-{:016x}.txt", slug.empty() ? "empty" : slug, hash);
}

std::string replace_all(std::string text, const std::string& from,
                        const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// What one command prints, in the layout of an expected file.
std::string run_golden(const GoldenCommand& command, const fs::path& scratch) {
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  std::vector<std::string> args;
  for (const auto& arg : command.args) {
    args.push_back(replace_all(arg, "{OUT}", scratch.string()));
  }
  std::istringstream input(
      command.stdin_file.empty()
          ? std::string()
          : oomplan::test::read_required_file(command.stdin_file));
  oomplan::cli::Environment env;
  env.in = &input;
  std::ostringstream out;
  std::ostringstream err;
  const int code = oomplan::cli::run(args, out, err, env);
  std::string text = fmt::format("$ oomplan {}\nexit {}\n--- stdout\n{}",
                                 command.line, code, out.str());
  text += "--- stderr\n" + err.str();
  std::vector<fs::path> written;
  for (const auto& entry : fs::directory_iterator(scratch)) {
    written.push_back(entry.path());
  }
  std::sort(written.begin(), written.end());
  for (const auto& path : written) {
    text += fmt::format("--- file {{OUT}}/{}\n", path.filename().string()) +
            oomplan::test::read_required_file(path);
  }
  return replace_all(text, scratch.string(), "{OUT}");
}

// `diff -u` of the expected and actual texts, cut to 80 lines.
std::string diff_text(const fs::path& expected, const std::string& actual,
                      const fs::path& actual_path) {
  {
    std::ofstream file(actual_path, std::ios::binary);
    file << actual;
  }
  const std::string command =
      fmt::format("diff -u '{}' '{}' | head -n 80", expected.string(),
                  actual_path.string());
  std::string diff;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    std::array<char, 4096> buffer{};
    std::size_t n = 0;
    while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
      diff.append(buffer.data(), n);
    }
    pclose(pipe);
  }
  return diff;
}

// Restores the working directory when a test leaves.
struct WorkingDirectory {
  fs::path saved = fs::current_path();
  explicit WorkingDirectory(const fs::path& to) { fs::current_path(to); }
  ~WorkingDirectory() { fs::current_path(saved); }
  WorkingDirectory(const WorkingDirectory&) = delete;
  WorkingDirectory& operator=(const WorkingDirectory&) = delete;
};

}  // namespace

TEST_CASE("golden: a command line splits into words as the shell splits it",
          "[golden]") {
  CHECK(shell_words("check a.yaml --gpus 8xH100") ==
        std::vector<std::string>{"check", "a.yaml", "--gpus", "8xH100"});
  CHECK(shell_words(R"(x 'a b' "c \"d\"" e\ f '')") ==
        std::vector<std::string>{"x", "a b", "c \"d\"", "e f", ""});
  CHECK(golden_name("a b") != golden_name("a_b"));
}

TEST_CASE("golden: every command prints what tests/golden/expected holds",
          "[golden]") {
  const fs::path source(OOMPLAN_SOURCE_DIR);
  const fs::path expected_dir = source / "tests" / "golden" / "expected";
  const fs::path actual_dir = fs::path(OOMPLAN_TEST_OUTPUT) / "golden-actual";
  const fs::path scratch = fs::path(OOMPLAN_TEST_OUTPUT) / "golden-out";
  const bool update = std::getenv("OOMPLAN_GOLDEN_UPDATE") != nullptr;
  const WorkingDirectory cwd(source);
  const auto commands = read_commands(source / "tests/golden/commands.txt");
  // The issue that asked for the corpus set its floor: 300 commands.
  CHECK(commands.size() >= 300);
  fs::create_directories(actual_dir);
  fs::create_directories(expected_dir);

  std::set<std::string> names;
  int differing = 0;
  for (const auto& command : commands) {
    const std::string name = golden_name(command.line);
    INFO("$ oomplan " << command.line << "\n(tests/golden/expected/" << name
                      << ")");
    CHECK(names.insert(name).second);  // a line listed twice
    const std::string actual = run_golden(command, scratch);
    const fs::path expected_path = expected_dir / name;
    if (update) {
      std::ofstream file(expected_path, std::ios::binary);
      file << actual;
      continue;
    }
    const auto expected = oomplan::test::read_file_text(expected_path);
    if (expected == actual) {
      continue;
    }
    ++differing;
    if (!expected) {
      FAIL_CHECK("no expected output: run tests/golden/regen.sh");
    } else if (differing <= 20) {
      FAIL_CHECK(diff_text(expected_path, actual, actual_dir / name));
    } else {
      FAIL_CHECK("differs (diffs after the 20th are not printed)");
    }
  }
  // Every expected file belongs to a command; regeneration removes the rest.
  for (const auto& entry : fs::directory_iterator(expected_dir)) {
    const std::string name = entry.path().filename().string();
    if (names.count(name) == 0) {
      if (update) {
        fs::remove(entry.path());
      } else {
        FAIL_CHECK("tests/golden/expected/" << name
                                            << " belongs to no command");
      }
    }
  }
  fs::remove_all(scratch);
}
