//===- Zarr.cpp - Zarr v2 arrays (BANIS/NISB data.zarr/img, seg) ----------------------===//
//
// An array is a directory with `.zarray` (JSON: shape, chunks, dtype, compressor,
// fill_value, order, filters, dimension_separator) and one file per chunk, named by its
// grid index joined with '.' or '/'; a missing chunk is all fill_value. Chunks are
// decoded by the codec libraries numcodecs wraps: Blosc (libblosc, which reads its own
// inner lz4/zstd/zlib), Zstd (libzstd), Zlib and GZip (zlib), LZ4 (liblz4, numcodecs'
// 4-byte size header). `resolution` and `offset` in `.zattrs` give spacing and origin.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Sizes.h"
#include "medrun/Volume.h"

#include <nlohmann/json.hpp>

#ifdef MEDRUN_HAVE_BLOSC
#include <blosc.h>
#endif
#ifdef MEDRUN_HAVE_ZSTD
#include <zstd.h>
#endif
#ifdef MEDRUN_HAVE_ZLIB
#include <zlib.h>
#endif
#ifdef MEDRUN_HAVE_LZ4
#include <lz4.h>
#endif

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

namespace medrun::io {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string readFile(const fs::path &p, bool &missing) {
  std::ifstream in(p, std::ios::binary);
  missing = !in;
  if (missing)
    return {};
  return std::string(std::istreambuf_iterator<char>(in), {});
}

json readJson(const fs::path &p, const std::string &what) {
  bool missing = false;
  std::string text = readFile(p, missing);
  if (missing)
    throw Error(str(p.string(), ": cannot read ", what));
  // Metadata is a few levels deep; a hostile file nested thousands deep would exhaust the
  // stack when the value is copied or printed.
  const int maxDepth = 32;
  try {
    return json::parse(text, [&](int depth, json::parse_event_t, json &) {
      if (depth > maxDepth)
        throw Error(str(p.string(), ": ", what, " is nested more than ", maxDepth, " deep"));
      return true;
    });
  } catch (const json::exception &e) {
    throw Error(str(p.string(), ": malformed JSON (", e.what(), ")"));
  }
}

/// A JSON value for a message, cut at 200 characters.
std::string shown(const json &v) {
  std::string s = v.dump();
  return s.size() > 200 ? s.substr(0, 200) + "..." : s;
}

/// A list of sizes from .zarray (shape, chunks): integers that fit int64, else Error.
std::vector<int64_t> sizes(const json &z, const char *key, const std::function<Error(std::string)> &fail) {
  const json &v = z.at(key);
  if (!v.is_array())
    throw fail(str(key, " ", shown(v), ": expected a list of integers"));
  std::vector<int64_t> out;
  for (const json &e : v) {
    if (e.is_number_unsigned() && e.get<uint64_t>() <= uint64_t(INT64_MAX))
      out.push_back(static_cast<int64_t>(e.get<uint64_t>()));
    else if (e.is_number_integer() && !e.is_number_unsigned())
      out.push_back(e.get<int64_t>());
    else
      throw fail(str(key, " ", shown(v), ": ", shown(e), " is not an integer of 64 bits"));
  }
  return out;
}

bool isPartial(const std::string &name) {
  const std::string suffix = kPartialSuffix;
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Arrays (directories with .zarray) under `root`, relative paths, sorted; arrays still
/// being written (ZarrWriter's temporary directories) are left out.
std::vector<std::string> arraysUnder(const fs::path &root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec))
    if (it->path().filename() == ".zarray" && !isPartial(it->path().parent_path().string()))
      out.push_back(fs::relative(it->path().parent_path(), root).generic_string());
  std::sort(out.begin(), out.end());
  return out;
}

