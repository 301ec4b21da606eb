#pragma once
// A non-owning view of an fp32 tensor: a pointer into a buffer plus a row-major shape of up to
// four dimensions. Kernels take plain pointers and sizes (as in llm.c); views are how the model
// names and slices its buffers without copying.
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "plait/core/error.h"

namespace plait {

class TensorView {
 public:
  TensorView() = default;
  TensorView(float* data, std::initializer_list<std::int64_t> shape) : data_(data) {
    if (shape.size() > shape_.size()) throw Error("TensorView: more than 4 dimensions");
    for (std::int64_t d : shape) {
      if (d < 0) throw Error("TensorView: negative dimension");
      shape_[rank_++] = d;
    }
  }

  float* data() const { return data_; }
  int rank() const { return rank_; }
  std::int64_t dim(int i) const { return shape_.at(static_cast<std::size_t>(i)); }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= shape_[static_cast<std::size_t>(i)];
    return n;
  }
  std::span<float> span() const { return {data_, static_cast<std::size_t>(numel())}; }

  // Rows [begin, begin + count) of the first dimension, as a view of the same rank.
  TensorView rows(std::int64_t begin, std::int64_t count) const {
    if (rank_ == 0 || begin < 0 || count < 0 || begin + count > shape_[0]) {
      throw Error("TensorView::rows: [" + std::to_string(begin) + ", " +
                  std::to_string(begin + count) + ") out of range");
    }
    TensorView v = *this;
    v.data_ = data_ + begin * (numel() / (shape_[0] == 0 ? 1 : shape_[0]));
    v.shape_[0] = count;
    return v;
  }

  std::string shape_string() const {
    std::string s = "(";
    for (int i = 0; i < rank_; ++i) {
      if (i) s += ", ";
      s += std::to_string(shape_[static_cast<std::size_t>(i)]);
    }
    return s + ")";
  }

 private:
  float* data_ = nullptr;
  std::array<std::int64_t, 4> shape_{};
  int rank_ = 0;
};

}  // namespace plait
