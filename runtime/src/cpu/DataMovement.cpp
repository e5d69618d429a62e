//===- DataMovement.cpp - pad, slice (and its gradient), concat, transpose -------===//
//
// Pure copies, so they work on any dtype (values are moved as bytes); only pad's fill
// value needs the element type. Rows of the last axis are the unit of work.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Kernels.h"

#include "Dispatch.h"

#include <cstring>

namespace medrun::cpu {
namespace {
using namespace detail;

constexpr int64_t kCopyGrain = 65536; // elements per parallel chunk

/// `value` in the storage format of `t`, as raw bytes.
std::vector<std::byte> encode(DType t, double value) {
  std::vector<std::byte> out(dtypeSize(t));
  auto put = [&](auto v) { std::memcpy(out.data(), &v, sizeof(v)); };
  switch (t) {
  case DType::F32: put(static_cast<float>(value)); break;
  case DType::F64: put(value); break;
  case DType::BF16: put(bf16(static_cast<float>(value)).bits); break;
  case DType::I8: put(static_cast<int8_t>(value)); break;
  case DType::I16: put(static_cast<int16_t>(value)); break;
  case DType::I32: put(static_cast<int32_t>(value)); break;
  case DType::I64: put(static_cast<int64_t>(value)); break;
  case DType::U8:
  case DType::Bool: put(static_cast<uint8_t>(value)); break;
  case DType::F16:
    if (value != 0.0)
      throw Error("med kernel pad: a non-zero fill value is not supported for f16");
    break;
  }
  return out;
}

/// Copies n elements of `es` bytes from src (element stride `stride`) to contiguous dst.
void copyStrided(std::byte *dst, const std::byte *src, int64_t n, int64_t stride, size_t es) {
  if (stride == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * es);
    return;
  }
  auto run = [&](auto tag) {
    using U = decltype(tag);
    U *d = reinterpret_cast<U *>(dst);
    const U *s = reinterpret_cast<const U *>(src);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(d + i, s + i * stride, sizeof(U));
  };
  switch (es) {
  case 1: return run(uint8_t());
  case 2: return run(uint16_t());
  case 4: return run(uint32_t());
  case 8: return run(uint64_t());
  default:
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(dst + i * es, src + i * stride * es, es);
  }
}

void fill(std::byte *dst, int64_t n, const std::vector<std::byte> &v) {
  const size_t es = v.size();
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(dst + i * es, v.data(), es);
}

std::vector<int64_t> contiguousStrides(const Shape &s) {
  std::vector<int64_t> st(s.size());
  int64_t a = 1;
  for (int64_t i = static_cast<int64_t>(s.size()) - 1; i >= 0; --i) {
    st[i] = a;
    a *= s[i];
  }
  return st;
}

void checkSameType(const char *kernel, const Tensor &x, const Tensor &y) {
  if (x.dtype() != y.dtype())
    throw Error(str("med kernel ", kernel, ": input of element type ", dtypeName(x.dtype()),
                    " and result of element type ", dtypeName(y.dtype())));
}

} // namespace

void pad(const Tensor &x, const std::vector<int64_t> &low, const std::vector<int64_t> &high,
         double value, Tensor &y) {
  checkSameType("pad", x, y);
  const int64_t r = x.rank();
  if (y.rank() != r || static_cast<int64_t>(low.size()) != r ||
      static_cast<int64_t>(high.size()) != r)
    throw Error(str("med kernel pad: need one low and one high entry per axis of ",
                    shapeStr(x.shape())));
  for (int64_t i = 0; i < r; ++i)
    if (y.dim(i) != x.dim(i) + low[i] + high[i])
      throw Error(str("med kernel pad: result shape ", shapeStr(y.shape()), " is not ",
                      shapeStr(x.shape()), " padded"));
  if (y.numel() == 0)
    return;
  const size_t es = dtypeSize(y.dtype());
  const std::vector<std::byte> fv = encode(y.dtype(), value);
  const std::byte *xp = static_cast<const std::byte *>(x.raw());
  std::byte *yp = static_cast<std::byte *>(y.raw());
  if (r == 0) {
    std::memcpy(yp, xp, es);
    return;
  }
  const std::vector<int64_t> xs = contiguousStrides(x.shape());
  const int64_t ow = y.dim(r - 1), iw = x.dim(r - 1), rows = y.numel() / ow;
  // Output columns [lo, hi) read input columns lo − low .. hi − low − 1.
  const int64_t lo = std::clamp<int64_t>(low[r - 1], 0, ow);
  const int64_t hi = std::clamp<int64_t>(low[r - 1] + iw, lo, ow);
  parallelFor(rows, grainFor(ow, kCopyGrain), [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      std::byte *yr = yp + row * ow * es;
      int64_t rest = row, off = 0;
      bool inside = true;
      for (int64_t d = r - 2; d >= 0; --d) {
        int64_t i = rest % y.dim(d) - low[d];
        rest /= y.dim(d);
        if (i < 0 || i >= x.dim(d))
          inside = false;
        off += i * xs[d];
      }
      if (!inside || iw == 0) {
        fill(yr, ow, fv);
        continue;
      }
      fill(yr, lo, fv);
      if (hi > lo)
        std::memcpy(yr + lo * es, xp + (off + lo - low[r - 1]) * es,
                    static_cast<size_t>(hi - lo) * es);
      fill(yr + hi * es, ow - hi, fv);
    }
  });
}

