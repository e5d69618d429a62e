//===- DataLoader.cpp - patch sampler and the batch loader ---------------------===//
//
// The sampler decides where every patch comes from as a pure function of (seed, step,
// sample of the step's global batch). The loader's workers claim steps in order, each into a free buffer of a
// fixed pool, and only crop, pad and convert; next() hands the batches out in step order.
// Because a step is claimed only together with a buffer, the lowest unserved step always
// has one, so the pool cannot deadlock while the consumer holds fewer than all buffers.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Data.h"
#include "medrun/Error.h"
#include "medrun/Parallel.h"
#include "medrun/RecipeRules.h"

#include "DataRandom.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

namespace medrun {

namespace {

const char *kTensorNames = "image, labels, affinity, affinity_mask, segmentation, "
                           "segmentation/F (F = 2, 4, 8, ...), instances or classes";

std::string patchStr(const Index3 &p) { return str(p[0], "x", p[1], "x", p[2]); }

/// Parses "segmentation/F"; returns 0 if `name` is not of that form.
int64_t segmentationFactor(const std::string &name) {
  const std::string prefix = "segmentation/";
  if (name.compare(0, prefix.size(), prefix) != 0 || name.size() == prefix.size() ||
      name.size() > prefix.size() + 9)
    return 0;
  int64_t f = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9')
      return 0;
    f = f * 10 + (name[i] - '0');
  }
  return f;
}

} // namespace

void validate(const LoaderSpec &spec) {
  // The recipe's limits (RecipeRules.h), which medc and medrun check first.
  if (spec.batch < 1 || spec.batch > recipe::kMaxBatch)
    throw Error(str("data.batch: expected a batch size in 1..", recipe::kMaxBatch, ", got ",
                    spec.batch));
  for (int64_t p : spec.patch)
    if (p < 1 || p > recipe::kMaxPatch)
      throw Error(str("data.patch: expected three sizes in 1..", recipe::kMaxPatch, ", got ",
                      patchStr(spec.patch)));
  if (spec.tensors.empty())
    throw Error(str("data.tensors: expected at least one tensor name (", kTensorNames, ")"));
  std::set<std::string> seen;
  for (const std::string &name : spec.tensors) {
    if (!seen.insert(name).second)
      throw Error(str("data.tensors: '", name, "' is listed twice"));
    if (name == "image" || name == "labels" || name == "affinity" || name == "affinity_mask" ||
        name == "segmentation" || name == "instances" || name == "classes")
      continue;
    if (name.rfind("segmentation/", 0) == 0) {
      int64_t f = segmentationFactor(name);
      if (f < 2 || (f & (f - 1)) != 0)
        throw Error(str("data.tensors: '", name,
                        "': expected segmentation/F with F a power of two >= 2"));
      for (int64_t p : spec.patch)
        if (p % f != 0)
          throw Error(str("data.tensors: '", name, "': the factor ", f,
                          " does not divide the patch ", patchStr(spec.patch)));
      continue;
    }
    throw Error(str("data.tensors: unknown tensor '", name, "' (expected ", kTensorNames, ")"));
  }
  if (spec.imageChannels < 1 || spec.imageChannels > 64)
    throw Error(str("data: image channels must be 1..64 (the model's input channels), got ",
                    spec.imageChannels));
  if (spec.affinityChannels < 1 || spec.affinityChannels > 6)
    throw Error(str("data: affinity channels must be 1..6 (the model's output channels), got ",
                    spec.affinityChannels));
  if (spec.workers < 1 || spec.workers > recipe::kMaxWorkers)
    throw Error(str("data.workers: expected 1..", recipe::kMaxWorkers, " worker threads, got ",
                    spec.workers));
  if (spec.prefetch < 1 || spec.prefetch > recipe::kMaxPrefetch)
    throw Error(str("data.prefetch: expected 1..", recipe::kMaxPrefetch, " batch buffers, got ",
                    spec.prefetch));
  if (!(spec.foreground >= 0 && spec.foreground <= 1))
    throw Error(str("data.foreground: expected a fraction in [0, 1], got ", spec.foreground));
  if (spec.ranks < 1 || spec.rank < 0 || spec.rank >= spec.ranks)
    throw Error(str("data: rank ", spec.rank, " of ", spec.ranks, " ranks (expected 0 <= rank < ranks)"));
  if (spec.ranks * spec.batch >= (int64_t(1) << 24)) // sample numbers fill 24 bits of a counter
    throw Error(str("data: a global batch of ", spec.ranks, " ranks x ", spec.batch,
                    " samples: expected fewer than 16777216"));
}

