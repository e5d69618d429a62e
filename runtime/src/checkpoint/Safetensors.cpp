//===- Safetensors.cpp - safetensors checkpoint files --------------------------------===//
//
// Validation follows huggingface/safetensors (src/tensor.rs): header length limit,
// '{' start, typed entries, end-begin == numel*size, entries tiling the buffer from 0,
// last end == buffer size, no duplicate keys, string-only metadata.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Safetensors.h"
#include "medrun/Error.h"
#include "medrun/Sizes.h"
#include "medrun/Npy.h" // detail::InputFile, detail::writeFileAtomic

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <set>

namespace medrun {

namespace {

using Json = nlohmann::ordered_json;

constexpr uint64_t kMaxHeaderLen = 100000000;
constexpr const char *kMetadataKey = "__metadata__";
constexpr const char *kSupported = "F32, F64, BF16, F16, I8, I16, I32, I64, U8 or BOOL";

const DType kAllDTypes[] = {DType::F32, DType::F64, DType::BF16, DType::F16, DType::I8,
                            DType::I16, DType::I32, DType::I64,  DType::U8,  DType::Bool};

bool parseSafetensorsDType(const std::string &name, DType &out) {
  for (DType t : kAllDTypes)
    if (name == safetensorsDTypeName(t)) {
      out = t;
      return true;
    }
  return false;
}

std::string jsonType(const Json &j) {
  if (j.is_number_float())
    return "a non-integer number";
  if (j.is_number_integer() && !j.is_number_unsigned())
    return "a negative number";
  return std::string(j.is_array() || j.is_object() ? "an " : "a ") + j.type_name();
}

/// A compact rendering of a JSON value for messages (at most ~80 characters).
std::string brief(const Json &j) {
  std::string s = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

struct Entry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

std::string offsetsStr(const Entry &e) { return str("[", e.begin, ", ", e.end, "]"); }

std::string shapeJson(const Shape &s) {
  std::string out = "[";
  for (size_t k = 0; k < s.size(); ++k)
    out += (k ? ", " : "") + std::to_string(s[k]);
  return out + "]";
}

} // namespace

const char *safetensorsDTypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "F32";
  case DType::F64:
    return "F64";
  case DType::BF16:
    return "BF16";
  case DType::F16:
    return "F16";
  case DType::I8:
    return "I8";
  case DType::I16:
    return "I16";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  case DType::U8:
    return "U8";
  case DType::Bool:
    return "BOOL";
  }
  return "?";
}

const Tensor *SafetensorsFile::find(const std::string &name) const {
  for (const auto &[n, t] : tensors)
    if (n == name)
      return &t;
  return nullptr;
}

