//===- Nifti.cpp - NIfTI-1/-2 volumes (.nii, .nii.gz) through nifticlib --------------===//
//
// NIfTI's i, j, k (x fastest on disk) are the volume's x, y, z, so the C-order array is
// z, y, x as everywhere else. An uncompressed file is read by slabs of planes
// (nifti_read_subregion_image seeks to them); a gzip'd one decodes as one chunk, since
// gzip cannot seek (the chunk cache keeps it decoded). scl_slope/scl_inter, when set,
// are applied and the volume reads as float32 (nibabel's rule: a slope of 0 or not finite
// means not scaled; a scaled voxel beyond float32 is an error). The header's sizes are
// checked against the file before nifticlib reads it (docs/reliability.md). The affine is the sform, else the qform,
// else pixdim scaling, as nibabel chooses.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Sizes.h"
#include "medrun/Volume.h"

#ifdef MEDRUN_HAVE_NIFTI

#include <nifti2_io.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
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

/// dst = a * src + b as float32; returns the index of the first finite voxel that this
/// turns non-finite (beyond float32), or -1.
template <typename S>
int64_t scaleInto(const void *src, float *dst, int64_t n, double a, double b, double &value) {
  const S *s = static_cast<const S *>(src);
  for (int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(s[i]), r = a * v + b;
    if (!(std::fabs(r) <= FLT_MAX) && std::isfinite(v)) {
      value = v;
      return i;
    }
    dst[i] = static_cast<float>(r);
  }
  return -1;
}

/// What nifticlib's nifti_image does not keep as written: dim[] (it turns values < 1 into
/// 1), vox_offset (a float in NIfTI-1) and the floats it turns into 0 where not finite
/// (scl_slope, scl_inter, pixdim, the sform and qform).
struct RawHeader {
  std::array<int64_t, 8> dim{};
  double voxOffset = 0, slope = 0, inter = 0;
  std::array<double, 4> pixdim{}; ///< pixdim[0..3]
  int64_t sformCode = 0, qformCode = 0;
  std::array<double, 12> srow{};  ///< srow_x, srow_y, srow_z
  std::array<double, 6> quatern{}; ///< quatern_b/c/d, qoffset_x/y/z
};

/// "24, 2, 3": dim[1..dim[0]] (all seven when dim[0] itself is wrong).
std::string dimString(const std::array<int64_t, 8> &dim) {
  const int n = dim[0] >= 1 && dim[0] <= 7 ? static_cast<int>(dim[0]) : 7;
  std::string s;
  for (int d = 1; d <= n; ++d)
    s += (d > 1 ? ", " : "") + std::to_string(dim[d]);
  return s;
}

template <typename Header> void copyFields(const Header &n, RawHeader &r) {
  std::copy(n.dim, n.dim + 8, r.dim.begin());
  std::copy(n.pixdim, n.pixdim + 4, r.pixdim.begin());
  r.slope = n.scl_slope, r.inter = n.scl_inter;
  r.sformCode = n.sform_code, r.qformCode = n.qform_code;
  for (int c = 0; c < 4; ++c)
    r.srow[c] = n.srow_x[c], r.srow[4 + c] = n.srow_y[c], r.srow[8 + c] = n.srow_z[c];
  r.quatern = {n.quatern_b, n.quatern_c, n.quatern_d, n.qoffset_x, n.qoffset_y, n.qoffset_z};
}

