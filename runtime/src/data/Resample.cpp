//===- Resample.cpp - nnU-Net's resampling of images and segmentations ----------------===//
#include "medrun/Resample.h"

#include "medrun/Error.h"

#include <algorithm>
#include <cmath>

namespace medrun {
namespace {

constexpr int64_t kSplinePad = 12; // SciPy pads 'nearest' inputs by 12 before the prefilter

/// SciPy's cubic B-spline prefilter of a line (pole sqrt(3) - 2), the causal start for
/// the half-sample symmetric ('reflect', used for 'nearest') extension.
void splineFilter(std::vector<double> &c) {
  const int64_t n = static_cast<int64_t>(c.size());
  if (n < 2)
    return;
  const double z = std::sqrt(3.0) - 2.0;
  const double lambda = (1 - z) * (1 - 1 / z);
  for (double &v : c)
    v *= lambda;
  // causal initialisation (reflect)
  {
    const double zn = std::pow(z, static_cast<double>(n));
    const double c0 = c[0];
    double sum = c[0] + zn * c[n - 1];
    double zi = z;
    for (int64_t i = 1; i < n; ++i) {
      sum += zi * (c[i] + zn * c[n - 1 - i]);
      zi *= z;
    }
    sum *= z / (1 - zn * zn);
    c[0] = c0 + sum;
  }
  for (int64_t i = 1; i < n; ++i)
    c[i] += z * c[i - 1];
  c[n - 1] *= z / (z - 1); // anticausal initialisation (reflect)
  for (int64_t i = n - 2; i >= 0; --i)
    c[i] = z * (c[i + 1] - c[i]);
}

/// One line of length n resampled to m: scipy.ndimage.zoom's grid_mode sampling.
void resizeLine(const double *in, int64_t n, double *out, int64_t m, int order,
                std::vector<double> &scratch) {
  const double scale = static_cast<double>(n) / static_cast<double>(m);
  if (order == 3) {
    scratch.assign(static_cast<size_t>(n + 2 * kSplinePad), 0.0);
    for (int64_t i = 0; i < n + 2 * kSplinePad; ++i)
      scratch[i] = in[std::clamp<int64_t>(i - kSplinePad, 0, n - 1)];
    splineFilter(scratch);
    const int64_t len = n + 2 * kSplinePad;
    for (int64_t o = 0; o < m; ++o) {
      const double cc = (static_cast<double>(o) + 0.5) * scale - 0.5 + kSplinePad;
      const double f = std::floor(cc), t = cc - f;
      const int64_t start = static_cast<int64_t>(f) - 1;
      const double w[4] = {(1 - t) * (1 - t) * (1 - t) / 6, (3 * t * t * t - 6 * t * t + 4) / 6,
                           (-3 * t * t * t + 3 * t * t + 3 * t + 1) / 6, t * t * t / 6};
      double v = 0;
      for (int k = 0; k < 4; ++k)
        v += w[k] * scratch[std::clamp<int64_t>(start + k, 0, len - 1)];
      out[o] = v;
    }
  } else if (order == 1) {
    for (int64_t o = 0; o < m; ++o) {
      const double cc =
          std::clamp((static_cast<double>(o) + 0.5) * scale - 0.5, 0.0, static_cast<double>(n - 1));
      const double f = std::floor(cc), t = cc - f;
      const int64_t i = static_cast<int64_t>(f);
      out[o] = t > 0 ? (1 - t) * in[i] + t * in[std::min(i + 1, n - 1)] : in[i];
    }
  } else if (order == 0) {
    for (int64_t o = 0; o < m; ++o) {
      const double cc = (static_cast<double>(o) + 0.5) * scale - 0.5;
      out[o] = in[std::clamp<int64_t>(static_cast<int64_t>(std::floor(cc + 0.5)), 0, n - 1)];
    }
  } else {
    throw Error(str("resample: order ", order, " (expected 0, 1 or 3)"));
  }
}

/// Resizes `x` (shape s) along axis a to length m, in place of x and s.
void resizeAxis(std::vector<double> &x, Shape3 &s, int a, int64_t m, int order) {
  if (s[a] == m)
    return;
  Shape3 t = s;
  t[a] = m;
  std::vector<double> out(static_cast<size_t>(t[0] * t[1] * t[2]));
  const int64_t strideIn = a == 0 ? s[1] * s[2] : a == 1 ? s[2] : 1;
  const int64_t strideOut = a == 0 ? t[1] * t[2] : a == 1 ? t[2] : 1;
  std::vector<double> line(static_cast<size_t>(s[a])), res(static_cast<size_t>(m)), scratch;
  // Every line along a: the other two indices.
  const int b = a == 0 ? 1 : 0, c = a == 2 ? 1 : 2;
  for (int64_t i = 0; i < s[b]; ++i)
    for (int64_t j = 0; j < s[c]; ++j) {
      int64_t idx[3] = {0, 0, 0};
      idx[b] = i;
      idx[c] = j;
      const int64_t baseIn = (idx[0] * s[1] + idx[1]) * s[2] + idx[2];
      const int64_t baseOut = (idx[0] * t[1] + idx[1]) * t[2] + idx[2];
      for (int64_t k = 0; k < s[a]; ++k)
        line[k] = x[baseIn + k * strideIn];
      resizeLine(line.data(), s[a], res.data(), m, order, scratch);
      for (int64_t k = 0; k < m; ++k)
        out[baseOut + k * strideOut] = res[k];
    }
  x = std::move(out);
  s = t;
}

void checkShapes(size_t n, const Shape3 &from, const Shape3 &to) {
  for (int a = 0; a < 3; ++a)
    if (from[a] < 1 || to[a] < 1)
      throw Error(str("resample: shapes must be positive, got ", from[0], "x", from[1], "x",
                      from[2], " -> ", to[0], "x", to[1], "x", to[2]));
  if (static_cast<int64_t>(n) != from[0] * from[1] * from[2])
    throw Error(
        str("resample: ", n, " values for a ", from[0], "x", from[1], "x", from[2], " array"));
}

} // namespace

std::vector<double> resizeImage(const std::vector<double> &in, const Shape3 &from, const Shape3 &to,
                                int order) {
  checkShapes(in.size(), from, to);
  if (from == to)
    return in;
  std::vector<double> x = in;
  Shape3 s = from;
  for (int a = 0; a < 3; ++a)
    resizeAxis(x, s, a, to[a], order);
  const auto [lo, hi] = std::minmax_element(in.begin(), in.end());
  for (double &v : x)
    v = std::clamp(v, *lo, *hi);
  return x;
}

int separateAxis(const std::array<double, 3> &current, const std::array<double, 3> &target) {
  for (const auto *sp : {&current, &target}) {
    const double mx = *std::max_element(sp->begin(), sp->end());
    const double mn = *std::min_element(sp->begin(), sp->end());
    if (mx / mn > 3) {
      int axis = -1, count = 0;
      for (int a = 0; a < 3; ++a)
        if (mx / (*sp)[a] == 1) {
          axis = a;
          ++count;
        }
      return count == 1 ? axis : -1;
    }
  }
  return -1;
}

std::vector<double> resampleImage(const std::vector<double> &in, const Shape3 &from,
                                  const Shape3 &to, int order, int axis) {
  checkShapes(in.size(), from, to);
  if (from == to)
    return in;
  if (axis < 0)
    return resizeImage(in, from, to, order);
  // In-plane per slice across `axis` (each slice its own resize, clipped to its own range),
  // then nearest along `axis`.
  Shape3 mid = to;
  mid[axis] = from[axis];
  std::vector<double> planes(static_cast<size_t>(mid[0] * mid[1] * mid[2]));
  for (int64_t k = 0; k < from[axis]; ++k) {
    Shape3 sliceShape = from, sliceTo = mid;
    sliceShape[axis] = 1;
    sliceTo[axis] = 1;
    std::vector<double> slice(static_cast<size_t>(sliceShape[0] * sliceShape[1] * sliceShape[2]));
    for (int64_t i = 0, v = 0; i < sliceShape[0]; ++i)
      for (int64_t j = 0; j < sliceShape[1]; ++j)
        for (int64_t l = 0; l < sliceShape[2]; ++l, ++v) {
          int64_t idx[3] = {i, j, l};
          idx[axis] = k;
          slice[v] = in[(idx[0] * from[1] + idx[1]) * from[2] + idx[2]];
        }
    std::vector<double> r = resizeImage(slice, sliceShape, sliceTo, order);
    for (int64_t i = 0, v = 0; i < sliceTo[0]; ++i)
      for (int64_t j = 0; j < sliceTo[1]; ++j)
        for (int64_t l = 0; l < sliceTo[2]; ++l, ++v) {
          int64_t idx[3] = {i, j, l};
          idx[axis] = k;
          planes[(idx[0] * mid[1] + idx[1]) * mid[2] + idx[2]] = r[v];
        }
  }
  Shape3 s = mid;
  resizeAxis(planes, s, axis, to[axis], 0);
  return planes;
}

std::vector<int64_t> resampleSegmentation(const std::vector<int64_t> &in, const Shape3 &from,
                                          const Shape3 &to, int axis) {
  checkShapes(in.size(), from, to);
  if (from == to)
    return in;
  std::vector<int64_t> labels = in;
  std::sort(labels.begin(), labels.end());
  labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
  Shape3 mid = to;
  if (axis >= 0)
    mid[axis] = from[axis];
  std::vector<int64_t> out(static_cast<size_t>(mid[0] * mid[1] * mid[2]), 0);
  std::vector<double> mask(in.size());
  for (int64_t label : labels) {
    for (size_t v = 0; v < in.size(); ++v)
      mask[v] = in[v] == label ? 1.0 : 0.0;
    const std::vector<double> r =
        axis < 0 ? resizeImage(mask, from, mid, 1) : resampleImage(mask, from, mid, 1, axis);
    for (size_t v = 0; v < r.size(); ++v)
      if (r[v] >= 0.5)
        out[v] = label;
  }
  if (axis < 0 || mid == to)
    return out;
  // Along the separate axis: the labels themselves, nearest.
  std::vector<double> asDouble(out.begin(), out.end());
  Shape3 s = mid;
  resizeAxis(asDouble, s, axis, to[axis], 0);
  return std::vector<int64_t>(asDouble.begin(), asDouble.end());
}

} // namespace medrun