/// Bytes of the decompressed chunk in `out` (exactly out.size() expected).
void decompress(const json &compressor, const std::string &src, std::vector<char> &out,
                const std::string &file) {
  if (compressor.is_null()) {
    if (src.size() != out.size())
      throw Error(str(file, ": an uncompressed chunk of ", src.size(), " bytes, expected ",
                      out.size()));
    std::memcpy(out.data(), src.data(), out.size());
    return;
  }
  const std::string id = compressor.value("id", "");
  auto bad = [&](const std::string &why) {
    return Error(str(file, ": cannot decode the ", id, " chunk: ", why));
  };
  if (id == "blosc") {
#ifdef MEDRUN_HAVE_BLOSC
    size_t nbytes = 0, cbytes = 0, blocksize = 0;
    if (src.size() < 16)
      throw bad("shorter than a Blosc header");
    blosc_cbuffer_sizes(src.data(), &nbytes, &cbytes, &blocksize);
    if (nbytes != out.size())
      throw bad(str("it decompresses to ", nbytes, " bytes, expected ", out.size(),
                    " (the chunk's shape and dtype)"));
    if (cbytes != src.size())
      throw bad(str("its header says ", cbytes, " compressed bytes, the file holds ", src.size(),
                    cbytes > src.size() ? " (truncated)" : " (trailing bytes)"));
    if (blosc_cbuffer_validate(src.data(), src.size(), &nbytes) != 0)
      throw bad("a corrupt Blosc header");
    int n = blosc_decompress_ctx(src.data(), out.data(), out.size(), 1);
    if (n != static_cast<int>(out.size())) {
      const char *lib = blosc_cbuffer_complib(src.data());
      throw bad(str("libblosc failed (inner codec ", lib ? lib : "unknown",
                    "; this libblosc has ", blosc_list_compressors(), ")"));
    }
    return;
#else
    throw bad("medrun was built without libblosc (install libblosc-dev and rebuild)");
#endif
  }
  if (id == "zstd") {
#ifdef MEDRUN_HAVE_ZSTD
    size_t n = ZSTD_decompress(out.data(), out.size(), src.data(), src.size());
    if (ZSTD_isError(n) || n != out.size())
      throw bad(ZSTD_isError(n) ? std::string(ZSTD_getErrorName(n))
                                : str("got ", n, " bytes, expected ", out.size()));
    return;
#else
    throw bad("medrun was built without libzstd (install libzstd-dev and rebuild)");
#endif
  }
  if (id == "zlib" || id == "gzip") {
#ifdef MEDRUN_HAVE_ZLIB
    z_stream zs{};
    if (inflateInit2(&zs, id == "gzip" ? 16 + MAX_WBITS : MAX_WBITS) != Z_OK)
      throw bad("inflateInit failed");
    if (src.size() > UINT_MAX) // zlib's counts are 32-bit
      throw bad(str("a compressed chunk of ", src.size(), " bytes (zlib reads at most 4 GiB)"));
    zs.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(src.data()));
    zs.avail_in = static_cast<uInt>(src.size());
    zs.next_out = reinterpret_cast<Bytef *>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    int rc = inflate(&zs, Z_FINISH);
    size_t got = out.size() - zs.avail_out;
    inflateEnd(&zs);
    if (rc != Z_STREAM_END || got != out.size())
      throw bad(rc == Z_STREAM_END ? str("got ", got, " bytes, expected ", out.size())
                                   : str("zlib error ", rc, " (corrupt or truncated)"));
    return;
#else
    throw bad("medrun was built without zlib (install zlib1g-dev and rebuild)");
#endif
  }
  if (id == "lz4") {
#ifdef MEDRUN_HAVE_LZ4
    // numcodecs.LZ4: a little-endian uint32 of the decompressed size, then one LZ4 block.
    if (src.size() < 4)
      throw bad("shorter than its size header");
    uint32_t size = 0;
    std::memcpy(&size, src.data(), 4);
    if (size != out.size())
      throw bad(str("its size header says ", size, " bytes, expected ", out.size(),
                    " (the chunk's shape and dtype)"));
    if (src.size() - 4 > static_cast<size_t>(INT_MAX))
      throw bad(str("a compressed chunk of ", src.size(), " bytes (LZ4 reads at most 2 GiB)"));
    int n = LZ4_decompress_safe(src.data() + 4, out.data(), static_cast<int>(src.size() - 4),
                                static_cast<int>(out.size()));
    if (n != static_cast<int>(out.size()))
      throw bad("corrupt or truncated LZ4 block");
    return;
#else
    throw bad("medrun was built without liblz4 (install liblz4-dev and rebuild)");
#endif
  }
  throw Error(str(file, ": unsupported compressor '", id,
                  "' (expected blosc, zstd, zlib, gzip, lz4 or none)"));
}