void pack(const std::vector<const Tensor *> &inputs, const std::vector<int64_t> &offsets,
          Tensor &y) {
  if (y.rank() != 1 || offsets.size() != inputs.size())
    throw Error("med kernel pack: needs a 1-D result and one offset per input");
  const size_t es = dtypeSize(y.dtype());
  std::byte *yp = static_cast<std::byte *>(y.raw());
  std::memset(yp, 0, y.nbytes());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor &x = *inputs[i];
    if (x.dtype() != y.dtype() || offsets[i] < 0 || offsets[i] + x.numel() > y.numel())
      throw Error(str("med kernel pack: input ", i, " (", shapeStr(x.shape()), " ",
                      dtypeName(x.dtype()), ") does not fit at offset ", offsets[i], " of ",
                      shapeStr(y.shape()), " ", dtypeName(y.dtype())));
    if (x.numel())
      std::memcpy(yp + offsets[i] * es, x.raw(), x.nbytes());
  }
}

void slice(const Tensor &x, const std::vector<int64_t> &offsets,
           const std::vector<int64_t> &strides, Tensor &y) {
  checkSameType("slice", x, y);
  const int64_t r = x.rank();
  if (y.rank() != r || static_cast<int64_t>(offsets.size()) != r ||
      (!strides.empty() && static_cast<int64_t>(strides.size()) != r))
    throw Error(str("med kernel slice: need one offset and stride per axis of ",
                    shapeStr(x.shape())));
  auto strideOf = [&](int64_t d) { return strides.empty() ? int64_t(1) : strides[d]; };
  for (int64_t d = 0; d < r; ++d)
    if (y.dim(d) > 0 && (offsets[d] < 0 || strideOf(d) < 1 ||
                         offsets[d] + (y.dim(d) - 1) * strideOf(d) >= x.dim(d)))
      throw Error(str("med kernel slice: the box of shape ", shapeStr(y.shape()),
                      " does not lie inside ", shapeStr(x.shape())));
  if (y.numel() == 0)
    return;
  const size_t es = dtypeSize(y.dtype());
  const std::byte *xp = static_cast<const std::byte *>(x.raw());
  std::byte *yp = static_cast<std::byte *>(y.raw());
  if (r == 0) {
    std::memcpy(yp, xp, es);
    return;
  }
  const std::vector<int64_t> xs = contiguousStrides(x.shape());
  const int64_t ow = y.dim(r - 1), rows = y.numel() / ow;
  parallelFor(rows, grainFor(ow, kCopyGrain), [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      int64_t rest = row, off = offsets[r - 1];
      for (int64_t d = r - 2; d >= 0; --d) {
        off += (offsets[d] + (rest % y.dim(d)) * strideOf(d)) * xs[d];
        rest /= y.dim(d);
      }
      copyStrided(yp + row * ow * es, xp + off * es, ow, strideOf(r - 1), es);
    }
  });
}

void sliceGrad(const Tensor &dy, const std::vector<int64_t> &offsets,
               const std::vector<int64_t> &strides, Tensor &dx) {
  checkSameType("slice_grad", dy, dx);
  const int64_t r = dx.rank();
  if (dy.rank() != r || static_cast<int64_t>(offsets.size()) != r ||
      static_cast<int64_t>(strides.size()) != r)
    throw Error(str("med kernel slice_grad: need one offset and stride per axis of ",
                    shapeStr(dx.shape()), " and a gradient of that rank, got ",
                    shapeStr(dy.shape())));
  for (int64_t d = 0; d < r; ++d)
    if (dy.dim(d) > 0 && (offsets[d] < 0 || strides[d] < 1 ||
                          offsets[d] + (dy.dim(d) - 1) * strides[d] >= dx.dim(d)))
      throw Error(str("med kernel slice_grad: the box of shape ", shapeStr(dy.shape()),
                      " does not lie inside ", shapeStr(dx.shape())));
  if (dx.numel() == 0)
    return;
  // All-zero bytes are zero in every dtype.
  std::memset(dx.raw(), 0, dx.nbytes());
  if (dy.numel() == 0)
    return;
  const size_t es = dtypeSize(dx.dtype());
  const std::byte *gp = static_cast<const std::byte *>(dy.raw());
  std::byte *dp = static_cast<std::byte *>(dx.raw());
  if (r == 0) {
    std::memcpy(dp, gp, es);
    return;
  }
  // Row by row of dy (disjoint destinations), the inverse of slice's copy.
  const std::vector<int64_t> xs = contiguousStrides(dx.shape());
  const int64_t w = dy.dim(r - 1), rows = dy.numel() / w, step = strides[r - 1];
  parallelFor(rows, grainFor(w, kCopyGrain), [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      int64_t rest = row, off = offsets[r - 1];
      for (int64_t d = r - 2; d >= 0; --d) {
        off += (offsets[d] + (rest % dy.dim(d)) * strides[d]) * xs[d];
        rest /= dy.dim(d);
      }
      const std::byte *src = gp + row * w * es;
      std::byte *dst = dp + off * es;
      for (int64_t i = 0; i < w; ++i)
        std::memcpy(dst + i * step * es, src + i * es, es);
    }
  });
}

