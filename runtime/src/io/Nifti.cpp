//===- Nifti.cpp - NIfTI-1/-2 volumes (.nii, .nii.gz) through nifticlib --------------===//
//
// NIfTI's i, j, k (x fastest on disk) are the volume's x, y, z, so the C-order array is
// z, y, x as everywhere else. An uncompressed file is read by slabs of planes
// (nifti_read_subregion_image seeks to them); a gzip'd one decodes as one chunk, since
// gzip cannot seek (the chunk cache keeps it decoded). scl_slope/scl_inter, when set,
// are applied and the volume reads as float32. The affine is the sform, else the qform,
// else pixdim scaling, as nibabel chooses.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Volume.h"

#ifdef MEDRUN_HAVE_NIFTI

#include <nifti2_io.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <unistd.h>

namespace medrun::io {
namespace {

/// nifticlib keeps global state (debug level) and an image's data pointer: one lock.
std::mutex &niftiMutex() {
  static std::mutex m;
  return m;
}

bool voxelTypeOf(int datatype, VoxelType &t) {
  switch (datatype) {
  case DT_UINT8: t = VoxelType::U8; return true;
  case DT_INT8: t = VoxelType::I8; return true;
  case DT_UINT16: t = VoxelType::U16; return true;
  case DT_INT16: t = VoxelType::I16; return true;
  case DT_UINT32: t = VoxelType::U32; return true;
  case DT_INT32: t = VoxelType::I32; return true;
  case DT_UINT64: t = VoxelType::U64; return true;
  case DT_INT64: t = VoxelType::I64; return true;
  case DT_FLOAT32: t = VoxelType::F32; return true;
  case DT_FLOAT64: t = VoxelType::F64; return true;
  default: return false;
  }
}

int datatypeOf(VoxelType t) {
  switch (t) {
  case VoxelType::U8: return DT_UINT8;
  case VoxelType::I8: return DT_INT8;
  case VoxelType::U16: return DT_UINT16;
  case VoxelType::I16: return DT_INT16;
  case VoxelType::U32: return DT_UINT32;
  case VoxelType::I32: return DT_INT32;
  case VoxelType::U64: return DT_UINT64;
  case VoxelType::I64: return DT_INT64;
  case VoxelType::F32: return DT_FLOAT32;
  case VoxelType::F64: return DT_FLOAT64;
  }
  return DT_UNKNOWN;
}

template <typename S> void scaleInto(const void *src, float *dst, int64_t n, double a, double b) {
  const S *s = static_cast<const S *>(src);
  for (int64_t i = 0; i < n; ++i)
    dst[i] = static_cast<float>(a * static_cast<double>(s[i]) + b);
}

class NiftiReader : public VolumeReader {
public:
  NiftiReader(const std::string &path, int64_t channel) : channel_(std::max<int64_t>(channel, 0)) {
    info_.path = path;
    info_.format = "nifti";
    {
      std::lock_guard<std::mutex> lock(niftiMutex());
      nifti_set_debug_level(0);
      nim_ = nifti_image_read(path.c_str(), 0);
    }
    if (!nim_)
      throw Error(str(path, ": cannot read as a NIfTI-1/-2 image (a bad header, or not NIfTI)"));
    if (!voxelTypeOf(nim_->datatype, fileType_))
      throw Error(str(path, ": unsupported NIfTI datatype ", nim_->datatype, " (",
                      nifti_datatype_string(nim_->datatype),
                      "; expected an integer type or float32/float64)"));
    std::vector<int64_t> dims; // C order: w, v, u, t, z, y, x
    for (int d = 7; d >= 1; --d)
      dims.push_back(nim_->dim[d] > 0 ? nim_->dim[d] : 1);
    if (nim_->dim[0] < 1 || nim_->dim[0] > 7)
      throw Error(str(path, ": bad NIfTI dim[0] = ", nim_->dim[0], " (expected 1..7)"));
    // Channels (openChannel) are dim[4], t, as writeNifti writes them.
    const int64_t t = nim_->dim[0] > 3 ? std::max<int64_t>(nim_->nt, 1) : 1;
    const int64_t more = nim_->dim[0] > 4 ? int64_t(nim_->nu) * nim_->nv * nim_->nw : 1;
    if (channel < 0 ? t * more > 1 : more > 1)
      throw Error(str(path, ": a ", nim_->dim[0], "-D image (dim = ", nim_->nx, "x", nim_->ny, "x",
                      nim_->nz, "x", nim_->nt, "...): expected a 3-D volume, one channel per "
                      "file (nnU-Net's CASE_0000, CASE_0001, ...)",
                      channel < 0 ? "" : ", or channels in dim[4]"));
    std::vector<int64_t> spatial(dims.end() - 3, dims.end());
    info_.shape = squeeze3(spatial, path);
    info_.channels = channel < 0 ? 1 : t;
    if (channel >= info_.channels)
      throw Error(str(path, ": no channel ", channel, " (the image has ", info_.channels,
                      info_.channels == 1 ? " channel)" : " channels in dim[4])"));
    info_.type = fileType_;
    slope_ = nim_->scl_slope, inter_ = nim_->scl_inter;
    scaled_ = std::isfinite(slope_) && slope_ != 0 && (slope_ != 1 || inter_ != 0);
    if (scaled_)
      info_.type = VoxelType::F32;
    info_.spacing = {std::abs(nim_->dz) > 0 ? std::abs(nim_->dz) : 1.0,
                     std::abs(nim_->dy) > 0 ? std::abs(nim_->dy) : 1.0,
                     std::abs(nim_->dx) > 0 ? std::abs(nim_->dx) : 1.0};
    // A NIfTI header always carries pixdim; all zero means it says nothing.
    if (nim_->dx != 0 || nim_->dy != 0 || nim_->dz != 0)
      info_.spacingFrom = "the header's pixdim";
    const nifti_dmat44 *m = nim_->sform_code > 0   ? &nim_->sto_xyz
                            : nim_->qform_code > 0 ? &nim_->qto_xyz
                                                   : nullptr;
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c)
        info_.affine[r * 4 + c] =
            m ? m->m[r][c] : (r == c ? (r < 3 ? info_.spacing[2 - r] : 1.0) : 0.0);
    std::string lower = path;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    compressed_ = lower.size() > 3 && lower.compare(lower.size() - 3, 3, ".gz") == 0;
    const int64_t plane = info_.shape[1] * info_.shape[2] * nim_->nbyper;
    info_.chunk = compressed_ ? info_.shape
                              : Box3{std::clamp<int64_t>((int64_t(4) << 20) / plane, 1,
                                                         info_.shape[0]),
                                     info_.shape[1], info_.shape[2]};
  }
  ~NiftiReader() override {
    if (nim_)
      nifti_image_free(nim_);
  }

protected:
  void decode(const Box3 &lo, const Box3 &size, void *dst) const override {
    int64_t start[7] = {lo[2], lo[1], lo[0], channel_, 0, 0, 0};
    int64_t count[7] = {size[2], size[1], size[0], 1, 1, 1, 1};
    const int64_t n = size[0] * size[1] * size[2];
    void *data = nullptr;
    int64_t got;
    {
      std::lock_guard<std::mutex> lock(niftiMutex());
      got = nifti_read_subregion_image(nim_, start, count, &data);
    }
    if (got != n * nim_->nbyper) {
      std::free(data);
      throw Error(str(info_.path, ": cannot read the image data (truncated or corrupt; read ", got,
                      " of ", n * nim_->nbyper, " bytes)"));
    }
    if (!scaled_) {
      std::memcpy(dst, data, static_cast<size_t>(got));
    } else {
      float *out = static_cast<float *>(dst);
      switch (fileType_) {
      case VoxelType::U8: scaleInto<uint8_t>(data, out, n, slope_, inter_); break;
      case VoxelType::I8: scaleInto<int8_t>(data, out, n, slope_, inter_); break;
      case VoxelType::U16: scaleInto<uint16_t>(data, out, n, slope_, inter_); break;
      case VoxelType::I16: scaleInto<int16_t>(data, out, n, slope_, inter_); break;
      case VoxelType::U32: scaleInto<uint32_t>(data, out, n, slope_, inter_); break;
      case VoxelType::I32: scaleInto<int32_t>(data, out, n, slope_, inter_); break;
      case VoxelType::U64: scaleInto<uint64_t>(data, out, n, slope_, inter_); break;
      case VoxelType::I64: scaleInto<int64_t>(data, out, n, slope_, inter_); break;
      case VoxelType::F32: scaleInto<float>(data, out, n, slope_, inter_); break;
      case VoxelType::F64: scaleInto<double>(data, out, n, slope_, inter_); break;
      }
    }
    std::free(data);
  }

private:
  nifti_image *nim_ = nullptr;
  VoxelType fileType_ = VoxelType::F32;
  double slope_ = 0, inter_ = 0;
  bool scaled_ = false, compressed_ = false;
  int64_t channel_ = 0; ///< the t index read
};

} // namespace