/// The header as stored (byte-swapped to this machine's order), checked: dim[0] in 1..7,
/// dim[1..dim[0]] >= 1, vox_offset, the scaling and the geometry finite; errors name the
/// field. A slope of 0 or not finite comes back as 0 (not scaled).
RawHeader readRawHeader(const std::string &path) {
  int version = -1;
  void *h;
  {
    std::lock_guard<std::mutex> lock(niftiMutex());
    nifti_set_debug_level(0);
    h = nifti_read_header(path.c_str(), &version, 0);
  }
  if (!h)
    throw Error(str(path, ": cannot read as a NIfTI-1/-2 image (a bad header, or not NIfTI)"));
  // sizeof_hdr, in either byte order, tells NIfTI-1 (and ANALYZE) from NIfTI-2 from neither.
  const int32_t size = *static_cast<const int32_t *>(h);
  const int32_t expected = version == 2 ? 540 : 348;
  if (size != expected && size != static_cast<int32_t>(__builtin_bswap32(expected))) {
    std::free(h);
    throw Error(str(path, ": cannot read as a NIfTI-1/-2 image (a bad header, or not NIfTI)"));
  }
  RawHeader r;
  if (version == 2) {
    auto *n = static_cast<nifti_2_header *>(h);
    if (n->sizeof_hdr != 540)
      nifti_swap_as_nifti2(n);
    copyFields(*n, r);
    r.voxOffset = static_cast<double>(n->vox_offset);
  } else { // NIfTI-1 (or ANALYZE 7.5: the same layout of these fields)
    auto *n = static_cast<nifti_1_header *>(h);
    if (n->sizeof_hdr != 348)
      nifti_swap_as_nifti1(n);
    copyFields(*n, r);
    r.voxOffset = n->vox_offset;
    if (version == 0) // ANALYZE has no scaling, sform or qform (nifticlib ignores them)
      r.slope = r.inter = 0, r.sformCode = r.qformCode = 0;
  }
  std::free(h);
  if (r.dim[0] < 1 || r.dim[0] > 7)
    throw Error(str(path, ": NIfTI dim[0] = ", r.dim[0],
                    " is outside 1..7 (the number of dimensions; dim[1..7] = ", dimString(r.dim),
                    ")"));
  for (int d = 1; d <= r.dim[0]; ++d)
    if (r.dim[d] < 1)
      throw Error(str(path, ": NIfTI dim[", d, "] = ", r.dim[d], " (dim[1..", r.dim[0], "] = ",
                      dimString(r.dim), "): every dimension must be at least 1"));
  if (!std::isfinite(r.voxOffset) || r.voxOffset < 0)
    throw Error(str(path, ": NIfTI vox_offset = ", r.voxOffset,
                    " (expected a byte offset >= 0 into the file)"));
  // nibabel's rule (Nifti1Header.get_slope_inter): scl_slope 0 or not finite means "not
  // scaled" and scl_inter is then ignored (nibabel writes NaN for unscaled images; the
  // standard says 0); a scaled image with a non-finite scl_inter is an error (nifticlib
  // would silently drop it).
  if (r.slope == 0 || !std::isfinite(r.slope))
    r.slope = 0;
  else if (!std::isfinite(r.inter))
    throw Error(str(path, ": NIfTI scl_inter = ", r.inter, " is not finite (scl_slope = ", r.slope,
                    "; a scaled image needs a finite intercept)"));
  // Geometry feeds resampling and the written affine: non-finite values would be wrong
  // silently (nifticlib reads them as 0).
  for (int d = 1; d <= 3; ++d)
    if (!std::isfinite(r.pixdim[d]))
      throw Error(str(path, ": NIfTI pixdim[", d, "] = ", r.pixdim[d],
                      " is not finite (the voxel spacing)"));
  if (r.sformCode > 0)
    for (int k = 0; k < 12; ++k)
      if (!std::isfinite(r.srow[k]))
        throw Error(str(path, ": NIfTI srow_", "xyz"[k / 4], "[", k % 4, "] = ", r.srow[k],
                        " is not finite (the sform, sform_code ", r.sformCode, ")"));
  if (r.qformCode > 0)
    for (int k = 0; k < 6; ++k)
      if (!std::isfinite(r.quatern[k]))
        throw Error(str(path, ": NIfTI ", k < 3 ? "quatern_" : "qoffset_", "bcdxyz"[k], " = ",
                        r.quatern[k], " is not finite (the qform, qform_code ", r.qformCode,
                        ")"));
  return r;
}