class ZarrReader : public VolumeReader {
public:
  ZarrReader(const std::string &container, const std::string &requested, int64_t channel)
      : channel_(channel) {
    info_.path = container;
    info_.format = "zarr";
    std::string key = requested;
    fs::path root(container);
    if (key.empty() && !fs::exists(root / ".zarray")) {
      std::vector<std::string> arrays = arraysUnder(root);
      if (arrays.empty())
        throw Error(str(container, ": no Zarr v2 array (.zarray) in it"));
      key = arrays.front();
    }
    info_.key = key;
    dir_ = key.empty() ? root : root / key;
    if (!fs::exists(dir_ / ".zarray")) {
      std::string list;
      for (const std::string &a : arraysUnder(root))
        list += (list.empty() ? "" : ", ") + a;
      throw Error(str(container, ": no Zarr array '", key, "' (",
                      fs::exists(dir_ / ".zgroup") ? "a group; " : "",
                      list.empty() ? std::string("no arrays there") : "arrays: " + list, ")"));
    }
    const std::string meta = (dir_ / ".zarray").string();
    json z = readJson(dir_ / ".zarray", "the array metadata");
    auto fail = [&](const std::string &why) { return Error(str(meta, ": ", why)); };
    try {
      if (z.value("zarr_format", 0) != 2)
        throw fail(str("zarr_format ", shown(z.value("zarr_format", json())),
                       ": expected 2 (Zarr v2)"));
      if (!z.is_object())
        throw fail("expected a JSON object");
      shape_ = sizes(z, "shape", fail);
      chunks_ = sizes(z, "chunks", fail);
      if (chunks_.size() != shape_.size())
        throw fail("shape and chunks have different lengths");
      const json &dt = z.at("dtype");
      if (!dt.is_string())
        throw fail(str("structured dtype ", shown(dt), ": expected a numeric dtype"));
      parseDtype(dt.get<std::string>(), fail);
      if (z.value("order", "C") != "C")
        throw fail("order F: only C-order arrays are read (rewrite with order='C')");
      if (z.contains("filters") && !z["filters"].is_null() && !z["filters"].empty())
        throw fail(str("filters ", shown(z["filters"]),
                       " are not supported (expected none; compressors only)"));
      compressor_ = z.value("compressor", json());
      if (!compressor_.is_null()) {
        std::string id = compressor_.value("id", "");
        if (id != "blosc" && id != "zstd" && id != "zlib" && id != "gzip" && id != "lz4")
          throw fail(str("unsupported compressor '", id,
                         "' (expected blosc, zstd, zlib, gzip, lz4 or none)"));
      }
      separator_ = z.value("dimension_separator", ".");
      if (separator_ != "." && separator_ != "/")
        throw fail(str("dimension_separator '", separator_, "': expected '.' or '/'"));
      const json fill = z.value("fill_value", json());
      if (fill.is_number())
        fill_ = fill.get<double>();
      else if (fill.is_boolean())
        fill_ = fill.get<bool>() ? 1 : 0;
      else if (fill == "NaN" || fill == "Infinity" || fill == "-Infinity")
        fill_ = fill == "NaN" ? std::nan("") : fill == "-Infinity" ? -INFINITY : INFINITY;
      else if (!fill.is_null())
        throw fail(str("fill_value ", shown(fill), ": expected a number, NaN, Infinity or -Infinity"));
      // An integer array's fill is a whole number of its type (converting another is
      // undefined); a float32 one may round to infinity as NumPy's does.
      if (isIntegerVoxel(info_.type) && !fill.is_null() &&
          (!(std::nearbyint(fill_) == fill_) || fill_ < -0x1p63 || fill_ >= 0x1p64))
        throw fail(str("fill_value ", shown(fill), " is not a whole number in the dtype's range"));
    } catch (const json::exception &e) {
      throw fail(str("malformed array metadata (", e.what(), ")"));
    }
    // Declared sizes are untrusted (medrun/Sizes.h): a product that wraps would size the
    // chunk buffer too small for the copy below.
    checkedCount(shape_, meta, 1, kMaxArrayElements);
    const int64_t chunkElems = checkedCount(chunks_, meta, 1, INT64_MAX, "chunks");
    checkedBytes(chunkElems, voxelSize(info_.type), kMaxDecodedChunkBytes,
                 str(meta, ": chunks ", shapeString(chunks_)),
                 "the 1 GiB limit on a decoded chunk");
    const ArrayAxes axes = arrayAxes(shape_, info_.name(), channel);
    info_.shape = axes.shape;
    info_.channels = axes.channels;
    first_ = axes.first;
    channelAxis_ = axes.channelAxis;
    for (int a = 0; a < 3; ++a)
      info_.chunk[a] = std::min(chunks_[first_ + a], info_.shape[a]);
    if (fs::exists(dir_ / ".zattrs")) {
      json attrs = readJson(dir_ / ".zattrs", "the attributes");
      auto three = [&](const char *name) -> std::vector<double> {
        if (!attrs.is_object() || !attrs.contains(name) || !attrs[name].is_array())
          return {};
        std::vector<double> v;
        for (const json &e : attrs[name])
          if (e.is_number())
            v.push_back(e.get<double>());
        if (v.size() > 3)
          v.erase(v.begin(), v.end() - 3);
        return v.size() == 3 ? v : std::vector<double>{};
      };
      std::vector<double> res = three("resolution"), off = three("offset");
      if (res.size() == 3 && res[0] > 0 && res[1] > 0 && res[2] > 0) {
        for (int a = 0; a < 3; ++a)
          info_.spacing[a] = res[a];
        info_.spacingFrom = "the resolution attribute in .zattrs";
      }
      for (int a = 0; a < 3; ++a) {
        info_.affine[a * 4 + a] = info_.spacing[2 - a];
        if (off.size() == 3)
          info_.affine[a * 4 + 3] = off[2 - a];
      }
    }
  }

protected:
  void decode(const Box3 &lo, const Box3 &size, void *dst) const override {
    const size_t elem = voxelSize(info_.type);
    std::string name;
    int64_t chunkElems = 1;
    for (size_t a = 0; a < shape_.size(); ++a) {
      int64_t index = 0;
      if (a >= first_ && a < first_ + 3)
        index = lo[a - first_] / chunks_[a];
      else if (static_cast<int64_t>(a) == channelAxis_)
        index = channel_ / chunks_[a];
      name += (a ? separator_ : "") + std::to_string(index);
      chunkElems *= chunks_[a];
    }
    const fs::path file = dir_ / name;
    bool missing = false;
    std::string raw = readFile(file, missing);
    if (missing) {
      fillValue(static_cast<char *>(dst), size[0] * size[1] * size[2]);
      return;
    }
    std::vector<char> chunk = allocate<char>(chunkElems * static_cast<int64_t>(elem), file.string(),
                                             str("a chunk of ", shapeString(chunks_)));
    decompress(compressor_, raw, chunk, file.string());
    if (swap_)
      for (size_t i = 0; i < chunk.size(); i += elem)
        std::reverse(chunk.begin() + i, chunk.begin() + i + elem);
    // The chunk is C order over all axes; the volume's axes are first_ .. first_+2.
    std::vector<int64_t> stride(shape_.size(), 1);
    for (size_t a = shape_.size() - 1; a > 0; --a)
      stride[a - 1] = stride[a] * chunks_[a];
    const int64_t sz = stride[first_], sy = stride[first_ + 1], sx = stride[first_ + 2];
    const int64_t c0 = channelAxis_ < 0 ? 0 : channel_ % chunks_[channelAxis_] * stride[channelAxis_];
    char *out = static_cast<char *>(dst);
    for (int64_t z = 0; z < size[0]; ++z)
      for (int64_t y = 0; y < size[1]; ++y) {
        const char *src = chunk.data() + (c0 + z * sz + y * sy) * elem;
        char *d = out + ((z * size[1] + y) * size[2]) * elem;
        if (sx == 1)
          std::memcpy(d, src, size[2] * elem);
        else
          for (int64_t x = 0; x < size[2]; ++x)
            std::memcpy(d + x * elem, src + x * sx * elem, elem);
      }
  }

private:
  template <typename F> void parseDtype(const std::string &dt, F &&fail) {
    if (dt.size() < 3)
      throw fail(str("unsupported dtype '", dt, "'"));
    const char order = dt[0];
    const std::string code = dt.substr(1);
    static const std::pair<const char *, VoxelType> codes[] = {
        {"u1", VoxelType::U8},  {"i1", VoxelType::I8},  {"b1", VoxelType::U8},
        {"u2", VoxelType::U16}, {"i2", VoxelType::I16}, {"u4", VoxelType::U32},
        {"i4", VoxelType::I32}, {"u8", VoxelType::U64}, {"i8", VoxelType::I64},
        {"f4", VoxelType::F32}, {"f8", VoxelType::F64}};
    for (auto &[c, t] : codes)
      if (code == c && (order == '<' || order == '>' || order == '|' || order == '=')) {
        info_.type = t;
        swap_ = order == '>' && voxelSize(t) > 1;
        return;
      }
    throw fail(str("unsupported dtype '", dt,
                   "' (expected u1, i1, b1, u2, i2, u4, i4, u8, i8, f4 or f8)"));
  }

