//===- Tensor.h - dense host tensors ------------------------------------------===//
#ifndef MEDRUN_TENSOR_H
#define MEDRUN_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace medrun {

enum class DType : uint8_t { F32, F64, BF16, F16, I8, I16, I32, I64, U8, Bool };

/// Bytes per element.
size_t dtypeSize(DType t);
/// "f32", "f64", "bf16", "f16", "i8", "i16", "i32", "i64", "u8", "bool" (MLIR spelling).
const char *dtypeName(DType t);
/// Inverse of dtypeName; throws Error naming `what` for an unknown name.
DType parseDType(const std::string &name, const std::string &what);
bool isFloat(DType t);

/// bfloat16 storage: the upper half of an IEEE float; conversion rounds to nearest even.
struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) // NaN stays a (quiet) NaN
      bits = static_cast<uint16_t>((u >> 16) | 0x40);
    else
      bits = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
  }
  operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

/// IEEE binary16 storage; conversion from float rounds to nearest even, overflows to ±inf
/// (from 65520 on), keeps subnormals (down to 2^-24) and NaN.
struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float f);
  operator float() const;
};

/// `x` rounded to the nearest binary16 value, as a float: the F16 precision of the CPU
/// backend stores activations this way (docs/training.md §5).
inline float roundToF16(float x) { return static_cast<float>(f16(x)); }

template <typename T> constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<float>() { return DType::F32; }
template <> constexpr DType dtypeOf<double>() { return DType::F64; }
template <> constexpr DType dtypeOf<bf16>() { return DType::BF16; }
template <> constexpr DType dtypeOf<f16>() { return DType::F16; }
template <> constexpr DType dtypeOf<int8_t>() { return DType::I8; }
template <> constexpr DType dtypeOf<int16_t>() { return DType::I16; }
template <> constexpr DType dtypeOf<int32_t>() { return DType::I32; }
template <> constexpr DType dtypeOf<int64_t>() { return DType::I64; }
template <> constexpr DType dtypeOf<uint8_t>() { return DType::U8; }

using Shape = std::vector<int64_t>;

/// "2x3x4" ("scalar" for rank 0), as in medc's messages.
std::string shapeStr(const Shape &shape);
int64_t numElements(const Shape &shape);

/// A dense, C-ordered host tensor. Copies share the buffer (like torch.Tensor); clone()
/// makes an independent copy.
class Tensor {
public:
  Tensor() = default;
  /// Zero-filled tensor.
  Tensor(DType dtype, Shape shape);
  /// A tensor in memory allocated elsewhere (e.g. page-locked host memory for fast GPU
  /// uploads): `memory` holds at least nbytes() bytes, and its deleter frees them when the
  /// last copy of the tensor goes.
  Tensor(DType dtype, Shape shape, std::shared_ptr<void> memory);

  DType dtype() const { return dtype_; }
  const Shape &shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[i]; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtypeSize(dtype_); }
  bool defined() const { return buffer_ != nullptr; }

  void *raw() { return buffer_.get(); }
  const void *raw() const { return buffer_.get(); }
  /// Typed access; throws Error if T does not match the dtype.
  template <typename T> T *data() {
    checkType(dtypeOf<T>());
    return static_cast<T *>(raw());
  }
  template <typename T> const T *data() const {
    checkType(dtypeOf<T>());
    return static_cast<const T *>(raw());
  }

  Tensor clone() const;
  /// Same values converted to another dtype (float <-> float and integer -> float; to f16
  /// and bf16 with rounding to nearest even).
  Tensor to(DType dtype) const;
  /// Element `i` (flat index) as double, for any dtype; for checks and printing.
  double at(int64_t i) const;

private:
  void checkType(DType requested) const;

  DType dtype_ = DType::F32;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<void> buffer_;
};

/// Named tensors (parameters by state_dict key, checkpoint contents).
using TensorMap = std::map<std::string, Tensor>;

} // namespace medrun

#endif // MEDRUN_TENSOR_H