bool oversampled(int64_t j, int64_t batch, double fraction) {
  // Python's round(): half to even.
  const double x = static_cast<double>(batch) * (1.0 - fraction);
  const double fl = std::floor(x);
  int64_t r = static_cast<int64_t>(fl);
  if (x - fl > 0.5 || (x - fl == 0.5 && r % 2 != 0))
    ++r;
  return j >= r;
}

std::vector<int32_t> connectedComponents(const int32_t *ids, const Index3 &shape, int32_t *out) {
  const int64_t D = shape[0], H = shape[1], W = shape[2], n = D * H * W;
  std::fill(out, out + n, 0);
  std::vector<int32_t> rawOf = {0};
  std::vector<int64_t> stack;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t raw = ids[i];
    if (raw < 0) { // unlabelled (padding) stays -1
      out[i] = -1;
      continue;
    }
    if (raw == 0 || out[i] != 0)
      continue;
    const int32_t label = static_cast<int32_t>(rawOf.size());
    rawOf.push_back(raw);
    out[i] = label;
    stack.push_back(i);
    while (!stack.empty()) {
      const int64_t v = stack.back();
      stack.pop_back();
      const int64_t z = v / (H * W), y = v / W % H, x = v % W;
      auto visit = [&](bool inside, int64_t u) {
        if (inside && out[u] == 0 && ids[u] == raw) {
          out[u] = label;
          stack.push_back(u);
        }
      };
      visit(z > 0, v - H * W);
      visit(z + 1 < D, v + H * W);
      visit(y > 0, v - W);
      visit(y + 1 < H, v + W);
      visit(x > 0, v - 1);
      visit(x + 1 < W, v + 1);
    }
  }
  return rawOf;
}

// ---- Sampler --------------------------------------------------------------------------

namespace {

Index3 spatialShape(const Volume &v) { return {v.image.dim(1), v.image.dim(2), v.image.dim(3)}; }

/// The range of patch corners along one axis: [min(0, V-P), max(0, V-P)].
void cornerRange(int64_t volume, int64_t patch, int64_t &lo, int64_t &hi) {
  lo = std::min<int64_t>(0, volume - patch);
  hi = std::max<int64_t>(0, volume - patch);
}

void checkVolumeTensor(size_t index, const char *what, const Tensor &t, DType dtype,
                       int64_t channels, const Index3 &shape) {
  Shape want = {channels, shape[0], shape[1], shape[2]};
  if (!t.defined() || t.dtype() != dtype || t.shape() != want)
    throw Error(str("data: volume ", index, ": ", what, ": expected ", dtypeName(dtype), " ",
                    shapeStr(want), ", got ",
                    t.defined() ? str(dtypeName(t.dtype()), " ", shapeStr(t.shape()))
                                : std::string("nothing")));
}

} // namespace

PatchSource::~PatchSource() = default;

