#pragma once

// Private to the launch readers: the table machinery. A framework reader is a
// table of rows, one per key its files may hold: the key as the framework
// spells it (a dotted path into the document), what it does to the plan (a
// setter), and the framework file that defines the key. walk_rows() applies
// the rows in table order; KeyReader::finish() then reports every key of the
// file that no row read as unused or unknown.
//
// Table order is behaviour: it is the order in which options enter the plan
// (set_option keeps the first position of a flag) and notes are written, and
// it decides which of two bad keys a file is refused for. A key whose meaning
// depends on other keys has two rows: one that reads it into the reader's
// state, and, after the keys it depends on, one that applies it.

#include "launch/internal.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <string_view>

namespace oomplan::launch {

// Bounds of the counts a launch file states: far above any real run, so a
// value beyond is a typo, and the products stay within 64 bits.
inline constexpr std::int64_t k_max_batch = 1 << 20;
inline constexpr std::int64_t k_max_accum = 1 << 20;
inline constexpr std::int64_t k_max_seq = 10'000'000;
inline constexpr std::int64_t k_max_gpus = 100'000;
inline constexpr std::int64_t k_max_rank = 1 << 16;

// What every reader's state holds: the file's keys and the plan it fills.
// A reader's own state derives from it and adds what one row passes to a
// later one.
struct Reading {
  KeyReader& keys;
  LaunchPlan& plan;
};

template <class State>
struct KeyRow;

// The shared setters (defined below): what most keys do.
template <class State>
void set_model(State& s, const KeyRow<State>& row);
template <class State>
void set_integer(State& s, const KeyRow<State>& row);
template <class State>
void set_integer_above_one(State& s, const KeyRow<State>& row);
template <class State>
void set_probability(State& s, const KeyRow<State>& row);
template <class State>
void set_when_true(State& s, const KeyRow<State>& row);
template <class State>
void refuse_when_true(State& s, const KeyRow<State>& row);
template <class State>
void refuse_above_one(State& s, const KeyRow<State>& row);
template <class State>
void refuse_when_present(State& s, const KeyRow<State>& row);
template <class State>
void mark_unused(State& s, const KeyRow<State>& row);
template <class State>
void mark_unused_children(State& s, const KeyRow<State>& row);

template <class State>
struct KeyRow {
  using Setter = void (*)(State&, const KeyRow&);

  std::string_view
      key;     // as the framework spells it: "zero_optimization.stage"
  Setter set;  // what the key does to the plan
  std::string_view source;  // the framework file that defines the key
  // Parameters of the shared setters: the option set ("--seq"), its value
  // or the problem a refusal names, and the range of an integer.
  std::string_view flag = {};
  std::string_view text = {};
  std::int64_t lo = 0;
  std::int64_t hi = 0;

