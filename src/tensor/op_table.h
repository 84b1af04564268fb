// Tables indexed by Op (names, kernels, "supported?"), built entry by entry from the op
// they describe, so an entry cannot slide to the wrong op when the enum changes:
//
//   constexpr auto kNames = make_op_table<std::string_view>({
//       {Op::Add, "add"},
//       {Op::Sub, "sub"},
//   });
//
// An op without an entry holds T{}; callers check completeness with op_table_covers(),
// which looks at which ops were listed (comparing function pointers with null is not a
// constant expression in every build, e.g. under the sanitizers).
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>

#include "tensor/op.h"

namespace sd {

constexpr size_t op_index(Op op) {
  return static_cast<size_t>(op);
}

template <typename T>
struct OpEntry {
  Op op;
  T value;
};

template <typename T>
struct OpTable {
  std::array<T, kOpCount> values{};
  std::array<bool, kOpCount> listed{};
  constexpr const T& operator[](size_t i) const { return values[i]; }
  constexpr size_t size() const { return values.size(); }
};

// Throws (at compile time: a non-constant expression) when an op appears twice or an entry
// is out of range.
template <typename T>
constexpr OpTable<T> make_op_table(std::initializer_list<OpEntry<T>> entries) {
  OpTable<T> table{};
  for (const OpEntry<T>& e : entries) {
    const size_t i = op_index(e.op);
    if (i >= table.size() || table.listed[i])
      throw "make_op_table: an op is out of range or listed twice";
    table.listed[i] = true;
    table.values[i] = e.value;
  }
  return table;
}

// True when every op for which `needs(op)` holds has an entry.
template <typename T, typename Pred>
constexpr bool op_table_covers(const OpTable<T>& table, Pred needs) {
  for (size_t i = 0; i < table.size(); ++i)
    if (needs(static_cast<Op>(i)) && !table.listed[i]) return false;
  return true;
}

// The ops that compute something: everything but leaves and views.
constexpr bool computes(Op op) {
  return op != Op::None && op != Op::View && op != Op::Reshape && op != Op::Permute;
}

}  // namespace sd