namespace {

/// In-memory volumes: views are the volumes themselves.
class MemorySource : public PatchSource {
public:
  explicit MemorySource(std::shared_ptr<const std::vector<Volume>> volumes)
      : volumes_(std::move(volumes)) {
    if (!volumes_ || volumes_->empty())
      throw Error("data: the dataset has no volumes (expected at least 1)");
    const std::vector<Volume> &vols = *volumes_;
    for (size_t i = 0; i < vols.size(); ++i) {
      const Tensor &img = vols[i].image;
      if (!img.defined() || img.dtype() != DType::F32 || img.rank() != 4 || img.dim(0) != 1)
        throw Error(str("data: volume ", i, ": image: expected f32 1xDxHxW, got ",
                        img.defined() ? str(dtypeName(img.dtype()), " ", shapeStr(img.shape()))
                                      : std::string("nothing")));
      const Tensor &seg = vols[i].segmentation;
      if (seg.defined())
        checkVolumeTensor(i, "segmentation", seg, DType::U8, 1, spatialShape(vols[i]));
      else
        checkVolumeTensor(i, "labels", vols[i].labels, DType::I32, 1, spatialShape(vols[i]));
    }
    // Foreground voxels per class (the segmentation's classes, or labels != 0 as class 1).
    foreground_.resize(vols.size());
    classes_.resize(vols.size());
    parallelFor(static_cast<int64_t>(vols.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const Volume &v = vols[i];
        const int64_t n = v.image.numel();
        std::vector<std::vector<int64_t>> byClass(v.segmentation.defined() ? 256 : 2);
        if (v.segmentation.defined()) {
          const uint8_t *s = v.segmentation.data<uint8_t>();
          for (int64_t k = 0; k < n; ++k)
            if (s[k] != 0)
              byClass[s[k]].push_back(k);
        } else {
          const int32_t *l = v.labels.data<int32_t>();
          for (int64_t k = 0; k < n; ++k)
            if (l[k] != 0)
              byClass[1].push_back(k);
        }
        for (size_t c = 1; c < byClass.size(); ++c)
          if (!byClass[c].empty()) {
            classes_[i].push_back(static_cast<int64_t>(c));
            foreground_[i].push_back(std::move(byClass[c]));
          }
      }
    });
  }
  int64_t size() const override { return static_cast<int64_t>(volumes_->size()); }
  Index3 shape(int64_t v) const override { return spatialShape((*volumes_)[v]); }
  const std::vector<int64_t> &classes(int64_t v) const override { return classes_[v]; }
  const std::vector<std::vector<int64_t>> &foreground(int64_t v) const override {
    return foreground_[v];
  }
  const Volume &read(int64_t v, const Index3 &, const Index3 &, Volume &,
                     Index3 &origin) const override {
    origin = {0, 0, 0};
    return (*volumes_)[v];
  }
  const std::vector<Volume> &volumes() const { return *volumes_; }

private:
  std::shared_ptr<const std::vector<Volume>> volumes_;
  /// foreground_[v][k]: flat voxel indices of class classes_[v][k] in volume v.
  std::vector<std::vector<std::vector<int64_t>>> foreground_;
  std::vector<std::vector<int64_t>> classes_;
};

} // namespace

std::shared_ptr<const PatchSource> memorySource(std::shared_ptr<const std::vector<Volume>> volumes) {
  return std::make_shared<MemorySource>(std::move(volumes));
}

Sampler::Sampler(std::shared_ptr<const std::vector<Volume>> volumes, const LoaderSpec &spec)
    : Sampler(memorySource(std::move(volumes)), spec) {}

Sampler::Sampler(std::shared_ptr<const PatchSource> source, const LoaderSpec &spec)
    : source_(std::move(source)), spec_(spec) {
  validate(spec_);
  if (!source_ || source_->size() == 0)
    throw Error("data: the dataset has no volumes (expected at least 1)");
}

