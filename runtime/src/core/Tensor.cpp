//===- Tensor.cpp - dense host tensors ----------------------------------------===//
#include "medrun/Tensor.h"
#include "medrun/Error.h"

#include <cmath>
#include <malloc.h>

namespace medrun {

namespace {
// A step on the CPU allocates and frees its tensors anew. glibc serves each block over its
// mmap threshold with a fresh mapping and gives the heap's free top back to the system, so
// every step page-faulted and zeroed all its memory again (more than half of a small step's
// time: 10 steps of the quickstart recipe at 16^3 took 11.5 s, 4.5 s with these settings).
// Blocks up to 32 MiB (glibc's largest threshold) now come from the heap, whose freed memory
// is kept for the next step.
const bool kHostAllocatorTuned = [] {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  return true;
}();
} // namespace

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), numel_(numElements(shape_)) {
  for (int64_t d : shape_)
    if (d < 0)
      throw Error(str("tensor shape ", shapeStr(shape_), " has a negative size"));
  buffer_.reset(new std::byte[nbytes()](), std::default_delete<std::byte[]>());
}

Tensor::Tensor(DType dtype, Shape shape, std::shared_ptr<void> memory)
    : dtype_(dtype), shape_(std::move(shape)), numel_(numElements(shape_)),
      buffer_(std::move(memory)) {
  for (int64_t d : shape_)
    if (d < 0)
      throw Error(str("tensor shape ", shapeStr(shape_), " has a negative size"));
  if (!buffer_)
    throw Error(str("tensor ", shapeStr(shape_), ": no memory given"));
}

Tensor Tensor::clone() const {
  Tensor t(dtype_, shape_);
  if (nbytes())
    std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

void Tensor::checkType(DType requested) const {
  if (requested != dtype_)
    throw Error(str("tensor of type ", dtypeName(dtype_), " accessed as ", dtypeName(requested)));
}

namespace {
template <typename T> double get(const void *p, int64_t i) {
  return static_cast<double>(static_cast<const T *>(p)[i]);
}
double halfToDouble(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v = exp == 0    ? std::ldexp(mant, -24)
             : exp == 31 ? (mant ? NAN : INFINITY)
                         : std::ldexp(mant | 0x400, exp - 25);
  return sign ? -v : v;
}
} // namespace

f16::f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) { // NaN stays a quiet NaN
    bits = static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  } else if (a >= 0x477ff000u) { // >= 65520 (halfway above 65504, the largest): inf
    bits = static_cast<uint16_t>(sign | 0x7c00u);
  } else if (a >= 0x38800000u) { // normal (>= 2^-14): rebias the exponent by 127 - 15,
    // drop 13 mantissa bits rounding to nearest even (a carry moves into the exponent)
    uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    bits = static_cast<uint16_t>(sign | (r >> 13));
  } else { // subnormal: an integer multiple of 2^-24, rounded to nearest even (1024 is
    // the smallest normal, whose encoding is that integer too)
    float m = std::fabs(f) * 16777216.0f; // exact: a power of two
    float whole = std::floor(m), frac = m - whole;
    uint32_t n = static_cast<uint32_t>(whole);
    if (frac > 0.5f || (frac == 0.5f && (n & 1u)))
      ++n;
    bits = static_cast<uint16_t>(sign | n);
  }
}

f16::operator float() const { return static_cast<float>(halfToDouble(bits)); }

double Tensor::at(int64_t i) const {
  const void *p = raw();
  switch (dtype_) {
  case DType::F32: return get<float>(p, i);
  case DType::F64: return get<double>(p, i);
  case DType::BF16: return static_cast<float>(static_cast<const bf16 *>(p)[i]);
  case DType::F16: return halfToDouble(static_cast<const uint16_t *>(p)[i]);
  case DType::I8: return get<int8_t>(p, i);
  case DType::I16: return get<int16_t>(p, i);
  case DType::I32: return get<int32_t>(p, i);
  case DType::I64: return get<int64_t>(p, i);
  case DType::U8:
  case DType::Bool: return get<uint8_t>(p, i);
  }
  return 0;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_)
    return clone();
  if (!isFloat(dtype))
    throw Error(str("cannot convert a ", dtypeName(dtype_), " tensor to ", dtypeName(dtype)));
  Tensor t(dtype, shape_);
  // Typed loops for the conversions steps make (f32 to and from the others): the same values
  // as the general path below, which reads every element through at().
  auto each = [&](auto *out, auto convert) {
    for (int64_t i = 0; i < numel_; ++i)
      out[i] = convert(i);
  };
  if (dtype_ == DType::F32) {
    const float *p = data<float>();
    if (dtype == DType::F64)
      each(t.data<double>(), [&](int64_t i) { return static_cast<double>(p[i]); });
    else if (dtype == DType::BF16)
      each(t.data<bf16>(), [&](int64_t i) { return bf16(p[i]); });
    else
      each(t.data<f16>(), [&](int64_t i) { return f16(p[i]); });
    return t;
  }
  if (dtype == DType::F32 && (dtype_ == DType::BF16 || dtype_ == DType::F16 || dtype_ == DType::F64)) {
    float *q = t.data<float>();
    if (dtype_ == DType::BF16) {
      const bf16 *p = data<bf16>();
      each(q, [&](int64_t i) { return static_cast<float>(p[i]); });
    } else if (dtype_ == DType::F16) {
      const f16 *p = data<f16>();
      each(q, [&](int64_t i) { return static_cast<float>(p[i]); });
    } else {
      const double *p = data<double>();
      each(q, [&](int64_t i) { return static_cast<float>(p[i]); });
    }
    return t;
  }
  for (int64_t i = 0; i < numel_; ++i) {
    double v = at(i);
    if (dtype == DType::F32)
      t.data<float>()[i] = static_cast<float>(v);
    else if (dtype == DType::F64)
      t.data<double>()[i] = v;
    else if (dtype == DType::BF16)
      t.data<bf16>()[i] = bf16(static_cast<float>(v));
    else
      t.data<f16>()[i] = f16(static_cast<float>(v));
  }
  return t;
}

} // namespace medrun