void transpose(const Tensor &x, const std::vector<int64_t> &permutation, Tensor &y) {
  checkSameType("transpose", x, y);
  const int64_t r = x.rank();
  if (r < 1 || y.rank() != r || static_cast<int64_t>(permutation.size()) != r)
    throw Error(str("med kernel transpose: need one permutation entry per axis of ",
                    shapeStr(x.shape()), " and a result of that rank, got ",
                    permutation.size(), " entries and ", shapeStr(y.shape())));
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (int64_t d = 0; d < r; ++d) {
    const int64_t p = permutation[d];
    if (p < 0 || p >= r || seen[p] || y.dim(d) != x.dim(p))
      throw Error(str("med kernel transpose: result shape ", shapeStr(y.shape()), " is not ",
                      shapeStr(x.shape()), " permuted by a permutation of its axes"));
    seen[p] = true;
  }
  if (y.numel() == 0)
    return;
  const size_t es = dtypeSize(y.dtype());
  const std::byte *xp = static_cast<const std::byte *>(x.raw());
  std::byte *yp = static_cast<std::byte *>(y.raw());
  // The input's stride along each axis of the result.
  const std::vector<int64_t> xs = contiguousStrides(x.shape());
  std::vector<int64_t> st(r);
  for (int64_t d = 0; d < r; ++d)
    st[d] = xs[permutation[d]];
  // Rows of the result's last axis: each reads the input with stride st[r − 1].
  const int64_t ow = y.dim(r - 1), rows = y.numel() / ow;
  parallelFor(rows, grainFor(ow, kCopyGrain), [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      int64_t rest = row, off = 0;
      for (int64_t d = r - 2; d >= 0; --d) {
        off += (rest % y.dim(d)) * st[d];
        rest /= y.dim(d);
      }
      copyStrided(yp + row * ow * es, xp + off * es, ow, st[r - 1], es);
    }
  });
}

void concat(const std::vector<const Tensor *> &inputs, int64_t axis, Tensor &y) {
  const int64_t r = y.rank();
  if (axis < 0)
    axis += r;
  if (axis < 0 || axis >= r)
    throw Error(str("med kernel concat: axis out of range for shape ", shapeStr(y.shape())));
  int64_t total = 0;
  for (const Tensor *t : inputs) {
    checkSameType("concat", *t, y);
    if (t->rank() != r)
      throw Error(str("med kernel concat: input shape ", shapeStr(t->shape()),
                      " does not match result shape ", shapeStr(y.shape())));
    total += t->dim(axis);
  }
  if (total != y.dim(axis))
    throw Error(str("med kernel concat: inputs add up to ", total, " along axis ", axis,
                    ", result has ", y.dim(axis)));
  if (y.numel() == 0)
    return;
  const size_t es = dtypeSize(y.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= y.dim(d);
  for (int64_t d = axis + 1; d < r; ++d)
    inner *= y.dim(d);
  // Per input: its block length and the block's position inside an output slab.
  std::vector<int64_t> len(inputs.size()), pos(inputs.size());
  for (size_t i = 0, p = 0; i < inputs.size(); ++i) {
    len[i] = inputs[i]->dim(axis) * inner;
    pos[i] = static_cast<int64_t>(p);
    p += len[i];
  }
  const int64_t slab = y.dim(axis) * inner;
  std::byte *yp = static_cast<std::byte *>(y.raw());
  parallelFor(outer, grainFor(slab, kCopyGrain), [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (size_t i = 0; i < inputs.size(); ++i)
        if (len[i] > 0)
          std::memcpy(yp + (o * slab + pos[i]) * es,
                      static_cast<const std::byte *>(inputs[i]->raw()) + o * len[i] * es,
                      static_cast<size_t>(len[i]) * es);
  });
}

} // namespace medrun::cpu