/// Deflate expands at most 1032-fold: a .nii.gz of N bytes holds at most 1032 N bytes.
constexpr uint64_t kMaxDeflateRatio = 1032;

class NiftiReader : public VolumeReader {
public:
  NiftiReader(const std::string &path, int64_t channel) : channel_(std::max<int64_t>(channel, 0)) {
    info_.path = path;
    info_.format = "nifti";
    // nifticlib turns dimensions < 1 into 1 and does not relate them to the file's size:
    // the header's own dim[] is checked first, then the image read without its data.
    const RawHeader head = readRawHeader(path);
    const std::array<int64_t, 8> &dim = head.dim;
    {
      std::lock_guard<std::mutex> lock(niftiMutex());
      nifti_set_debug_level(0);
      nim_.reset(nifti_image_read(path.c_str(), 0));
    }
    if (!nim_)
      throw Error(str(path, ": cannot read as a NIfTI-1/-2 image (a bad header, or not NIfTI)"));
    if (!voxelTypeOf(nim_->datatype, fileType_))
      throw Error(str(path, ": unsupported NIfTI datatype ", nim_->datatype, " (",
                      nifti_datatype_string(nim_->datatype),
                      "; expected an integer type or float32/float64)"));
    if (nim_->nbyper != static_cast<int>(voxelSize(fileType_)))
      throw Error(str(path, ": NIfTI datatype ", nifti_datatype_string(nim_->datatype), " with ",
                      nim_->nbyper, " bytes per voxel"));
    // dim[1..dim[0]] as a shape, x first (NIfTI's order), for the checked product.
    const int64_t voxels =
        checkedCount(std::vector<int64_t>(dim.begin() + 1, dim.begin() + 1 + dim[0]),
                     str(path, " (NIfTI dim[1..", dim[0], "], x first)"));
    checkDataFits(path, head, voxels);
    std::vector<int64_t> dims; // C order: w, v, u, t, z, y, x
    for (int d = 7; d >= 1; --d)
      dims.push_back(d <= dim[0] ? dim[d] : 1);
    // Channels (openChannel) are dim[4], t, as writeNifti writes them.
    const int64_t t = dim[0] > 3 ? dim[4] : 1;
    int64_t more = 1; // dim[5..7], bounded by the product checked above
    for (int d = 5; d <= dim[0]; ++d)
      more *= dim[d];
    if (channel < 0 ? t * more > 1 : more > 1)
      throw Error(str(path, ": a ", dim[0], "-D image (dim[1..", dim[0], "] = ", dimString(dim),
                      "): expected a 3-D volume, one channel per "
                      "file (nnU-Net's CASE_0000, CASE_0001, ...)",
                      channel < 0 ? "" : ", or channels in dim[4]"));
    std::vector<int64_t> spatial(dims.end() - 3, dims.end());
    info_.shape = squeeze3(spatial, path);
    info_.channels = channel < 0 ? 1 : t;
    if (channel >= info_.channels)
      throw Error(str(path, ": no channel ", channel, " (the image has ", info_.channels,
                      info_.channels == 1 ? " channel)" : " channels in dim[4])"));
    info_.type = fileType_;
    slope_ = head.slope, inter_ = head.inter; // finite (readRawHeader)
    scaled_ = slope_ != 0 && (slope_ != 1 || inter_ != 0);
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
    const int64_t plane = info_.shape[1] * info_.shape[2] * nim_->nbyper;
    info_.chunk = compressed_ ? info_.shape
                              : Box3{std::clamp<int64_t>((int64_t(4) << 20) / plane, 1,
                                                         info_.shape[0]),
                                     info_.shape[1], info_.shape[2]};
  }

private:
  /// The image's bytes against what its file can hold: after vox_offset for a .nii, at most
  /// kMaxDeflateRatio times the file's size for a .nii.gz (whose decoded size only decoding
  /// tells).
  void checkDataFits(const std::string &path, const RawHeader &head, int64_t voxels) {
    namespace fs = std::filesystem;
    std::string lower = path;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    compressed_ = lower.size() > 3 && lower.compare(lower.size() - 3, 3, ".gz") == 0;
    const std::string dataFile = nim_->iname ? nim_->iname : path;
    std::error_code ec;
    const uint64_t fileBytes = fs::file_size(dataFile, ec);
    if (ec)
      throw Error(str(dataFile, ": cannot read the image data: ", ec.message()));
    const uint64_t offset = nim_->iname_offset > 0 ? static_cast<uint64_t>(nim_->iname_offset) : 0;
    const std::string what = str(path, " (NIfTI dim[1..", head.dim[0], "] = ", dimString(head.dim),
                                 ", ", nifti_datatype_string(nim_->datatype), ")");
    if (!compressed_) {
      if (offset > fileBytes)
        throw Error(str(path, ": NIfTI vox_offset = ", head.voxOffset,
                        " is beyond the end of the file (", fileBytes, " bytes)"));
      checkedBytes(voxels, static_cast<uint64_t>(nim_->nbyper), fileBytes - offset, what,
                   str("the ", fileBytes - offset, " bytes the file holds after vox_offset = ",
                       offset));
      return;
    }
    const uint64_t decoded = fileBytes > UINT64_MAX / kMaxDeflateRatio
                                 ? UINT64_MAX
                                 : fileBytes * kMaxDeflateRatio;
    if (offset > decoded)
      throw Error(str(path, ": NIfTI vox_offset = ", head.voxOffset, " is beyond what a gzip file of ",
                      fileBytes, " bytes can hold (deflate expands at most ", kMaxDeflateRatio,
                      "-fold)"));
    checkedBytes(voxels, static_cast<uint64_t>(nim_->nbyper), decoded - offset, what,
                 str("a gzip file of ", fileBytes, " bytes can hold after vox_offset = ", offset,
                     " (deflate expands at most ", kMaxDeflateRatio, "-fold)"));
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
      got = nifti_read_subregion_image(nim_.get(), start, count, &data);
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
      double v = 0;
      int64_t bad = -1;
      switch (fileType_) {
      case VoxelType::U8: bad = scaleInto<uint8_t>(data, out, n, slope_, inter_, v); break;
      case VoxelType::I8: bad = scaleInto<int8_t>(data, out, n, slope_, inter_, v); break;
      case VoxelType::U16: bad = scaleInto<uint16_t>(data, out, n, slope_, inter_, v); break;
      case VoxelType::I16: bad = scaleInto<int16_t>(data, out, n, slope_, inter_, v); break;
      case VoxelType::U32: bad = scaleInto<uint32_t>(data, out, n, slope_, inter_, v); break;
      case VoxelType::I32: bad = scaleInto<int32_t>(data, out, n, slope_, inter_, v); break;
      case VoxelType::U64: bad = scaleInto<uint64_t>(data, out, n, slope_, inter_, v); break;
      case VoxelType::I64: bad = scaleInto<int64_t>(data, out, n, slope_, inter_, v); break;
      case VoxelType::F32: bad = scaleInto<float>(data, out, n, slope_, inter_, v); break;
      case VoxelType::F64: bad = scaleInto<double>(data, out, n, slope_, inter_, v); break;
      }
      if (bad >= 0) {
        std::free(data);
        const int64_t x = bad % size[2], y = bad / size[2] % size[1], z = bad / size[2] / size[1];
        throw Error(str(info_.path, ": NIfTI scl_slope = ", slope_, " and scl_inter = ", inter_,
                        " turn the voxel value ", v, " at (z, y, x) = (", lo[0] + z, ", ", lo[1] + y,
                        ", ", lo[2] + x, ") into ", slope_ * v + inter_,
                        ", beyond float32 (the scaled volume must be finite)"));
      }
    }
    std::free(data);
  }

private:
  /// Freed also when the constructor throws.
  std::unique_ptr<nifti_image, void (*)(nifti_image *)> nim_{nullptr, nifti_image_free};
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