  void fillValue(char *dst, int64_t n) const {
    std::vector<char> one(voxelSize(info_.type));
    double f = fill_;
    switch (info_.type) {
    case VoxelType::F32: {
      // Past float's range: infinity, as NumPy rounds (converting it is undefined in C++).
      float v = std::isfinite(f) && std::abs(f) > FLT_MAX ? (f > 0 ? INFINITY : -INFINITY)
                                                          : static_cast<float>(f);
      std::memcpy(one.data(), &v, 4);
      break;
    }
    case VoxelType::F64: std::memcpy(one.data(), &f, 8); break;
    case VoxelType::U64: {
      uint64_t v = f >= 0x1p63 ? static_cast<uint64_t>(f) : static_cast<uint64_t>(static_cast<int64_t>(f));
      std::memcpy(one.data(), &v, 8);
      break;
    }
    default: {
      // Checked at open: a whole number of the dtype (a float fill is never read here).
      int64_t v = std::isfinite(f) && f >= -0x1p63 && f < 0x1p63 ? static_cast<int64_t>(f) : 0;
      std::memcpy(one.data(), &v, one.size()); // little-endian: the low bytes
    }
    }
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(dst + i * one.size(), one.data(), one.size());
  }

  fs::path dir_;
  std::vector<int64_t> shape_, chunks_;
  size_t first_ = 0;
  int64_t channel_ = -1, channelAxis_ = -1; ///< the channel read, and its axis in shape_
  json compressor_;
  std::string separator_ = ".";
  double fill_ = 0;
  bool swap_ = false;
};

