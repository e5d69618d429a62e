//===- Hdf5.cpp - HDF5 volumes (CREMI, PyTorch Connectomics) through libhdf5 ---------===//
//
// A dataset is read by hyperslabs of its own chunks (HDF5 decodes them, filters
// included); a contiguous dataset by slabs. `resolution` (z, y, x; CREMI: nm) gives the
// spacing and `offset` (z, y, x, world units) the translation. Without a key the first
// dataset in name order is read, as PyTorch Connectomics' readh5 does.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Sizes.h"
#include "medrun/Volume.h"

#ifdef MEDRUN_HAVE_HDF5

#include <hdf5.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <utility>
#include <vector>

namespace medrun::io {
namespace {

/// An HDF5 handle closed with its own close function.
class Handle {
public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(Handle &&o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Handle &operator=(Handle &&o) noexcept {
    std::swap(id_, o.id_);
    std::swap(close_, o.close_);
    return *this;
  }
  ~Handle() {
    if (id_ >= 0 && close_)
      close_(id_);
  }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  /// Gives up the handle without closing it (the caller closes it and checks the result).
  hid_t release() { return std::exchange(id_, -1); }

private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

/// HDF5 prints its error stack by default; the reader reports errors itself. Its exit
/// handler closes files left open again, and libhdf5 1.10 crashes there on a file whose
/// close failed (a write on a full disk): writers flush and close their files themselves.
void quiet() {
  static std::once_flag once;
  std::call_once(once, [] {
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  });
}

hid_t nativeType(VoxelType t) {
  switch (t) {
  case VoxelType::U8: return H5T_NATIVE_UINT8;
  case VoxelType::I8: return H5T_NATIVE_INT8;
  case VoxelType::U16: return H5T_NATIVE_UINT16;
  case VoxelType::I16: return H5T_NATIVE_INT16;
  case VoxelType::U32: return H5T_NATIVE_UINT32;
  case VoxelType::I32: return H5T_NATIVE_INT32;
  case VoxelType::U64: return H5T_NATIVE_UINT64;
  case VoxelType::I64: return H5T_NATIVE_INT64;
  case VoxelType::F32: return H5T_NATIVE_FLOAT;
  case VoxelType::F64: return H5T_NATIVE_DOUBLE;
  }
  return -1;
}

bool isPartial(const std::string &name) {
  const std::string suffix = kPartialSuffix;
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

herr_t collectDataset(hid_t, const char *name, const H5O_info_t *info, void *out) {
  // Datasets still being written (Hdf5Writer's temporary names) are not offered.
  if (info->type == H5O_TYPE_DATASET && std::string(name) != "." && !isPartial(name))
    static_cast<std::vector<std::string> *>(out)->push_back(name);
  return 0;
}

std::vector<std::string> datasets(hid_t file) {
  std::vector<std::string> names;
  H5Ovisit(file, H5_INDEX_NAME, H5_ITER_INC, collectDataset, &names);
  return names;
}

/// True if every component of `key` exists (H5Lexists needs the parents to exist).
bool exists(hid_t file, const std::string &key) {
  size_t pos = 0;
  for (;;) {
    size_t slash = key.find('/', pos);
    std::string prefix = key.substr(0, slash);
    if (!prefix.empty() && H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0)
      return false;
    if (slash == std::string::npos)
      return true;
    pos = slash + 1;
  }
}

/// A numeric attribute of n values, or empty.
std::vector<double> attribute(hid_t obj, const char *name) {
  if (H5Aexists(obj, name) <= 0)
    return {};
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  Handle space(H5Aget_space(attr.get()), H5Sclose);
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_INTEGER && cls != H5T_FLOAT)
    return {};
  hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 1 || n > 16)
    return {};
  std::vector<double> v(static_cast<size_t>(n));
  if (H5Aread(attr.get(), H5T_NATIVE_DOUBLE, v.data()) < 0)
    return {};
  return v;
}

class Hdf5Reader : public VolumeReader {
public:
  Hdf5Reader(const std::string &container, const std::string &requested, int64_t channel)
      : channel_(channel) {
    quiet();
    info_.path = container;
    info_.format = "hdf5";
    file_ = Handle(H5Fopen(container.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file_.valid())
      throw Error(str(container, ": cannot open as an HDF5 file"));
    std::string key = requested;
    std::vector<std::string> all = datasets(file_.get());
    if (key.empty()) {
      if (all.empty())
        throw Error(str(container, ": the HDF5 file holds no dataset"));
      key = all.front();
    }
    info_.key = key;
    if (!exists(file_.get(), key)) {
      std::string list;
      for (const std::string &d : all)
        list += (list.empty() ? "" : ", ") + d;
      throw Error(str(container, ": no dataset '", key, "' (the file holds ",
                      list.empty() ? std::string("no dataset") : list, ")"));
    }
    dset_ = Handle(H5Dopen2(file_.get(), key.c_str(), H5P_DEFAULT), H5Dclose);
    if (!dset_.valid())
      throw Error(str(info_.name(), ": not a dataset (a group?)"));

    Handle type(H5Dget_type(dset_.get()), H5Tclose);
    const H5T_class_t cls = H5Tget_class(type.get());
    const size_t bytes = H5Tget_size(type.get());
    if (cls == H5T_INTEGER) {
      const bool sign = H5Tget_sign(type.get()) == H5T_SGN_2;
      const VoxelType s[] = {VoxelType::I8, VoxelType::I16, VoxelType::I32, VoxelType::I64};
      const VoxelType u[] = {VoxelType::U8, VoxelType::U16, VoxelType::U32, VoxelType::U64};
      int k = bytes == 1 ? 0 : bytes == 2 ? 1 : bytes == 4 ? 2 : bytes == 8 ? 3 : -1;
      if (k < 0)
        throw Error(str(info_.name(), ": unsupported integer size ", bytes, " bytes"));
      info_.type = sign ? s[k] : u[k];
    } else if (cls == H5T_FLOAT && (bytes == 4 || bytes == 8)) {
      info_.type = bytes == 4 ? VoxelType::F32 : VoxelType::F64;
    } else {
      throw Error(str(info_.name(), ": unsupported element type (HDF5 class ", int(cls), ", ",
                      bytes, " bytes; expected integers of 1, 2, 4, 8 bytes or float32/64)"));
    }

    Handle space(H5Dget_space(dset_.get()), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 0 || rank > 32)
      throw Error(str(info_.name(), ": cannot read the dataspace"));
    std::vector<hsize_t> dims(rank), maxdims(rank);
    if (H5Sget_simple_extent_dims(space.get(), dims.data(), maxdims.data()) < 0)
      throw Error(str(info_.name(), ": cannot read the dataspace"));
    for (hsize_t d : dims)
      full_.push_back(d > hsize_t(INT64_MAX) ? -1 : static_cast<int64_t>(d));
    // Declared sizes are untrusted (medrun/Sizes.h): a product that wraps would divide by
    // zero or size a buffer too small below.
    const int64_t elements = checkedCount(full_, info_.name(), 1, kMaxArrayElements);
    // Which axes of the file are the volume's (the others have size 1, or are channels).
    const ArrayAxes axes = arrayAxes(full_, info_.name(), channel);
    info_.shape = axes.shape;
    info_.channels = axes.channels;
    first_ = axes.first;
    channelAxis_ = axes.channelAxis;

    Handle dcpl(H5Dget_create_plist(dset_.get()), H5Pclose);
    const H5D_layout_t layout = H5Pget_layout(dcpl.get());
    if (layout == H5D_CONTIGUOUS || layout == H5D_COMPACT) {
      // Unfiltered: the bytes declared must be in the file (or in its external files). A
      // dataset created but never written reads as its fill value: refused as well, it is
      // no data.
      std::error_code ec;
      const uint64_t fileBytes = std::filesystem::file_size(container, ec);
      if (!ec && H5Pget_external_count(dcpl.get()) <= 0) {
        checkedBytes(elements, bytes, fileBytes, info_.name(),
                     str("the file's ", fileBytes, " bytes (a truncated file, or a dataset "
                         "never written?)"));
        const hsize_t stored = H5Dget_storage_size(dset_.get());
        if (stored < static_cast<uint64_t>(elements) * bytes)
          throw Error(str(info_.name(), ": declares ", shapeString(full_), " of ", bytes,
                          " bytes but only ", stored,
                          " bytes are stored (a dataset never written, or a damaged file)"));
      }
    }
    const int filters = H5Pget_nfilters(dcpl.get());
    for (int i = 0; i < filters; ++i) {
      unsigned flags = 0, config = 0;
      size_t nelem = 0;
      char name[64] = {};
      H5Z_filter_t id = H5Pget_filter2(dcpl.get(), i, &flags, &nelem, nullptr, sizeof name, name,
                                       &config);
      if (H5Zfilter_avail(id) <= 0)
        throw Error(str(info_.name(), ": compressed with HDF5 filter ", id,
                        name[0] ? str(" (", name, ")") : std::string(),
                        ", which this libhdf5 cannot decode (gzip, shuffle, fletcher32, szip "
                        "and scaleoffset are built in; others need an HDF5 filter plugin)"));
    }
    if (layout == H5D_CHUNKED) {
      std::vector<hsize_t> chunk(rank);
      if (H5Pget_chunk(dcpl.get(), rank, chunk.data()) != rank)
        throw Error(str(info_.name(), ": cannot read the chunk dimensions"));
      // HDF5's own rule, which libhdf5 1.10 does not check when reading: along an axis that
      // cannot grow a chunk is no larger than the dataset (a file edited to break it made
      // libhdf5 read past a decoded chunk, docs/reliability.md).
      for (int a = 0; a < rank; ++a)
        if (chunk[a] > dims[a] && maxdims[a] == dims[a])
          throw Error(str(info_.name(), ": chunk dimension ", a, " is ", chunk[a],
                          ", larger than the dataset's ", dims[a],
                          " along an axis that cannot grow (a malformed file)"));
      for (int a = 0; a < 3; ++a) {
        const hsize_t c = chunk[first_ + a];
        if (c < 1)
          throw Error(str(info_.name(), ": a chunk dimension of ", c, " (every one must be at least 1)"));
        info_.chunk[a] = c > hsize_t(info_.shape[a]) ? info_.shape[a] : static_cast<int64_t>(c);
      }
    } else {
      // Contiguous: slabs of whole planes, about 4 MiB each.
      const int64_t plane = info_.shape[1] * info_.shape[2] * static_cast<int64_t>(bytes);
      info_.chunk = {std::clamp<int64_t>((int64_t(4) << 20) / plane, 1, info_.shape[0]),
                     info_.shape[1], info_.shape[2]};
    }
    // What one decode fills (the cache holds it whole).
    checkedBytes(info_.chunk[0] * info_.chunk[1] * info_.chunk[2], bytes, kMaxDecodedChunkBytes,
                 str(info_.name(), ": a chunk of ", info_.chunk[0], "x", info_.chunk[1], "x",
                     info_.chunk[2]),
                 "the 1 GiB limit on a decoded chunk");
    // Spacing and origin (z, y, x), as CREMI writes them.
    std::vector<double> res = attribute(dset_.get(), "resolution");
    if (res.size() == full_.size() && full_.size() > 3)
      res.erase(res.begin(), res.begin() + first_);
    if (res.size() >= 3 && res[0] > 0 && res[1] > 0 && res[2] > 0) {
      for (int a = 0; a < 3; ++a)
        info_.spacing[a] = res[a];
      info_.spacingFrom = "the resolution attribute";
    }
    std::vector<double> off = attribute(dset_.get(), "offset");
    for (int a = 0; a < 3; ++a) {
      info_.affine[a * 4 + a] = info_.spacing[2 - a]; // x, y, z rows
      if (off.size() == 3)
        info_.affine[a * 4 + 3] = off[2 - a];
    }
  }

protected:
  void decode(const Box3 &lo, const Box3 &size, void *dst) const override {
    std::vector<hsize_t> start(full_.size(), 0), count(full_.size(), 1);
    for (int a = 0; a < 3; ++a) {
      start[first_ + a] = static_cast<hsize_t>(lo[a]);
      count[first_ + a] = static_cast<hsize_t>(size[a]);
    }
    if (channelAxis_ >= 0)
      start[channelAxis_] = static_cast<hsize_t>(channel_);
    Handle fspace(H5Dget_space(dset_.get()), H5Sclose);
    hsize_t mdims[3] = {hsize_t(size[0]), hsize_t(size[1]), hsize_t(size[2])};
    Handle mspace(H5Screate_simple(3, mdims, nullptr), H5Sclose);
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                            nullptr) < 0 ||
        H5Dread(dset_.get(), nativeType(info_.type), mspace.get(), fspace.get(), H5P_DEFAULT,
                dst) < 0)
      throw Error(str(info_.name(), ": cannot read the box at ", lo[0], ",", lo[1], ",", lo[2],
                      " (a corrupt or truncated file?)"));
  }

private:
  Handle file_, dset_;
  std::vector<int64_t> full_; ///< the dataset's shape as stored
  size_t first_ = 0;          ///< index of the volume's first axis in full_
  int64_t channel_ = -1, channelAxis_ = -1; ///< the channel read, and its axis in full_
};

} // namespace

std::unique_ptr<VolumeReader> openHdf5(const std::string &container, const std::string &key,
                                       int64_t channel) {
  return std::make_unique<Hdf5Reader>(container, key, channel);
}

namespace {

class Hdf5Writer : public VolumeWriter {
public:
  Hdf5Writer(const std::string &container, const std::string &key, const VolumeData &v,
             const Box3 &chunk, bool reopen)
      : name_(container + "/" + key), key_(key), temp_(key + kPartialSuffix), shape_(v.shape),
        channels_(v.channels), type_(v.type) {
    quiet();
    for (int a = 0; a < 3; ++a)
      chunk_[a] = std::min(chunk[a], v.shape[a]);
    // A new file is written whole under a temporary name (container.partial), renamed by
    // finish(): a failed write (a full disk can leave an HDF5 file unreadable) or a killed
    // one leaves no file of that name.
    const std::string fileTemp = container + kPartialSuffix;
    if (std::filesystem::exists(container)) {
      file_ = Handle(H5Fopen(container.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    } else if (reopen && std::filesystem::exists(fileTemp)) {
      file_ = Handle(H5Fopen(fileTemp.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
      container_ = container, fileTemp_ = fileTemp;
    } else if (!reopen) {
      file_ = Handle(H5Fcreate(fileTemp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
      container_ = container, fileTemp_ = fileTemp;
    }
    if (!file_.valid())
      throw Error(str(container, reopen ? ": cannot open the HDF5 file to add blocks to"
                                        : ": cannot open or create the HDF5 file for writing",
                      std::filesystem::exists(container)
                          ? " (not an HDF5 file, or one left unreadable by a run killed while "
                            "writing it: delete it)"
                          : ""));
    const int rank = v.channels > 1 ? 4 : 3, lead = rank - 3;
    hsize_t dims[4] = {static_cast<hsize_t>(v.channels), 1, 1, 1}, chunks[4] = {1, 1, 1, 1};
    for (int a = 0; a < 3; ++a) {
      dims[lead + a] = static_cast<hsize_t>(v.shape[a]);
      chunks[lead + a] = static_cast<hsize_t>(chunk_[a]);
    }
    if (reopen) {
      // The unfinished dataset, or else a finished one to add boxes to.
      finished_ = !exists(file_.get(), temp_);
      const std::string &at = finished_ ? key_ : temp_;
      if (exists(file_.get(), at))
        dset_ = Handle(H5Dopen2(file_.get(), at.c_str(), H5P_DEFAULT), H5Dclose);
      bool same = dset_.valid();
      if (same) {
        Handle space(H5Dget_space(dset_.get()), H5Sclose);
        Handle dcpl(H5Dget_create_plist(dset_.get()), H5Pclose);
        Handle type(H5Dget_type(dset_.get()), H5Tclose);
        hsize_t have[4] = {}, haveChunk[4] = {};
        same = H5Sget_simple_extent_ndims(space.get()) == rank &&
               H5Pget_layout(dcpl.get()) == H5D_CHUNKED &&
               H5Tequal(type.get(), nativeType(v.type)) > 0;
        if (same) {
          H5Sget_simple_extent_dims(space.get(), have, nullptr);
          H5Pget_chunk(dcpl.get(), rank, haveChunk);
          for (int a = 0; a < rank; ++a)
            same = same && have[a] == dims[a] && haveChunk[a] == chunks[a];
        }
      }
      if (!same)
        throw Error(str(name_, ": no dataset of the shape, chunks and type to continue (",
                        v.channels, " x ", v.shape[0], "x", v.shape[1], "x", v.shape[2], " ",
                        voxelTypeName(v.type), ", chunks ", chunk_[0], "x", chunk_[1], "x",
                        chunk_[2], ")"));
      return;
    }
    // Written under the temporary name; finish() moves it to `key`.
    if (exists(file_.get(), temp_) && H5Ldelete(file_.get(), temp_.c_str(), H5P_DEFAULT) < 0)
      throw Error(str(name_, ": cannot remove the unfinished dataset ", temp_));
    Handle space(H5Screate_simple(rank, dims, nullptr), H5Sclose);
    Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(lcpl.get(), 1);
    Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl.get(), rank, chunks);
    H5Pset_deflate(dcpl.get(), 4);
    dset_ = Handle(H5Dcreate2(file_.get(), temp_.c_str(), nativeType(v.type), space.get(),
                              lcpl.get(), dcpl.get(), H5P_DEFAULT),
                   H5Dclose);
    if (!dset_.valid())
      throw Error(str(name_, ": cannot create the dataset"));
    hsize_t three = 3;
    Handle aspace(H5Screate_simple(1, &three, nullptr), H5Sclose);
    Handle attr(H5Acreate2(dset_.get(), "resolution", H5T_NATIVE_DOUBLE, aspace.get(),
                           H5P_DEFAULT, H5P_DEFAULT),
                H5Aclose);
    if (!attr.valid() || H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, v.spacing.data()) < 0)
      throw Error(str(name_, ": cannot write the resolution attribute"));
  }

  void write(const Box3 &lo, const Box3 &size, const void *data) override {
    for (int a = 0; a < 3; ++a)
      if (lo[a] < 0 || size[a] < 1 || lo[a] + size[a] > shape_[a])
        throw Error(str(name_, ": the box at ", lo[0], ",", lo[1], ",", lo[2], " of ", size[0],
                        "x", size[1], "x", size[2], " is not inside the dataset"));
    const int rank = channels_ > 1 ? 4 : 3, lead = rank - 3;
    hsize_t start[4] = {0, 0, 0, 0}, count[4] = {static_cast<hsize_t>(channels_), 1, 1, 1};
    for (int a = 0; a < 3; ++a) {
      start[lead + a] = static_cast<hsize_t>(lo[a]);
      count[lead + a] = static_cast<hsize_t>(size[a]);
    }
    Handle fspace(H5Dget_space(dset_.get()), H5Sclose);
    Handle mspace(H5Screate_simple(rank, count, nullptr), H5Sclose);
    if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr) < 0 ||
        H5Dwrite(dset_.get(), nativeType(type_), mspace.get(), fspace.get(), H5P_DEFAULT, data) < 0)
      throw Error(str(name_, ": cannot write the box at ", lo[0], ",", lo[1], ",", lo[2]));
  }

  void flush() override {
    if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0)
      throw Error(str(name_, ": cannot flush the file"));
  }

  void finish() override {
    flush(); // every box on disk before the name says the dataset is complete
    if (finished_)
      return;
    if (exists(file_.get(), key_) && H5Ldelete(file_.get(), key_.c_str(), H5P_DEFAULT) < 0)
      throw Error(str(name_, ": cannot replace the existing dataset"));
    Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(lcpl.get(), 1);
    if (H5Lmove(file_.get(), temp_.c_str(), file_.get(), key_.c_str(), lcpl.get(), H5P_DEFAULT) < 0)
      throw Error(str(name_, ": cannot move the finished dataset from ", temp_, " into place"));
    finished_ = true;
    flush();
    if (!fileTemp_.empty()) {
      dset_ = Handle();
      if (H5Fclose(file_.release()) < 0)
        throw Error(str(name_, ": cannot close ", fileTemp_));
      std::error_code ec;
      std::filesystem::rename(fileTemp_, container_, ec);
      if (ec)
        throw Error(str(name_, ": cannot move ", fileTemp_, " into place: ", ec.message()));
      fileTemp_.clear();
    }
  }

  /// After a failed whole write: the unfinished dataset is removed (best effort; space in
  /// the file is not given back), or the whole new file.
  void discard() {
    if (finished_ || !file_.valid())
      return;
    if (!fileTemp_.empty()) {
      dset_ = Handle();
      file_ = Handle();
      std::error_code ec;
      std::filesystem::remove(fileTemp_, ec);
    } else if (exists(file_.get(), temp_)) {
      H5Ldelete(file_.get(), temp_.c_str(), H5P_DEFAULT);
    }
  }

  ~Hdf5Writer() override {
    dset_ = Handle();
    if (file_.valid())
      H5Fflush(file_.get(), H5F_SCOPE_GLOBAL);
  }

private:
  std::string name_, key_, temp_; ///< temp_: where the dataset is until finish()
  /// A new file: its name, and the temporary one it is written under until finish().
  std::string container_, fileTemp_;
  Box3 shape_;
  int64_t channels_;
  VoxelType type_;
  Handle file_, dset_;
  bool finished_ = false; ///< dset_ is at key_ (moved there, or reopened there)
};

} // namespace

std::unique_ptr<VolumeWriter> createHdf5(const std::string &container, const std::string &key,
                                         const VolumeData &v, const Box3 &chunk, bool reopen) {
  return std::make_unique<Hdf5Writer>(container, key, v, chunk, reopen);
}

void writeHdf5(const std::string &container, const std::string &key, const VolumeData &v) {
  Hdf5Writer writer(container, key, v, {64, 64, 64}, false);
  try {
    writer.write({0, 0, 0}, v.shape, v.data);
    writer.finish();
  } catch (...) {
    writer.discard();
    throw;
  }
}

} // namespace medrun::io

#else // no libhdf5 at build time

namespace medrun::io {
std::unique_ptr<VolumeReader> openHdf5(const std::string &container, const std::string &,
                                       int64_t) {
  throw Error(str(container, ": medrun was built without HDF5 (install libhdf5-dev and rebuild)"));
}
void writeHdf5(const std::string &container, const std::string &, const VolumeData &) {
  throw Error(str(container, ": medrun was built without HDF5 (install libhdf5-dev and rebuild)"));
}
std::unique_ptr<VolumeWriter> createHdf5(const std::string &container, const std::string &,
                                         const VolumeData &, const Box3 &, bool) {
  throw Error(str(container, ": medrun was built without HDF5 (install libhdf5-dev and rebuild)"));
}
} // namespace medrun::io

#endif
