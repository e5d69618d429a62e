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

namespace {

using Index3 = std::array<int64_t, 3>;

/// The jobs of the whole volume's grid whose windows touch the block [blo, blo + bsize)
/// (padded coordinates), in the whole volume's order.
std::vector<Job> blockJobs(const Index3 &padded, const Index3 &blo, const Index3 &bsize,
                           const SlidingWindowOptions &o) {
  // The grid is a product of per-axis corners: filtering each axis keeps the whole
  // volume's order and costs the block's windows, not the volume's.
  std::array<std::vector<int64_t>, 3> starts;
  for (int a = 0; a < 3; ++a)
    for (int64_t c : windowStarts(padded[a], o.window[a], o.overlap))
      if (c < blo[a] + bsize[a] && c + o.window[a] > blo[a])
        starts[a].push_back(c);
  std::vector<Job> jobs;
  for (int64_t z : starts[0])
    for (int64_t y : starts[1])
      for (int64_t x : starts[2])
        for (int f = 0; f < (o.mirror ? 8 : 1); ++f)
          jobs.push_back({{z, y, x}, f});
  return jobs;
}

void checkBlock(const Index3 &shape, const Index3 &lo, const Index3 &size) {
  for (int a = 0; a < 3; ++a)
    if (shape[a] < 1 || lo[a] < 0 || size[a] < 1 || lo[a] + size[a] > shape[a])
      throw Error(str("sliding window: the block [", lo[0], ":", lo[0] + size[0], ", ", lo[1],
                      ":", lo[1] + size[1], ", ", lo[2], ":", lo[2] + size[2],
                      "] is not inside the volume ", shape[0], "x", shape[1], "x", shape[2]));
}

} // namespace

int64_t slidingWindowBatches(const std::array<int64_t, 3> &shape,
                             const SlidingWindowOptions &o) {
  checkOptions(o);
  const int64_t jobs = static_cast<int64_t>(jobsFor(paddedShape(shape, o.window), o).size());
  return (jobs + o.batch - 1) / o.batch;
}

int64_t slidingWindowBlockBatches(const std::array<int64_t, 3> &shape,
                                  const std::array<int64_t, 3> &lo,
                                  const std::array<int64_t, 3> &size,
                                  const SlidingWindowOptions &o) {
  checkOptions(o);
  checkBlock(shape, lo, size);
  const Index3 padded = paddedShape(shape, o.window);
  Index3 blo;
  for (int a = 0; a < 3; ++a)
    blo[a] = lo[a] + (padded[a] - shape[a]) / 2;
  const int64_t jobs = static_cast<int64_t>(blockJobs(padded, blo, size, o).size());
  return (jobs + o.batch - 1) / o.batch;
}

int64_t slidingWindowBlockBytes(const std::array<int64_t, 3> &shape, int64_t cin, int64_t cout,
                                const std::array<int64_t, 3> &size,
                                const SlidingWindowOptions &o) {
  const Index3 padded = paddedShape(shape, o.window);
  int64_t input = cin, block = 1, win = 1;
  for (int a = 0; a < 3; ++a) {
    // The windows touching a block reach at most a window less one voxel past each side.
    input *= std::min(padded[a], size[a] + 2 * (o.window[a] - 1));
    block *= size[a];
    win *= o.window[a];
  }
  // Input, sums (Cout), weights, the result (Cout), a batch in and out, one window's
  // weights and its prediction flipped back.
  return 4 * (input + (2 * cout + 1) * block + o.batch * (cin + cout) * win + (cout + 1) * win);
}

Tensor slidingWindow(const Tensor &image, const SlidingWindowOptions &o,
                     const WindowPredictor &predict,
                     const std::function<void(int64_t, int64_t)> &progress) {
  if (image.dtype() != DType::F32 || image.rank() != 4)
    throw Error("sliding window: the image must be f32 [C, D, H, W]");
  const int64_t cin = image.dim(0);
  const Index3 shape{image.dim(1), image.dim(2), image.dim(3)};
  InputReader read = [&](const Index3 &lo, const Index3 &size, float *dst) {
    for (int64_t c = 0; c < cin; ++c)
      for (int64_t z = 0; z < size[0]; ++z)
        for (int64_t y = 0; y < size[1]; ++y)
          std::memcpy(dst + ((c * size[0] + z) * size[1] + y) * size[2],
                      image.data<float>() +
                          ((c * shape[0] + lo[0] + z) * shape[1] + lo[1] + y) * shape[2] + lo[2],
                      size[2] * sizeof(float));
  };
  return slidingWindowBlock(shape, cin, {0, 0, 0}, shape, o, read, predict, progress);
}