const char *dtypeString(VoxelType t) {
  switch (t) {
  case VoxelType::U8: return "|u1";
  case VoxelType::I8: return "|i1";
  case VoxelType::U16: return "<u2";
  case VoxelType::I16: return "<i2";
  case VoxelType::U32: return "<u4";
  case VoxelType::I32: return "<i4";
  case VoxelType::U64: return "<u8";
  case VoxelType::I64: return "<i8";
  case VoxelType::F32: return "<f4";
  case VoxelType::F64: return "<f8";
  }
  return "";
}

void writeText(const fs::path &p, const std::string &text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out)
    throw Error(str(p.string(), ": cannot write"));
}

} // namespace

std::unique_ptr<VolumeReader> openZarr(const std::string &container, const std::string &key,
                                       int64_t channel) {
  return std::make_unique<ZarrReader>(container, key, channel);
}

#ifdef MEDRUN_HAVE_ZLIB
namespace {

/// Writes `text` to `p` through a temporary name and a rename: readers (and a resumed run)
/// see the old file or the new one, never a part.
void writeAtomically(const fs::path &p, const std::string &text) {
  fs::path tmp = p;
  tmp += ".partial";
  writeText(tmp, text);
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec)
    throw Error(str(p.string(), ": cannot write (rename: ", ec.message(), ")"));
}

