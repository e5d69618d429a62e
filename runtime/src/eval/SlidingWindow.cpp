//===- SlidingWindow.cpp - nnU-Net's sliding-window inference -------------------------===//
#include "medrun/SlidingWindow.h"

#include "medrun/Error.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace medrun {

std::vector<int64_t> windowStarts(int64_t size, int64_t window, double overlap) {
  if (window < 1 || size < window)
    throw Error(str("sliding window: a window of ", window, " does not fit an axis of ", size));
  if (!(overlap >= 0 && overlap < 1))
    throw Error(str("--overlap: expected a fraction in [0, 1), got ", overlap));
  const double step = window * (1 - overlap);
  const int64_t n = static_cast<int64_t>(std::ceil((size - window) / step)) + 1;
  std::vector<int64_t> starts(n, 0);
  // Evenly spaced from 0 to size - window; np.round rounds half to even, as nearbyint.
  for (int64_t i = 1; i < n; ++i)
    starts[i] = static_cast<int64_t>(
        std::nearbyint(static_cast<double>(size - window) / (n - 1) * i));
  return starts;
}

std::vector<float> gaussianImportance(const std::array<int64_t, 3> &window) {
  // A Gaussian filter of a unit impulse at the centre (i // 2), divided by its maximum:
  // the separable product of exp(-d²/2σ²).
  std::array<std::vector<double>, 3> axis;
  for (int a = 0; a < 3; ++a) {
    const double sigma = window[a] / 8.0, c = static_cast<double>(window[a] / 2);
    for (int64_t i = 0; i < window[a]; ++i)
      axis[a].push_back(std::exp(-(i - c) * (i - c) / (2 * sigma * sigma)));
  }
  std::vector<float> w(static_cast<size_t>(window[0] * window[1] * window[2]));
  float smallest = std::numeric_limits<float>::max();
  size_t k = 0;
  for (int64_t z = 0; z < window[0]; ++z)
    for (int64_t y = 0; y < window[1]; ++y)
      for (int64_t x = 0; x < window[2]; ++x, ++k) {
        w[k] = static_cast<float>(axis[0][z] * axis[1][y] * axis[2][x]);
        if (w[k] > 0)
          smallest = std::min(smallest, w[k]);
      }
  // A zero weight would leave a voxel covered by only that window undefined (0 / 0).
  for (float &v : w)
    if (v == 0)
      v = smallest;
  return w;
}

namespace {

struct Job {
  std::array<int64_t, 3> corner; ///< in the padded image
  int flips;                     ///< bit a: flip spatial axis a
};

/// Copies the window at `corner` of `vol` (C x dims) into `win_data` (C x win), flipping
/// the spatial axes in `flips`.
void copyWindow(const float *vol, const std::array<int64_t, 3> &dims, int64_t channels,
                const std::array<int64_t, 3> &corner, const std::array<int64_t, 3> &win,
                int flips, float *win_data) {
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t z = 0; z < win[0]; ++z)
      for (int64_t y = 0; y < win[1]; ++y) {
        const int64_t sz = flips & 1 ? win[0] - 1 - z : z, sy = flips & 2 ? win[1] - 1 - y : y;
        const float *row = vol + ((c * dims[0] + corner[0] + sz) * dims[1] + corner[1] + sy) *
                                     dims[2] + corner[2];
        float *out = win_data + ((c * win[0] + z) * win[1] + y) * win[2];
        if (flips & 4)
          for (int64_t x = 0; x < win[2]; ++x)
            out[x] = row[win[2] - 1 - x];
        else
          std::memcpy(out, row, win[2] * sizeof(float));
      }
}

} // namespace

static std::array<int64_t, 3> paddedShape(const std::array<int64_t, 3> &shape,
                                          const std::array<int64_t, 3> &window) {
  return {std::max(shape[0], window[0]), std::max(shape[1], window[1]),
          std::max(shape[2], window[2])};
}