SafetensorsFile readSafetensors(const std::string &path) {
  detail::InputFile f(path);
  auto fail = [&](const std::string &why) { return Error(str(path, ": ", why)); };

  if (f.size() < 8)
    throw fail(str("not a safetensors file: it has ", f.size(),
                   " bytes, fewer than the 8-byte header length"));
  unsigned char lenBytes[8];
  f.read(0, lenBytes, 8, "header length");
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k)
    n = (n << 8) | lenBytes[k];
  if (n > kMaxHeaderLen)
    throw fail(str("header length ", n, " exceeds the limit of ", kMaxHeaderLen,
                   " bytes (not a safetensors file?)"));
  if (n > f.size() - 8)
    throw fail(str("truncated: the header length is ", n, " bytes but only ", f.size() - 8,
                   " bytes follow the 8-byte length"));
  std::string text(n, '\0');
  f.read(8, text.data(), n, "header");
  if (text.empty() || text[0] != '{') {
    char shown[8];
    std::snprintf(shown, sizeof shown, "0x%02x", text.empty() ? 0 : (unsigned char)text[0]);
    throw fail(str("the header does not start with '{' (",
                   text.empty() ? std::string("it is empty") : str("found byte ", shown),
                   "); not a safetensors file?"));
  }

  // Parse, rejecting duplicate keys at any level (the DOM would silently keep one).
  std::vector<std::set<std::string>> keyStack;
  std::string topKey;
  Json header;
  try {
    header = Json::parse(text, [&](int, Json::parse_event_t ev, Json &parsed) {
      switch (ev) {
      case Json::parse_event_t::object_start:
        keyStack.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        keyStack.pop_back();
        break;
      case Json::parse_event_t::key: {
        const std::string &key = parsed.get_ref<const std::string &>();
        if (keyStack.size() == 1)
          topKey = key;
        if (!keyStack.back().insert(key).second) {
          if (keyStack.size() == 1)
            throw fail(str("duplicate key '", key, "' in the header"));
          throw fail(str("duplicate key '", key, "' in the entry of '", topKey, "'"));
        }
        break;
      }
      default:
        break;
      }
      return true;
    });
  } catch (const Json::exception &e) {
    throw fail(str("the header is not valid JSON: ", e.what()));
  }
  if (!header.is_object())
    throw fail("the header is not a JSON object");

  SafetensorsFile result;
  std::vector<Entry> entries;
  for (const auto &[name, value] : header.items()) {
    if (name == kMetadataKey) {
      if (value.is_null())
        continue;
      if (!value.is_object())
        throw fail(str("'__metadata__' must be an object of strings, found ", jsonType(value)));
      for (const auto &[k, v] : value.items()) {
        if (!v.is_string())
          throw fail(str("'__metadata__' value of key '", k, "' must be a string, found ",
                         jsonType(v), " ", brief(v)));
        result.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string &why) { return fail(str("tensor '", name, "': ", why)); };
    if (!value.is_object())
      throw bad(str("the entry must be an object with \"dtype\", \"shape\" and "
                    "\"data_offsets\", found ",
                    jsonType(value)));
    for (const char *field : {"dtype", "shape", "data_offsets"})
      if (!value.contains(field))
        throw bad(str("missing \"", field, "\""));
    Entry e;
    e.name = name;
    const Json &dt = value["dtype"];
    if (!dt.is_string())
      throw bad(str("\"dtype\" must be a string, found ", jsonType(dt), " ", brief(dt)));
    if (!parseSafetensorsDType(dt.get<std::string>(), e.dtype))
      throw bad(str("unsupported dtype '", dt.get<std::string>(), "' (expected ", kSupported, ")"));
    const Json &sh = value["shape"];
    if (!sh.is_array())
      throw bad(str("\"shape\" must be an array of non-negative integers, found ", jsonType(sh),
                    " ", brief(sh)));
    for (const Json &d : sh) {
      if (d.is_number_integer() && !d.is_number_unsigned())
        throw bad(str("negative dimension ", d.get<int64_t>(), " in shape ", brief(sh)));
      if (!d.is_number_unsigned())
        throw bad(str("\"shape\" must be an array of non-negative integers, found ", jsonType(d),
                      " ", brief(d), " in ", brief(sh)));
      uint64_t v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(INT64_MAX))
        throw bad(str("dimension ", v, " in shape ", brief(sh), " is too large"));
      e.shape.push_back(static_cast<int64_t>(v));
    }
    const Json &off = value["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      throw bad(str("\"data_offsets\" must be an array of two non-negative integers "
                    "[begin, end], found ",
                    brief(off)));
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.begin > e.end)
      throw bad(str("data_offsets ", offsetsStr(e), " has begin > end"));

    // end - begin must equal numel * element size (checked for overflow).
    const std::string what = str(path, ": tensor '", e.name, "'");
    const uint64_t need = checkedBytes(checkedCount(e.shape, what, 0), dtypeSize(e.dtype),
                                       UINT64_MAX, what, "a 64-bit size");
    if (e.end - e.begin != need)
      throw bad(str("data_offsets ", offsetsStr(e), " span ", e.end - e.begin, " bytes, but dtype ",
                    dt.get<std::string>(), " with shape ", shapeJson(e.shape), " needs ", need,
                    " bytes"));
    entries.push_back(std::move(e));
  }

  // The entries, sorted by offset, must tile the data buffer exactly.
  const uint64_t dataStart = 8 + n;
  const uint64_t bufferSize = f.size() - dataStart;
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_pair(entries[a].begin, entries[a].end) <
           std::make_pair(entries[b].begin, entries[b].end);
  });
  uint64_t covered = 0;
  const Entry *prev = nullptr;
  for (size_t idx : order) {
    const Entry &e = entries[idx];
    if (e.begin > covered)
      throw fail(str("hole in the tensor data: bytes [", covered, ", ", e.begin,
                     ") belong to no tensor (tensor '", e.name, "' has data_offsets ",
                     offsetsStr(e), ")"));
    if (e.begin < covered)
      throw fail(str("tensor '", e.name, "' data_offsets ", offsetsStr(e), " overlap tensor '",
                     prev->name, "' data_offsets ", offsetsStr(*prev)));
    covered = e.end;
    prev = &e;
  }
  if (covered > bufferSize)
    throw fail(str("truncated: expected ", covered, " bytes of tensor data, file has ", bufferSize,
                   " (tensor '", prev->name, "' data_offsets ", offsetsStr(*prev),
                   " extend past the end of the file)"));
  if (covered < bufferSize)
    throw fail(str("unexpected trailing data: expected ", covered,
                   " bytes of tensor data, file has ", bufferSize));

  // All checks passed: load.
  result.tensors.reserve(entries.size());
  for (const Entry &e : entries) {
    Tensor t;
    try {
      t = Tensor(e.dtype, e.shape);
    } catch (const std::bad_alloc &) {
      throw allocationError(str(path, ": tensor '", e.name, "'"),
                            str(shapeJson(e.shape), " ", dtypeName(e.dtype)), e.end - e.begin);
    }
    if (e.end > e.begin)
      f.read(dataStart + e.begin, t.raw(), static_cast<size_t>(e.end - e.begin),
             ("data of tensor '" + e.name + "'").c_str());
    result.tensors.emplace_back(e.name, std::move(t));
  }
  return result;
}