class ZarrWriter : public VolumeWriter {
public:
  ZarrWriter(const std::string &container, const std::string &key, const VolumeData &v,
             const Box3 &chunk, bool reopen)
      : shape_(v.shape), channels_(v.channels), type_(v.type) {
    std::string base = container;
    while (base.size() > 1 && base.back() == '/')
      base.pop_back();
    const fs::path root(base);
    final_ = key.empty() ? root : root / key;
    dir_ = final_;
    dir_ += kPartialSuffix; // until finish()
    name_ = key.empty() ? container : container + "/" + key;
    for (int a = 0; a < 3; ++a)
      chunk_[a] = std::min(chunk[a], v.shape[a]);
    const bool channels = v.channels > 1; // a leading channel axis, one chunk per channel
    json shape = {v.shape[0], v.shape[1], v.shape[2]}, chunks = {chunk_[0], chunk_[1], chunk_[2]};
    if (channels) {
      shape.insert(shape.begin(), v.channels);
      chunks.insert(chunks.begin(), 1);
    }
    if (reopen) {
      // The unfinished array, or else a finished one to add boxes to.
      if (!fs::exists(dir_ / ".zarray") && fs::exists(final_ / ".zarray")) {
        dir_ = final_;
        finished_ = true;
      }
      json z = readJson(dir_ / ".zarray", "the array metadata to add blocks to");
      if (!z.is_object() || z.value("shape", json()) != shape || z.value("chunks", json()) != chunks ||
          z.value("dtype", json()) != dtypeString(v.type) ||
          z.value("dimension_separator", json(".")) != ".")
        throw Error(str(name_, ": the existing array (shape ", z.value("shape", json()).dump(),
                        ", chunks ", z.value("chunks", json()).dump(), ", dtype ",
                        z.value("dtype", json()).dump(), ") is not the one to continue (shape ",
                        shape.dump(), ", chunks ", chunks.dump(), ", dtype ", dtypeString(v.type),
                        ")"));
      return;
    }
    std::error_code ec;
    fs::remove_all(dir_, ec); // an unfinished array of an earlier run, stale chunks included
    fs::create_directories(dir_, ec);
    if (ec)
      throw Error(str(dir_.string(), ": cannot create the Zarr array directory: ", ec.message()));
    if (!key.empty() && !fs::exists(root / ".zgroup"))
      writeText(root / ".zgroup", "{\"zarr_format\": 2}\n");
    json meta = {{"zarr_format", 2},
                 {"shape", shape},
                 {"chunks", chunks},
                 {"dtype", dtypeString(v.type)},
                 {"compressor", {{"id", "zlib"}, {"level", 5}}},
                 {"fill_value", 0},
                 {"order", "C"},
                 {"filters", nullptr},
                 {"dimension_separator", "."}};
    writeAtomically(dir_ / ".zattrs", json({{"resolution", v.spacing}}).dump(2) + "\n");
    writeAtomically(dir_ / ".zarray", meta.dump(2) + "\n");
  }