static std::vector<Job> jobsFor(const std::array<int64_t, 3> &padded,
                                const SlidingWindowOptions &o) {
  std::array<std::vector<int64_t>, 3> starts;
  for (int a = 0; a < 3; ++a)
    starts[a] = windowStarts(padded[a], o.window[a], o.overlap);
  std::vector<Job> jobs;
  for (int64_t z : starts[0])
    for (int64_t y : starts[1])
      for (int64_t x : starts[2])
        for (int f = 0; f < (o.mirror ? 8 : 1); ++f)
          jobs.push_back({{z, y, x}, f});
  return jobs;
}

static void checkOptions(const SlidingWindowOptions &o) {
  if (o.batch < 1)
    throw Error(str("sliding window: the batch must hold at least one window, got ", o.batch));
  for (int64_t w : o.window)
    if (w < 1)
      throw Error(str("sliding window: the window ", o.window[0], "x", o.window[1], "x",
                      o.window[2], " is empty"));
}

int64_t slidingWindowBatches(const std::array<int64_t, 3> &shape,
                             const SlidingWindowOptions &o) {
  checkOptions(o);
  const int64_t jobs = static_cast<int64_t>(jobsFor(paddedShape(shape, o.window), o).size());
  return (jobs + o.batch - 1) / o.batch;
}