void writeSafetensors(const std::string &path,
                      const std::vector<std::pair<std::string, Tensor>> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  Json header = Json::object();
  Json meta = Json::object();
  for (const auto &[k, v] : metadata)
    meta[k] = v;
  if (!metadata.count("format"))
    meta["format"] = "pt";
  header[kMetadataKey] = std::move(meta);

  std::set<std::string> seen;
  std::vector<std::pair<const void *, size_t>> pieces;
  pieces.reserve(tensors.size() + 2);
  pieces.emplace_back(nullptr, 0); // header length, filled in below
  pieces.emplace_back(nullptr, 0); // header
  uint64_t offset = 0;
  for (const auto &[name, t] : tensors) {
    if (name.empty())
      throw Error(str(path, ": cannot write a tensor with an empty name"));
    if (name == kMetadataKey)
      throw Error(str(path, ": '", name, "' is reserved and cannot name a tensor"));
    if (!seen.insert(name).second)
      throw Error(str(path, ": duplicate tensor name '", name, "'"));
    if (!t.defined())
      throw Error(str(path, ": tensor '", name, "' is undefined (default-constructed)"));
    Json entry = Json::object();
    entry["dtype"] = safetensorsDTypeName(t.dtype());
    entry["shape"] = Json::array();
    for (int64_t d : t.shape())
      entry["shape"].push_back(d);
    entry["data_offsets"] = Json::array({offset, offset + t.nbytes()});
    header[name] = std::move(entry);
    offset += t.nbytes();
    if (t.nbytes())
      pieces.emplace_back(t.raw(), t.nbytes());
  }

  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception &e) {
    throw Error(str(path,
                    ": cannot encode the header (tensor names and metadata must be "
                    "valid UTF-8): ",
                    e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char lenBytes[8];
  for (int k = 0; k < 8; ++k)
    lenBytes[k] = static_cast<unsigned char>((uint64_t(text.size()) >> (8 * k)) & 0xff);
  pieces[0] = {lenBytes, 8};
  pieces[1] = {text.data(), text.size()};
  detail::writeFileAtomic(path, pieces);
}

} // namespace medrun
