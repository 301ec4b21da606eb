#include "plait/model/tensor_shard_copy.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "plait/core/error.h"

namespace plait::model {
namespace {

void check(const NamedTensor& t, std::size_t whole, std::size_t part) {
  if (whole != t.full_numel() || part != t.numel) {
    throw Error("tensor '" + t.name + "': " + std::to_string(whole) + " and " + std::to_string(part) +
                " elements for a whole of " + std::to_string(t.full_numel()) + " and a part of " +
                std::to_string(t.numel));
  }
}

// Calls copy(whole_offset, part_offset, count) for every run of the part, and pad(part_offset,
// count) for the part's rows past the whole tensor.
template <class Copy, class Pad>
void walk(const NamedTensor& t, Copy&& copy, Pad&& pad) {
  const auto& s = t.shard;
  if (s.dim < 0) {
    copy(0, 0, t.numel);
    return;
  }
  const std::int64_t rows = t.full_shape[0];
  std::size_t row_elements = 1;
  for (std::size_t d = 1; d < t.full_shape.size(); ++d) row_elements *= static_cast<std::size_t>(t.full_shape[d]);
  std::size_t at = 0;
  if (s.dim == 0) {
    for (const auto& [begin, length] : s.ranges) {
      const std::int64_t real = std::clamp<std::int64_t>(rows - begin, 0, length);
      copy(static_cast<std::size_t>(begin) * row_elements, at, static_cast<std::size_t>(real) * row_elements);
      at += static_cast<std::size_t>(real) * row_elements;
      pad(at, static_cast<std::size_t>(length - real) * row_elements);
      at += static_cast<std::size_t>(length - real) * row_elements;
    }
    return;
  }
  // dim 1: one column range of every row.
  const auto cols = static_cast<std::size_t>(t.full_shape[1]);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (const auto& [begin, length] : s.ranges) {
      copy(static_cast<std::size_t>(r) * cols + static_cast<std::size_t>(begin), at, static_cast<std::size_t>(length));
      at += static_cast<std::size_t>(length);
    }
  }
}

}  // namespace

void copy_shard_out(std::span<const float> whole, const NamedTensor& t, std::span<float> part) {
  check(t, whole.size(), part.size());
  walk(
      t, [&](std::size_t w, std::size_t p, std::size_t n) { std::copy_n(whole.begin() + w, n, part.begin() + p); },
      [&](std::size_t p, std::size_t n) { std::fill_n(part.begin() + p, n, 0.0f); });
}

void copy_shard_in(std::span<float> whole, const NamedTensor& t, std::span<const float> part) {
  check(t, whole.size(), part.size());
  walk(
      t, [&](std::size_t w, std::size_t p, std::size_t n) { std::copy_n(part.begin() + p, n, whole.begin() + w); },
      [](std::size_t, std::size_t) {});
}

}  // namespace plait::model