Tensor slidingWindow(const Tensor &image, const SlidingWindowOptions &o,
                     const WindowPredictor &predict,
                     const std::function<void(int64_t, int64_t)> &progress) {
  checkOptions(o);
  if (image.dtype() != DType::F32 || image.rank() != 4)
    throw Error("sliding window: the image must be f32 [C, D, H, W]");
  const int64_t cin = image.dim(0);
  const std::array<int64_t, 3> shape{image.dim(1), image.dim(2), image.dim(3)};
  const std::array<int64_t, 3> padded = paddedShape(shape, o.window), &win = o.window;
  std::array<int64_t, 3> pad{}; // the image's corner in the padded volume (centred)
  for (int a = 0; a < 3; ++a)
    pad[a] = (padded[a] - shape[a]) / 2;

  // The padded image (zeros around), so every window lies inside it.
  Tensor src = image;
  if (padded != shape) {
    src = Tensor(DType::F32, {cin, padded[0], padded[1], padded[2]});
    for (int64_t c = 0; c < cin; ++c)
      for (int64_t z = 0; z < shape[0]; ++z)
        for (int64_t y = 0; y < shape[1]; ++y)
          std::memcpy(src.data<float>() +
                          ((c * padded[0] + z + pad[0]) * padded[1] + y + pad[1]) * padded[2] +
                          pad[2],
                      image.data<float>() + ((c * shape[0] + z) * shape[1] + y) * shape[2],
                      shape[2] * sizeof(float));
  }

  const std::vector<Job> jobs = jobsFor(padded, o);
  const int64_t winVoxels = win[0] * win[1] * win[2];
  std::vector<float> weight =
      o.gaussian ? gaussianImportance(win) : std::vector<float>(winVoxels, 1.0f);
  const int64_t total = (static_cast<int64_t>(jobs.size()) + o.batch - 1) / o.batch;
  const int64_t paddedVoxels = padded[0] * padded[1] * padded[2];

  Tensor sum;                                  // [Cout, padded]: weighted predictions
  std::vector<float> weights(paddedVoxels, 0); // summed weights
  int64_t cout = -1;
  Tensor batch(DType::F32, {o.batch, cin, win[0], win[1], win[2]});
  std::vector<float> back; // one output window flipped back
  for (int64_t b = 0; b < total; ++b) {
    const int64_t first = b * o.batch;
    const int64_t n = std::min<int64_t>(o.batch, static_cast<int64_t>(jobs.size()) - first);
    std::memset(batch.raw(), 0, batch.nbytes());
    for (int64_t i = 0; i < n; ++i)
      copyWindow(src.data<float>(), padded, cin, jobs[first + i].corner, win,
                 jobs[first + i].flips, batch.data<float>() + i * cin * winVoxels);
    Tensor out = predict(batch);
    if (out.dtype() != DType::F32)
      out = out.to(DType::F32);
    if (out.rank() != 5 || out.dim(0) != o.batch || out.dim(2) != win[0] ||
        out.dim(3) != win[1] || out.dim(4) != win[2] || (cout >= 0 && out.dim(1) != cout))
      throw Error(str("sliding window: the network returned ", shapeStr(out.shape()),
                      " for windows of ", shapeStr(batch.shape()), " (expected [", o.batch,
                      ", C, ", win[0], ", ", win[1], ", ", win[2], "])"));
    if (cout < 0) {
      cout = out.dim(1);
      sum = Tensor(DType::F32, {cout, padded[0], padded[1], padded[2]});
      back.resize(cout * winVoxels);
    }
    for (int64_t i = 0; i < n; ++i) {
      const Job &job = jobs[first + i];
      // Flipping is its own inverse: reading the output window flipped puts it back.
      std::array<int64_t, 3> origin{0, 0, 0};
      copyWindow(out.data<float>() + i * cout * winVoxels, win, cout, origin, win, job.flips,
                 back.data());
      for (int64_t c = 0; c < cout; ++c)
        for (int64_t z = 0; z < win[0]; ++z)
          for (int64_t y = 0; y < win[1]; ++y) {
            const int64_t at = ((job.corner[0] + z) * padded[1] + job.corner[1] + y) * padded[2] +
                               job.corner[2];
            const int64_t w0 = (z * win[1] + y) * win[2];
            float *acc = sum.data<float>() + c * paddedVoxels + at;
            const float *p = back.data() + c * winVoxels + w0;
            for (int64_t x = 0; x < win[2]; ++x)
              acc[x] += p[x] * weight[w0 + x];
            if (c == 0)
              for (int64_t x = 0; x < win[2]; ++x)
                weights[at + x] += weight[w0 + x];
          }
    }
    if (progress)
      progress(b + 1, total);
  }

  Tensor result(DType::F32, {cout, shape[0], shape[1], shape[2]});
  for (int64_t c = 0; c < cout; ++c)
    for (int64_t z = 0; z < shape[0]; ++z)
      for (int64_t y = 0; y < shape[1]; ++y) {
        const int64_t at = ((z + pad[0]) * padded[1] + y + pad[1]) * padded[2] + pad[2];
        const float *acc = sum.data<float>() + c * paddedVoxels + at;
        float *dst = result.data<float>() + ((c * shape[0] + z) * shape[1] + y) * shape[2];
        for (int64_t x = 0; x < shape[2]; ++x)
          dst[x] = acc[x] / weights[at + x];
      }
  return result;
}

void applyActivation(Tensor &t, const std::string &activation) {
  if (activation == "none")
    return;
  if (activation != "sigmoid" && activation != "softmax")
    throw Error(str("--activation: expected sigmoid, softmax or none, got '", activation, "'"));
  const int64_t channels = t.dim(0), voxels = t.numel() / channels;
  float *p = t.data<float>();
  if (activation == "sigmoid") {
    for (int64_t i = 0; i < t.numel(); ++i)
      p[i] = 1.0f / (1.0f + std::exp(-p[i]));
    return;
  }
  for (int64_t v = 0; v < voxels; ++v) {
    float m = p[v];
    for (int64_t c = 1; c < channels; ++c)
      m = std::max(m, p[c * voxels + v]);
    float s = 0;
    for (int64_t c = 0; c < channels; ++c)
      s += p[c * voxels + v] = std::exp(p[c * voxels + v] - m);
    for (int64_t c = 0; c < channels; ++c)
      p[c * voxels + v] /= s;
  }
}

} // namespace medrun