PatchInfo Sampler::sample(int64_t step, int64_t local) const {
  // The sample's place in the step's global batch keys its numbers: a job of any number of
  // ranks draws the same samples for the same global batch.
  const int64_t j = spec_.rank * spec_.batch + local, global = spec_.ranks * spec_.batch;
  data::Stream s(spec_.seed, data::TagSample | static_cast<uint32_t>(j) << 8, data::lo32(step),
                 data::hi32(step) & 0xffffu);
  PatchInfo info;
  info.volume = static_cast<int64_t>(s.below(static_cast<uint64_t>(source_->size())));
  const Index3 shape = source_->shape(info.volume);
  Index3 lo, hi;
  for (int a = 0; a < 3; ++a)
    cornerRange(shape[a], spec_.patch[a], lo[a], hi[a]);
  const auto &classes = source_->classes(info.volume);
  if (oversampled(j, global, spec_.foreground) && !classes.empty()) {
    const size_t k = s.below(classes.size());
    const std::vector<int64_t> &voxels = source_->foreground(info.volume)[k];
    const int64_t v = voxels[s.below(voxels.size())];
    const Index3 at = {v / (shape[1] * shape[2]), v / shape[2] % shape[1], v % shape[2]};
    for (int a = 0; a < 3; ++a)
      info.corner[a] = std::clamp(at[a] - spec_.patch[a] / 2, lo[a], hi[a]);
    info.forced = true;
    info.cls = classes[k];
    return info;
  }
  for (int a = 0; a < 3; ++a)
    info.corner[a] = lo[a] + static_cast<int64_t>(s.below(hi[a] - lo[a] + 1));
  return info;
}

// ---- DataLoader -----------------------------------------------------------------------

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Copies the patch at `corner` (every `stride`-th voxel from there) of one channel of a
/// volume of shape V into `dst` of shape O, converting to D; `pad` outside the volume.
template <typename T, typename D = float>
void cropChannel(const T *src, const Index3 &V, const Index3 &corner, int64_t stride,
                 D *dst, const Index3 &O, D pad = D(0)) {
  // Valid output x range: 0 <= corner + x*stride < V.
  const int64_t xa = std::min(O[2], corner[2] >= 0 ? 0 : ceilDiv(-corner[2], stride));
  const int64_t xb =
      std::max(xa, std::min(O[2], corner[2] >= V[2] ? 0 : ceilDiv(V[2] - corner[2], stride)));
  for (int64_t oz = 0; oz < O[0]; ++oz) {
    const int64_t sz = corner[0] + oz * stride;
    for (int64_t oy = 0; oy < O[1]; ++oy) {
      const int64_t sy = corner[1] + oy * stride;
      D *d = dst + (oz * O[1] + oy) * O[2];
      if (sz < 0 || sz >= V[0] || sy < 0 || sy >= V[1]) {
        std::fill(d, d + O[2], pad);
        continue;
      }
      const T *row = src + (sz * V[1] + sy) * V[2] + corner[2];
      std::fill(d, d + xa, pad);
      for (int64_t ox = xa; ox < xb; ++ox)
        d[ox] = static_cast<D>(row[ox * stride]);
      std::fill(d + xb, d + O[2], pad);
    }
  }
}

} // namespace

DataLoader::DataLoader(std::shared_ptr<const std::vector<Volume>> volumes, LoaderSpec spec,
                       int64_t firstStep, BatchAllocator allocate)
    : DataLoader(memorySource(volumes), std::move(spec), firstStep, std::move(allocate), false) {
  using Source = Request::Source;
  for (size_t i = 0; i < volumes->size(); ++i) {
    const Volume &v = (*volumes)[i];
    const Index3 shape = spatialShape(v);
    for (const Request &r : requests_) {
      if (r.source == Source::Labels || r.source == Source::Instances)
        checkVolumeTensor(i, "labels", v.labels, DType::I32, 1, shape);
      else if (r.source == Source::Affinity)
        checkVolumeTensor(i, "affinity", v.affinity, DType::U8, 6, shape);
      else if (r.source == Source::AffinityMask)
        checkVolumeTensor(i, "affinity_mask", v.affinityMask, DType::U8, 6, shape);
      else if (r.source == Source::Segmentation || r.source == Source::Classes)
        checkVolumeTensor(i, "segmentation", v.segmentation, DType::U8, 1, shape);
    }
  }
  start();
}

DataLoader::DataLoader(std::shared_ptr<const PatchSource> source, LoaderSpec spec,
                       int64_t firstStep, BatchAllocator allocate)
    : DataLoader(std::move(source), std::move(spec), firstStep, std::move(allocate), false) {
  start();
}