Tensor slidingWindowBlock(const std::array<int64_t, 3> &shape, int64_t cin,
                          const std::array<int64_t, 3> &lo, const std::array<int64_t, 3> &size,
                          const SlidingWindowOptions &o, const InputReader &read,
                          const WindowPredictor &predict,
                          const std::function<void(int64_t, int64_t)> &progress) {
  checkOptions(o);
  checkBlock(shape, lo, size);
  if (cin < 1)
    throw Error(str("sliding window: the image has ", cin, " channels"));
  const Index3 padded = paddedShape(shape, o.window), &win = o.window;
  Index3 pad{}, blo{}; // the image's corner in the padded volume (centred); the block's
  for (int a = 0; a < 3; ++a) {
    pad[a] = (padded[a] - shape[a]) / 2;
    blo[a] = lo[a] + pad[a];
  }
  const std::vector<Job> jobs = blockJobs(padded, blo, size, o);

  // The input the block's windows cover, [ilo, ilo + isize) of the padded volume: zeros
  // around the image, the image's voxels read through `read`.
  Index3 ilo{}, isize{};
  for (int a = 0; a < 3; ++a) {
    int64_t first = padded[a], last = 0;
    for (const Job &j : jobs) {
      first = std::min(first, j.corner[a]);
      last = std::max(last, j.corner[a] + win[a]);
    }
    ilo[a] = first;
    isize[a] = last - first;
  }
  Tensor src(DType::F32, {cin, isize[0], isize[1], isize[2]});
  {
    Index3 rlo{}, rsize{}; // the part inside the image, image coordinates
    bool inside = true;
    for (int a = 0; a < 3; ++a) {
      const int64_t from = std::max(ilo[a], pad[a]);
      const int64_t to = std::min(ilo[a] + isize[a], pad[a] + shape[a]);
      rlo[a] = from - pad[a];
      rsize[a] = to - from;
      inside = inside && rsize[a] > 0;
    }
    if (rsize == isize) {
      read(rlo, rsize, src.data<float>());
    } else {
      std::memset(src.raw(), 0, src.nbytes());
      if (inside) {
        std::vector<float> part(static_cast<size_t>(cin * rsize[0] * rsize[1] * rsize[2]));
        read(rlo, rsize, part.data());
        for (int64_t c = 0; c < cin; ++c)
          for (int64_t z = 0; z < rsize[0]; ++z)
            for (int64_t y = 0; y < rsize[1]; ++y)
              std::memcpy(src.data<float>() +
                              ((c * isize[0] + rlo[0] + pad[0] - ilo[0] + z) * isize[1] + rlo[1] +
                               pad[1] - ilo[1] + y) *
                                  isize[2] +
                              rlo[2] + pad[2] - ilo[2],
                          part.data() + ((c * rsize[0] + z) * rsize[1] + y) * rsize[2],
                          rsize[2] * sizeof(float));
      }
    }
  }

  const int64_t winVoxels = win[0] * win[1] * win[2];
  std::vector<float> weight =
      o.gaussian ? gaussianImportance(win) : std::vector<float>(winVoxels, 1.0f);
  const int64_t total = (static_cast<int64_t>(jobs.size()) + o.batch - 1) / o.batch;
  const int64_t blockVoxels = size[0] * size[1] * size[2];

  Tensor sum;                                 // [Cout, size]: weighted predictions
  std::vector<float> weights(blockVoxels, 0); // summed weights
  int64_t cout = -1;
  Tensor batch(DType::F32, {o.batch, cin, win[0], win[1], win[2]});
  std::vector<float> back; // one output window flipped back
  for (int64_t b = 0; b < total; ++b) {
    const int64_t first = b * o.batch;
    const int64_t n = std::min<int64_t>(o.batch, static_cast<int64_t>(jobs.size()) - first);
    std::memset(batch.raw(), 0, batch.nbytes());
    for (int64_t i = 0; i < n; ++i) {
      const Job &job = jobs[first + i];
      const Index3 at{job.corner[0] - ilo[0], job.corner[1] - ilo[1], job.corner[2] - ilo[2]};
      copyWindow(src.data<float>(), isize, cin, at, win, job.flips,
                 batch.data<float>() + i * cin * winVoxels);
    }
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
      sum = Tensor(DType::F32, {cout, size[0], size[1], size[2]});
      std::memset(sum.raw(), 0, sum.nbytes());
      back.resize(cout * winVoxels);
    }
    for (int64_t i = 0; i < n; ++i) {
      const Job &job = jobs[first + i];
      // Flipping is its own inverse: reading the output window flipped puts it back.
      std::array<int64_t, 3> origin{0, 0, 0};
      copyWindow(out.data<float>() + i * cout * winVoxels, win, cout, origin, win, job.flips,
                 back.data());
      // The window's part inside the block, window coordinates [w0, w1).
      Index3 w0, w1;
      for (int a = 0; a < 3; ++a) {
        w0[a] = std::max<int64_t>(0, blo[a] - job.corner[a]);
        w1[a] = std::min<int64_t>(win[a], blo[a] + size[a] - job.corner[a]);
      }
      const int64_t nx = w1[2] - w0[2];
      for (int64_t c = 0; c < cout; ++c)
        for (int64_t z = w0[0]; z < w1[0]; ++z)
          for (int64_t y = w0[1]; y < w1[1]; ++y) {
            const int64_t at = ((job.corner[0] + z - blo[0]) * size[1] + job.corner[1] + y -
                                blo[1]) * size[2] + job.corner[2] + w0[2] - blo[2];
            const int64_t wi = (z * win[1] + y) * win[2] + w0[2];
            float *acc = sum.data<float>() + c * blockVoxels + at;
            const float *p = back.data() + c * winVoxels + wi;
            for (int64_t x = 0; x < nx; ++x)
              acc[x] += p[x] * weight[wi + x];
            if (c == 0)
              for (int64_t x = 0; x < nx; ++x)
                weights[at + x] += weight[wi + x];
          }
    }
    if (progress)
      progress(b + 1, total);
  }

  float *acc = sum.data<float>();
  for (int64_t c = 0; c < cout; ++c)
    for (int64_t v = 0; v < blockVoxels; ++v)
      acc[c * blockVoxels + v] /= weights[v];
  return sum;
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
