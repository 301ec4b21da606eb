#pragma once
// Element types of the engine's tensors and pointers that carry theirs. Precision is a property
// of the tensors (../shared/design/ARCHITECTURE.md, "The seams"): a buffer knows its element
// type, the backend's kernels take typed pointers and check that the types of one call agree
// with a form they implement, and which tensor has which type is one table
// (spec/precision_policy.h), not a second engine.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "plait/core/bf16.h"

namespace plait {

enum class DType : std::uint8_t { f32, bf16 };

constexpr std::size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }
constexpr std::string_view dtype_name(DType t) { return t == DType::f32 ? "fp32" : "bf16"; }

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::f32; }
template <>
constexpr DType dtype_of<bf16>() { return DType::bf16; }

// A pointer to device (backend) memory with its element type. Converts implicitly from float*
// and bf16* (and nullptr), so code that passes fp32 pointers reads as before.
struct TypedPtr {
  void* data = nullptr;
  DType dtype = DType::f32;

  TypedPtr() = default;
  TypedPtr(std::nullptr_t) {}
  TypedPtr(float* p) : data(p), dtype(DType::f32) {}
  TypedPtr(bf16* p) : data(p), dtype(DType::bf16) {}
  TypedPtr(void* p, DType t) : data(p), dtype(t) {}

  explicit operator bool() const { return data != nullptr; }
  template <typename T>
  T* as() const { return static_cast<T*>(data); }
  // The pointer `elements` elements further on.
  TypedPtr offset(std::size_t elements) const {
    return {static_cast<char*>(data) + elements * dtype_size(dtype), dtype};
  }
};

struct ConstTypedPtr {
  const void* data = nullptr;
  DType dtype = DType::f32;

  ConstTypedPtr() = default;
  ConstTypedPtr(std::nullptr_t) {}
  ConstTypedPtr(const float* p) : data(p), dtype(DType::f32) {}
  ConstTypedPtr(const bf16* p) : data(p), dtype(DType::bf16) {}
  ConstTypedPtr(const void* p, DType t) : data(p), dtype(t) {}
  ConstTypedPtr(TypedPtr p) : data(p.data), dtype(p.dtype) {}

  explicit operator bool() const { return data != nullptr; }
  template <typename T>
  const T* as() const { return static_cast<const T*>(data); }
  ConstTypedPtr offset(std::size_t elements) const {
    return {static_cast<const char*>(data) + elements * dtype_size(dtype), dtype};
  }
};

}  // namespace plait
