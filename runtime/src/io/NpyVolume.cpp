//===- NpyVolume.cpp - NumPy .npy files as volumes ------------------------------------===//
//
// The header is Npy.cpp's; the data is read in place by slabs of whole planes (one pread
// each), so a patch reads only the planes it touches. Descrs beyond the tensor reader's:
// unsigned 16/32/64-bit integers (label volumes).
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Npy.h"
#include "medrun/Sizes.h"
#include "medrun/Volume.h"

#include <algorithm>

namespace medrun::io {
namespace {

class NpyReader : public VolumeReader {
public:
  NpyReader(const std::string &path, int64_t channel) : file_(path) {
    info_.path = path;
    info_.format = "npy";
    const detail::NpyHeader h = detail::readNpyHeader(file_);
    static const std::pair<const char *, VoxelType> codes[] = {
        {"u1", VoxelType::U8},  {"i1", VoxelType::I8},  {"b1", VoxelType::U8},
        {"u2", VoxelType::U16}, {"i2", VoxelType::I16}, {"u4", VoxelType::U32},
        {"i4", VoxelType::I32}, {"u8", VoxelType::U64}, {"i8", VoxelType::I64},
        {"f4", VoxelType::F32}, {"f8", VoxelType::F64}};
    bool known = false;
    if (h.descr.size() == 3 && (h.descr[0] == '<' || h.descr[0] == '|' || h.descr[0] == '='))
      for (auto &[c, t] : codes)
        if (h.descr.compare(1, 2, c) == 0) {
          info_.type = t;
          known = true;
        }
    if (!known)
      throw Error(str(path, ": unsupported descr '", h.descr,
                      "' for a volume (expected little-endian u1, i1, b1, u2, i2, u4, i4, u8, "
                      "i8, f4 or f8)"));
    const ArrayAxes axes = arrayAxes(h.shape, path, channel);
    info_.shape = axes.shape;
    info_.channels = axes.channels;
    // The shape's product, checked, against the bytes the file holds after its header.
    const int64_t count = checkedCount(h.shape, str(path, " (.npy header)"));
    const uint64_t avail = file_.size() - h.dataOffset;
    const uint64_t total =
        checkedBytes(count, voxelSize(info_.type), avail, str(path, " (.npy shape ",
                                                              shapeString(h.shape), ", '", h.descr, "')"),
                     str("the ", avail, " bytes of array data the file holds"));
    if (total != avail)
      throw Error(str(path, ": expected ", total, " bytes of array data (shape ",
                      shapeString(h.shape), ", '", h.descr, "'), the file has ", avail));
    const uint64_t bytes = total / static_cast<uint64_t>(info_.channels);
    offset_ = h.dataOffset + bytes * std::max<int64_t>(channel, 0); // channels come first
    const int64_t plane = info_.shape[1] * info_.shape[2] * static_cast<int64_t>(voxelSize(info_.type));
    info_.chunk = {std::clamp<int64_t>((int64_t(4) << 20) / plane, 1, info_.shape[0]),
                   info_.shape[1], info_.shape[2]};
  }

protected:
  void decode(const Box3 &lo, const Box3 &size, void *dst) const override {
    // Chunks are slabs of whole planes: one contiguous read.
    const uint64_t plane = static_cast<uint64_t>(info_.shape[1] * info_.shape[2]) *
                           voxelSize(info_.type);
    file_.read(offset_ + lo[0] * plane, dst, static_cast<size_t>(size[0] * plane), "array data");
  }

private:
  detail::InputFile file_;
  uint64_t offset_ = 0;
};

} // namespace

std::unique_ptr<VolumeReader> openNpy(const std::string &path, int64_t channel) {
  return std::make_unique<NpyReader>(path, channel);
}

void writeNpyVolume(const std::string &path, const VolumeData &v) {
  DType t;
  switch (v.type) {
  case VoxelType::U8: t = DType::U8; break;
  case VoxelType::I8: t = DType::I8; break;
  case VoxelType::I16: t = DType::I16; break;
  case VoxelType::I32: t = DType::I32; break;
  case VoxelType::I64: t = DType::I64; break;
  case VoxelType::F32: t = DType::F32; break;
  case VoxelType::F64: t = DType::F64; break;
  default:
    throw Error(str(path, ": cannot write ", voxelTypeName(v.type), " as .npy (write int64 or "
                          "another format)"));
  }
  Tensor tensor(t, v.channels > 1 ? Shape{v.channels, v.shape[0], v.shape[1], v.shape[2]}
                                   : Shape{v.shape[0], v.shape[1], v.shape[2]});
  std::copy_n(static_cast<const char *>(v.data), tensor.nbytes(), static_cast<char *>(tensor.raw()));
  writeNpy(path, tensor);
}

} // namespace medrun::io