DataLoader::DataLoader(std::shared_ptr<const PatchSource> source, LoaderSpec spec,
                       int64_t firstStep, BatchAllocator allocate, bool)
    : source_(std::move(source)), spec_(std::move(spec)), sampler_(source_, spec_),
      nextClaim_(firstStep), nextServe_(firstStep) {
  if (firstStep < 0)
    throw Error(str("data: the first step must be >= 0, got ", firstStep));
  using Source = Request::Source;
  for (const std::string &name : spec_.tensors) {
    Request r{name, Source::Image};
    if (name == "image")
      r.channels = spec_.imageChannels;
    if (name == "labels")
      r.source = Source::Labels;
    else if (name == "affinity" || name == "affinity_mask") {
      r.source = name == "affinity" ? Source::Affinity : Source::AffinityMask;
      r.channels = spec_.affinityChannels;
    } else if (name.rfind("segmentation", 0) == 0) {
      r.source = Source::Segmentation;
      r.factor = name == "segmentation" ? 1 : segmentationFactor(name);
    } else if (name == "instances" || name == "classes") { // raw labels for augmentation
      r.source = name == "instances" ? Source::Instances : Source::Classes;
      r.dtype = DType::I32;
      r.pad = -1; // outside the volume: unlabelled (classes: nnU-Net's -1; instances: the
                  // affinities reaching there are masked, BANIS's border mask)
    }
    requests_.push_back(r);
    shapes_[name] = {spec_.batch, r.channels, spec_.patch[0] / r.factor,
                     spec_.patch[1] / r.factor, spec_.patch[2] / r.factor};
  }
  if (!allocate)
    allocate = [](DType dtype, const Shape &shape) { return Tensor(dtype, shape); };
  slots_.resize(spec_.prefetch);
  for (Slot &slot : slots_) {
    for (const Request &r : requests_) {
      const Shape &shape = shapes_.at(r.name);
      Tensor t = allocate(r.dtype, shape);
      if (t.dtype() != r.dtype || t.shape() != shape)
        throw Error(str("data: the batch allocator returned ", dtypeName(t.dtype()), " ",
                        shapeStr(t.shape()), " for ", r.name, ", expected ", dtypeName(r.dtype),
                        " ", shapeStr(shape)));
      slot.batch.tensors[r.name] = t;
    }
    slot.batch.samples.resize(spec_.batch);
  }
}