  // A whole number from lo to hi: option `flag` with that value.
  static constexpr KeyRow integer(std::string_view key, std::string_view flag,
                                  std::int64_t lo, std::int64_t hi,
                                  std::string_view source) {
    return {key, set_integer<State>, source, flag, {}, lo, hi};
  }
  // A probability from 0 to 1: option `flag` (which bounds it further).
  static constexpr KeyRow probability(std::string_view key,
                                      std::string_view flag,
                                      std::string_view source) {
    return {key, set_probability<State>, source, flag};
  }
  // A GPU count from 1 to k_max_gpus: option `flag` when above 1.
  static constexpr KeyRow parallel(std::string_view key, std::string_view flag,
                                   std::string_view source) {
    return {key, set_integer_above_one<State>, source, flag, {}, 1, k_max_gpus};
  }
  // A boolean: option `flag` with `value` when true, nothing when false.
  static constexpr KeyRow when_true(std::string_view key, std::string_view flag,
                                    std::string_view value,
                                    std::string_view source) {
    return {key, set_when_true<State>, source, flag, value};
  }
  // A boolean that changes memory in a way oomplan does not model when true.
  static constexpr KeyRow refuse_true(std::string_view key,
                                      std::string_view problem,
                                      std::string_view source) {
    return {key, refuse_when_true<State>, source, {}, problem};
  }
  // A degree of parallelism oomplan does not model, refused above 1.
  static constexpr KeyRow refuse_degree(std::string_view key, std::int64_t lo,
                                        std::string_view problem,
                                        std::string_view source) {
    return {key, refuse_above_one<State>, source, {}, problem, lo, k_max_gpus};
  }
  // A key whose mere presence asks for what oomplan does not model.
  static constexpr KeyRow refuse_present(std::string_view key,
                                         std::string_view problem,
                                         std::string_view source) {
    return {key, refuse_when_present<State>, source, {}, problem};
  }
  // A key that does not change memory.
  static constexpr KeyRow unused(std::string_view key,
                                 std::string_view source) {
    return {key, mark_unused<State>, source};
  }
  // A mapping none of whose keys changes memory.
  static constexpr KeyRow unused_children(std::string_view key,
                                          std::string_view source) {
    return {key, mark_unused_children<State>, source};
  }
};

// Applies `rows` in order.
template <class State, std::size_t N>
void walk_rows(State& s, const std::array<KeyRow<State>, N>& rows) {
  for (const KeyRow<State>& row : rows) {
    row.set(s, row);
  }
}

// Marks a list of keys that do not change memory.
template <std::size_t N>
void mark_unused_keys(KeyReader& keys,
                      const std::array<const char*, N>& names) {
  for (const char* name : names) {
    keys.unused(name);
  }
}

// ---- the shared setters ----

// The model: a Hugging Face id or a local path.
template <class State>
void set_model(State& s, const KeyRow<State>& row) {
  if (const auto m = s.keys.string(row.key)) {
    s.plan.model = *m;
    s.plan.model_key = std::string(row.key);
  }
}

template <class State>
void set_integer(State& s, const KeyRow<State>& row) {
  if (const auto v = s.keys.integer(row.key, row.lo, row.hi)) {
    set_option(s.plan, std::string(row.flag), fmt::format("{}", *v),
               std::string(row.key));
  }
}

template <class State>
void set_probability(State& s, const KeyRow<State>& row) {
  // The option's own check refuses 1.
  if (const auto v = s.keys.number(row.key, 0, 1)) {
    set_option(s.plan, std::string(row.flag), fmt::format("{}", *v),
               std::string(row.key));
  }
}

template <class State>
void set_integer_above_one(State& s, const KeyRow<State>& row) {
  if (const auto v = s.keys.integer(row.key, row.lo, row.hi); v && *v > 1) {
    set_option(s.plan, std::string(row.flag), fmt::format("{}", *v),
               std::string(row.key));
  }
}

template <class State>
void set_when_true(State& s, const KeyRow<State>& row) {
  if (s.keys.boolean(row.key).value_or(false)) {
    set_option(s.plan, std::string(row.flag), std::string(row.text),
               std::string(row.key));
  }
}

template <class State>
void refuse_when_true(State& s, const KeyRow<State>& row) {
  if (s.keys.boolean(row.key).value_or(false)) {
    s.keys.fail(row.key, row.text);
  }
}

template <class State>
void refuse_above_one(State& s, const KeyRow<State>& row) {
  if (s.keys.integer(row.key, row.lo, row.hi).value_or(1) > 1) {
    s.keys.fail(row.key, row.text);
  }
}

template <class State>
void refuse_when_present(State& s, const KeyRow<State>& row) {
  if (s.keys.has(row.key)) {
    s.keys.fail(row.key, row.text);
  }
}

template <class State>
void mark_unused(State& s, const KeyRow<State>& row) {
  s.keys.unused(row.key);
}

template <class State>
void mark_unused_children(State& s, const KeyRow<State>& row) {
  s.keys.unused_children(row.key);
}

}  // namespace oomplan::launch