std::unique_ptr<VolumeReader> openNifti(const std::string &path, int64_t channel) {
  return std::make_unique<NiftiReader>(path, channel);
}

void writeNifti(const std::string &path, const VolumeData &v) {
  namespace fs = std::filesystem;
  // nifticlib picks the format and compression from the name: keep the extension on the
  // temporary file, renamed over `path` when complete.
  const fs::path target(path);
  std::string name = target.filename().string();
  const std::string ext = name.size() > 7 && name.compare(name.size() - 7, 7, ".nii.gz") == 0
                              ? ".nii.gz"
                              : ".nii";
  const std::string tmp =
      (target.parent_path() / (".tmp." + std::to_string(::getpid()) + "." + name)).string();
  const std::string tmpStem = tmp.substr(0, tmp.size() - ext.size());
  std::lock_guard<std::mutex> lock(niftiMutex());
  nifti_set_debug_level(0);
  int64_t dims[8] = {v.channels > 1 ? 4 : 3, v.shape[2], v.shape[1], v.shape[0], v.channels, 1, 1, 1};
  nifti_image *nim = nifti_make_new_nim(dims, datatypeOf(v.type), 0);
  if (!nim)
    throw Error(str(path, ": cannot create a NIfTI image"));
  nim->nifti_type = NIFTI_FTYPE_NIFTI1_1;
  nim->dx = nim->pixdim[1] = v.spacing[2];
  nim->dy = nim->pixdim[2] = v.spacing[1];
  nim->dz = nim->pixdim[3] = v.spacing[0];
  nim->xyz_units = NIFTI_UNITS_MM;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c)
      nim->sto_xyz.m[r][c] = nim->qto_xyz.m[r][c] = v.affine[r * 4 + c];
  nim->sform_code = nim->qform_code = NIFTI_XFORM_SCANNER_ANAT;
  double qdx, qdy, qdz;
  nifti_dmat44_to_quatern(nim->qto_xyz, &nim->quatern_b, &nim->quatern_c, &nim->quatern_d,
                          &nim->qoffset_x, &nim->qoffset_y, &nim->qoffset_z, &qdx, &qdy, &qdz,
                          &nim->qfac);
  bool ok = nifti_set_filenames(nim, (tmpStem + ext).c_str(), 0, 1) == 0;
  if (ok) {
    nim->data = const_cast<void *>(v.data);
    nifti_image_write(nim);
    nim->data = nullptr; // ours, not nifticlib's to free
  }
  nifti_image_free(nim);
  std::error_code ec;
  if (!ok || !fs::exists(tmpStem + ext, ec) || fs::file_size(tmpStem + ext, ec) == 0) {
    fs::remove(tmpStem + ext, ec);
    throw Error(str(path, ": cannot write the NIfTI file"));
  }
  fs::rename(tmpStem + ext, path, ec);
  if (ec) {
    fs::remove(tmpStem + ext, ec);
    throw Error(str(path, ": cannot write the NIfTI file: ", ec.message()));
  }
}

} // namespace medrun::io

#else // no nifticlib at build time

namespace medrun::io {
std::unique_ptr<VolumeReader> openNifti(const std::string &path, int64_t) {
  throw Error(str(path, ": medrun was built without NIfTI (install libnifti2-dev and rebuild)"));
}
void writeNifti(const std::string &path, const VolumeData &) {
  throw Error(str(path, ": medrun was built without NIfTI (install libnifti2-dev and rebuild)"));
}
} // namespace medrun::io

#endif