void DataLoader::start() {
  threads_.reserve(spec_.workers);
  for (int w = 0; w < spec_.workers; ++w)
    threads_.emplace_back([this] { work(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  freeCv_.notify_all();
  readyCv_.notify_all();
  for (std::thread &t : threads_)
    t.join();
}

void DataLoader::work() {
  for (;;) {
    size_t index = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      auto free = [&] {
        for (index = 0; index < slots_.size(); ++index)
          if (slots_[index].state == SlotState::Free)
            return true;
        return false;
      };
      freeCv_.wait(lock, [&] { return stop_ || free(); });
      if (stop_)
        return;
      slots_[index].state = SlotState::Filling;
      slots_[index].batch.step = nextClaim_++;
    }
    Slot &slot = slots_[index];
    std::exception_ptr error;
    try {
      fill(slot.batch);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      slot.error = error;
      slot.state = SlotState::Ready;
    }
    readyCv_.notify_all();
  }
}

void DataLoader::fill(Batch &batch) {
  using Source = Request::Source;
  for (int64_t j = 0; j < spec_.batch && !stop_; ++j) {
    const PatchInfo info = sampler_.sample(batch.step, j);
    batch.samples[j] = info;
    // The view reaches past the patch by the longest affinity offset, so affinities near
    // the patch's trailing edge see their partner voxels (BANIS's long-range margin).
    Volume scratch;
    Index3 origin, extent = spec_.patch;
    for (int a = 0; a < 3; ++a)
      extent[a] += kAffinityMargin;
    const Volume &v = source_->read(info.volume, info.corner, extent, scratch, origin);
    const Index3 V = spatialShape(v);
    const int64_t nV = V[0] * V[1] * V[2];
    const Index3 corner = {info.corner[0] - origin[0], info.corner[1] - origin[1],
                           info.corner[2] - origin[2]};
    for (const Request &r : requests_) {
      const Index3 O = {spec_.patch[0] / r.factor, spec_.patch[1] / r.factor,
                        spec_.patch[2] / r.factor};
      const int64_t nO = O[0] * O[1] * O[2];
      if (r.dtype == DType::I32) { // raw labels: instance ids or classes (pad -1)
        int32_t *ids = batch.tensors.at(r.name).data<int32_t>() + j * nO;
        if (r.source == Source::Instances) { // the crop's own connected pieces
          std::vector<int32_t> crop(static_cast<size_t>(nO));
          cropChannel(v.labels.data<int32_t>(), V, corner, 1, crop.data(), O, r.pad);
          connectedComponents(crop.data(), O, ids);
        } else
          cropChannel(v.segmentation.data<uint8_t>(), V, corner, 1, ids, O, r.pad);
        continue;
      }
      float *dst = batch.tensors.at(r.name).data<float>() + j * r.channels * nO;
      for (int64_t c = 0; c < r.channels; ++c, dst += nO) {
        switch (r.source) {
        case Source::Image:
          if (v.image.dim(0) != r.channels)
            throw Error(str("data: volume ", info.volume, " has ", v.image.dim(0),
                            " image channel(s); the model takes ", r.channels));
          cropChannel(v.image.data<float>() + c * nV, V, corner, 1, dst, O);
          break;
        case Source::Labels:
          cropChannel(v.labels.data<int32_t>(), V, corner, 1, dst, O);
          break;
        case Source::Affinity:
          cropChannel(v.affinity.data<uint8_t>() + c * nV, V, corner, 1, dst, O);
          break;
        case Source::AffinityMask:
          cropChannel(v.affinityMask.data<uint8_t>() + c * nV, V, corner, 1, dst, O);
          break;
        case Source::Segmentation:
          cropChannel(v.segmentation.data<uint8_t>(), V, corner, r.factor, dst, O);
          break;
        case Source::Instances:
        case Source::Classes:
          break; // i32, above
        }
      }
    }
  }
}

const Batch &DataLoader::next(double *waitSeconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (waitSeconds)
    *waitSeconds = 0;
  if (failure_)
    std::rethrow_exception(failure_);
  if (held_.size() == slots_.size())
    throw Error(str("data: all ", slots_.size(),
                    " batch buffers are held; release() one before calling next()"));
  size_t index = 0;
  auto ready = [&] {
    for (index = 0; index < slots_.size(); ++index)
      if (slots_[index].state == SlotState::Ready && slots_[index].batch.step == nextServe_)
        return true;
    return false;
  };
  const auto start = std::chrono::steady_clock::now();
  readyCv_.wait(lock, ready);
  if (waitSeconds)
    *waitSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Slot &slot = slots_[index];
  ++nextServe_;
  if (slot.error) {
    failure_ = slot.error;
    slot.error = nullptr;
    slot.state = SlotState::Free;
    freeCv_.notify_one();
    std::rethrow_exception(failure_);
  }
  slot.state = SlotState::Held;
  held_.push_back(index);
  return slot.batch;
}

void DataLoader::release(const Batch &batch) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = std::find_if(held_.begin(), held_.end(),
                           [&](size_t i) { return &slots_[i].batch == &batch; });
    if (it == held_.end())
      throw Error("data: release() of a batch that next() did not hand out or that was "
                  "already released");
    slots_[*it].state = SlotState::Free;
    held_.erase(it);
  }
  freeCv_.notify_one();
}

void DataLoader::release() {
  const Batch *oldest = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (held_.empty())
      throw Error("data: release() with no batch held");
    oldest = &slots_[held_.front()].batch;
  }
  release(*oldest);
}

bool DataLoader::ready() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_)
    return true;
  for (const Slot &slot : slots_)
    if (slot.state == SlotState::Ready && slot.batch.step == nextServe_)
      return true;
  return false;
}

int64_t DataLoader::nextStep() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return nextServe_;
}

} // namespace medrun