  void write(const Box3 &lo, const Box3 &size, const void *data) override {
    for (int a = 0; a < 3; ++a)
      if (lo[a] < 0 || size[a] < 1 || lo[a] % chunk_[a] != 0 || lo[a] + size[a] > shape_[a] ||
          (size[a] % chunk_[a] != 0 && lo[a] + size[a] != shape_[a]))
        throw Error(str(name_, ": the box at ", lo[0], ",", lo[1], ",", lo[2], " of ", size[0],
                        "x", size[1], "x", size[2], " is not whole chunks of ", chunk_[0], "x",
                        chunk_[1], "x", chunk_[2], " inside the array"));
    const size_t elem = voxelSize(type_);
    const Box3 &chunk = chunk_;
    std::vector<char> buf(static_cast<size_t>(chunk[0] * chunk[1] * chunk[2]) * elem);
    const int64_t boxVoxels = size[0] * size[1] * size[2];
    for (int64_t ch = 0; ch < channels_; ++ch) {
      const char *src = static_cast<const char *>(data) + ch * boxVoxels * static_cast<int64_t>(elem);
      const std::string prefix = channels_ > 1 ? str(ch, ".") : "";
      for (int64_t z0 = 0; z0 < size[0]; z0 += chunk[0])
        for (int64_t y0 = 0; y0 < size[1]; y0 += chunk[1])
          for (int64_t x0 = 0; x0 < size[2]; x0 += chunk[2]) {
            std::fill(buf.begin(), buf.end(), 0); // edge chunks are padded with the fill value
            const int64_t nz = std::min(chunk[0], size[0] - z0), ny = std::min(chunk[1], size[1] - y0),
                          nx = std::min(chunk[2], size[2] - x0);
            for (int64_t z = 0; z < nz; ++z)
              for (int64_t y = 0; y < ny; ++y)
                std::memcpy(buf.data() + ((z * chunk[1] + y) * chunk[2]) * elem,
                            src + (((z0 + z) * size[1] + y0 + y) * size[2] + x0) * elem, nx * elem);
            uLongf n = compressBound(buf.size());
            std::string packed(n, '\0');
            if (compress2(reinterpret_cast<Bytef *>(packed.data()), &n,
                          reinterpret_cast<const Bytef *>(buf.data()), buf.size(), 5) != Z_OK)
              throw Error(str(dir_.string(), ": zlib compression failed"));
            packed.resize(n);
            writeAtomically(dir_ / str(prefix, (lo[0] + z0) / chunk[0], ".", (lo[1] + y0) / chunk[1],
                                       ".", (lo[2] + x0) / chunk[2]),
                            packed);
          }
    }
  }

  void finish() override {
    if (finished_)
      return;
    // Replaces the finished array of an earlier run: between the two steps neither is
    // there, never a part of one.
    std::error_code ec;
    if (fs::exists(final_, ec))
      fs::remove_all(final_, ec);
    if (!ec)
      fs::rename(dir_, final_, ec);
    if (ec)
      throw Error(str(name_, ": cannot move the finished array from ", dir_.string(),
                      " into place: ", ec.message()));
    dir_ = final_;
    finished_ = true;
  }

  /// After a failed whole write: the unfinished array is removed.
  void discard() {
    std::error_code ec;
    if (!finished_)
      fs::remove_all(dir_, ec);
  }

private:
  fs::path dir_, final_; ///< where the array is written, and its name when finished
  std::string name_;
  Box3 shape_;
  int64_t channels_;
  VoxelType type_;
  bool finished_ = false; ///< dir_ is final_ (moved there, or reopened there)
};

} // namespace
#endif

std::unique_ptr<VolumeWriter> createZarr(const std::string &container, const std::string &key,
                                         const VolumeData &v, const Box3 &chunk, bool reopen) {
#ifdef MEDRUN_HAVE_ZLIB
  return std::make_unique<ZarrWriter>(container, key, v, chunk, reopen);
#else
  (void)key, (void)v, (void)chunk, (void)reopen;
  throw Error(str(container, ": medrun was built without zlib (install zlib1g-dev and rebuild)"));
#endif
}

void writeZarr(const std::string &container, const std::string &key, const VolumeData &v) {
#ifdef MEDRUN_HAVE_ZLIB
  ZarrWriter writer(container, key, v, {64, 64, 64}, false);
  try {
    writer.write({0, 0, 0}, v.shape, v.data);
    writer.finish();
  } catch (...) {
    writer.discard();
    throw;
  }
#else
  createZarr(container, key, v, {64, 64, 64}, false); // says what is missing
#endif
}

} // namespace medrun::io
