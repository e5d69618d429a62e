//===- Artifact.cpp - reading and validating artifacts -------------------------===//
#include "medrun/Artifact.h"
#include "medrun/Error.h"
#include "medrun/Sizes.h"
#include "PlanVerifier.h"
#include "../plan/PlanReader.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>

namespace medrun {

using json = nlohmann::json;

uint32_t crc32(const void *data, size_t size, uint32_t crc) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  const auto *p = static_cast<const uint8_t *>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

//===----------------------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------------------===//

namespace {

/// The names of the kernels a CUDA source defines: `__global__ void [__launch_bounds__(N)] NAME(`.
std::vector<std::string> kernelsDefinedIn(const std::string &source) {
  std::vector<std::string> names;
  const std::string marker = "__global__ void ";
  for (size_t at = source.find(marker); at != std::string::npos;
       at = source.find(marker, at + 1)) {
    size_t p = at + marker.size();
    if (source.compare(p, 18, "__launch_bounds__(") == 0) {
      p = source.find(')', p);
      if (p == std::string::npos)
        break;
      p = source.find_first_not_of(' ', p + 1);
    }
    size_t end = source.find('(', p);
    if (p == std::string::npos || end == std::string::npos)
      break;
    names.push_back(source.substr(p, end - p));
  }
  return names;
}

std::string readFile(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(str(path, ": is a directory, not an artifact (the file `medc compile MODEL.mlir "
                          "-o FILE.medc` writes)"));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(str(path, ": cannot open the artifact (does it exist? compile it with `medc "
                          "compile MODEL.mlir -o ",
                    path, "`)"));
  try {
    return std::string(std::istreambuf_iterator<char>(in), {});
  } catch (const std::exception &e) { // a read error (EIO, a special file)
    throw Error(str(path, ": cannot read the artifact: ", e.what()));
  }
}

template <typename T> T readLE(const std::string &bytes, size_t offset) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<T>(static_cast<uint8_t>(bytes[offset + i])) << (8 * i);
  return v;
}

} // namespace

Artifact Artifact::load(const std::string &path) {
  std::string bytes = readFile(path);
  constexpr size_t kHeader = 24, kTrailer = 4;
  if (bytes.size() < 8 || bytes.compare(0, 8, std::string(kArtifactMagic, 8)) != 0)
    throw Error(str(path, ": not a medc artifact (the file does not start with MEDCART)"));
  if (bytes.size() < kHeader)
    throw Error(str(path, ": truncated artifact: ", bytes.size(), " bytes, the header alone has ",
                    kHeader));
  uint32_t version = readLE<uint32_t>(bytes, 8);
  if (version < kOldestFormatVersion || version > kFormatVersion)
    throw Error(str(path, ": artifact format version ", version, ", but this medrun reads ",
                    kOldestFormatVersion == kFormatVersion
                        ? str("version ", kFormatVersion, " only")
                        : str("versions ", kOldestFormatVersion, " to ", kFormatVersion),
                    "; recompile the model with a matching medc"));
  uint64_t jsonSize = readLE<uint64_t>(bytes, 16);
  auto truncated = [&](uint64_t need) {
    return Error(str(path, ": truncated artifact: expected ", need, " bytes, the file has ",
                     bytes.size()));
  };
  const uint64_t sectionTable = version >= 3 ? 8 : 0; // the section count
  if (jsonSize > bytes.size() || kHeader + jsonSize + sectionTable + kTrailer > bytes.size())
    throw truncated(kHeader + jsonSize + sectionTable + kTrailer);
  // Version 3: binary sections between the JSON document and the checksum.
  std::map<std::string, std::string> sections;
  std::vector<std::pair<size_t, size_t>> sectionSpans; // offset, size: read after the CRC
  std::vector<std::string> sectionNames;
  size_t end = kHeader + jsonSize;
  if (version >= 3) {
    auto need = [&](uint64_t n) {
      if (n > bytes.size() || end + n + kTrailer > bytes.size())
        throw truncated(end + n + kTrailer);
    };
    need(8);
    uint64_t count = readLE<uint64_t>(bytes, end);
    end += 8;
    for (uint64_t i = 0; i < count; ++i) {
      need(8);
      uint64_t nameSize = readLE<uint64_t>(bytes, end);
      end += 8;
      need(nameSize);
      std::string name = bytes.substr(end, nameSize);
      end += nameSize;
      need(8);
      uint64_t size = readLE<uint64_t>(bytes, end);
      end += 8;
      need(size);
      sectionNames.push_back(name);
      sectionSpans.emplace_back(end, size);
      end += size;
    }
  }
  if (bytes.size() != end + kTrailer) {
    if (bytes.size() > end + kTrailer)
      throw Error(str(path, ": artifact has ", bytes.size() - (end + kTrailer),
                      " unexpected trailing bytes"));
    throw truncated(end + kTrailer);
  }
  uint32_t stored = readLE<uint32_t>(bytes, end);
  uint32_t actual = crc32(bytes.data(), end);
  if (stored != actual)
    throw Error(str(path, ": corrupted artifact: checksum ", std::hex, actual,
                    " does not match the stored ", stored));
  for (size_t i = 0; i < sectionNames.size(); ++i)
    if (!sections.emplace(sectionNames[i], bytes.substr(sectionSpans[i].first,
                                                        sectionSpans[i].second))
             .second)
      throw Error(str(path, ": malformed artifact: section '", sectionNames[i], "' appears twice"));

  json doc = json::parse(bytes.begin() + kHeader, bytes.begin() + kHeader + jsonSize, nullptr,
                         /*allow_exceptions=*/false);
  PlanReader r{path};
  if (doc.is_discarded() || !doc.is_object())
    r.fail("document", "not a JSON object");
  if (r.string(doc, "format", "document") != "medc-artifact")
    r.fail("document", "'format' is not medc-artifact");

  Artifact a;
  a.path = path;
  a.version = version;
  a.compiler = r.string(doc, "compiler", "document");
  a.source = r.string(doc, "source", "document");
  a.sourceSha256 = r.string(doc, "source_sha256", "document");
  const json &options = r.field(doc, "options", "document");
  for (auto it = options.begin(); it != options.end(); ++it)
    a.options[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();

  std::set<std::string> names;
  const json &params = r.field(doc, "parameters", "document");
  for (size_t i = 0; i < params.size(); ++i) {
    std::string where = str("parameters[", i, "]");
    ParameterInfo p;
    p.name = r.string(params[i], "name", where);
    where = str("parameter '", p.name, "'");
    p.dtype = parseDType(r.string(params[i], "dtype", where), path + ": " + where);
    p.shape = r.shape(params[i], where);
    p.init = r.string(params[i], "init", where);
    if (p.init == "uniform") {
      const json &fanIn = r.field(params[i], "fan_in", where);
      if (!fanIn.is_number_integer() || fanIn.get<int64_t>() < 1)
        r.fail(where, "'fan_in' must be a positive integer");
      p.fanIn = fanIn.get<int64_t>();
    } else if (p.init == "copy") {
      p.source = r.string(params[i], "source", where);
    } else if (p.init == "constant") {
      const json &value = r.field(params[i], "value", where);
      if (!value.is_number() || !std::isfinite(value.get<double>()) ||
          std::fabs(value.get<double>()) > std::numeric_limits<float>::max())
        r.fail(where, "'value' must be a finite number within f32's range");
      p.value = static_cast<float>(value.get<double>());
    } else if (p.init != "zeros" && p.init != "ones") {
      r.fail(where, str("unknown init '", p.init,
                        "' (expected zeros, ones, uniform, constant or copy)"));
    }
    if (params[i].contains("trainable")) {
      if (!params[i]["trainable"].is_boolean())
        r.fail(where, "'trainable' must be true or false");
      p.trainable = params[i]["trainable"].get<bool>();
    }
    if (!names.insert(p.name).second)
      r.fail(where, "declared twice");
    a.parameters.push_back(std::move(p));
  }
  for (const ParameterInfo &p : a.parameters)
    if (p.init == "copy") {
      const ParameterInfo *src = a.parameter(p.source);
      if (!src || src->init == "copy" || src->shape != p.shape)
        r.fail(str("parameter '", p.name, "'"),
               str("copies '", p.source, "', which is missing, a copy, or of another shape"));
    }
  // Flat buffers: members are distinct f32 parameters, aligned, ascending, inside the buffer.
  std::set<std::string> members;
  static const json none = json::array();
  const json &flats = doc.contains("flat_buffers") ? doc["flat_buffers"] : none; // absent: none
  if (!flats.is_array())
    r.fail("document", "'flat_buffers' must be a list");
  for (size_t i = 0; i < flats.size(); ++i) {
    FlatBuffer f;
    f.name = r.string(flats[i], "name", str("flat_buffers[", i, "]"));
    const std::string where = str("flat buffer '", f.name, "'");
    if (r.string(flats[i], "dtype", where) != "f32")
      r.fail(where, "'dtype' must be f32");
    auto integer = [&](const char *key, int64_t least) {
      const json &v = r.field(flats[i], key, where);
      if (!v.is_number_integer() || v.get<int64_t>() < least)
        r.fail(where, str("'", key, "' must be an integer of at least ", least));
      return v.get<int64_t>();
    };
    f.size = integer("size", 0);
    f.alignment = integer("alignment", 1);
    if (!names.insert(f.name).second)
      r.fail(where, "has the name of a parameter or of another flat buffer");
    const json &list = r.field(flats[i], "members", where);
    if (!list.is_array())
      r.fail(where, "'members' must be a list");
    int64_t end = 0;
    for (size_t j = 0; j < list.size(); ++j) {
      FlatBuffer::Member m;
      m.name = r.string(list[j], "name", str(where, " member ", j));
      const json &offset = r.field(list[j], "offset", str(where, " member '", m.name, "'"));
      const ParameterInfo *p = a.parameter(m.name);
      if (!p || p->dtype != DType::F32)
        r.fail(where, str("member '", m.name, "' is not an f32 parameter of the table"));
      if (!members.insert(m.name).second)
        r.fail(where, str("member '", m.name, "' is a member twice"));
      if (!offset.is_number_integer() || offset.get<int64_t>() < end ||
          offset.get<int64_t>() % f.alignment != 0)
        r.fail(where, str("member '", m.name, "': 'offset' must be a multiple of ", f.alignment,
                          " at or after ", end, " (the end of the member before it)"));
      m.offset = offset.get<int64_t>();
      m.shape = p->shape;
      // Checked: the plan verifier bounds sizes only later.
      const int64_t n = checkedCount(p->shape, str(path, ": ", where, " member '", m.name, "'"), 0);
      if (n > f.size || m.offset > f.size - n)
        r.fail(where, str("member '", m.name, "' (", shapeStr(p->shape), ") at offset ", m.offset,
                          " does not fit in the size ", f.size));
      end = m.offset + n;
      if (end > f.size)
        r.fail(where, str("member '", m.name, "' ends at ", end, ", beyond the size ", f.size));
      f.members.push_back(std::move(m));
    }
    a.flatBuffers.push_back(std::move(f));
  }
  Plan plan = r.plan(doc);
  a.fusions = std::move(plan.fusions);
  a.functions = std::move(plan.functions);
  a.sections = std::move(sections);
  if (doc.contains("cuda")) {
    const json &c = doc["cuda"];
    CudaInfo info;
    info.arch = r.string(c, "arch", "cuda");
    info.nvrtc = r.string(c, "nvrtc", "cuda");
    if (c.contains("kernels") && c["kernels"].is_number_integer())
      info.kernels = c["kernels"].get<int64_t>();
    if (c.contains("launches") && c["launches"].is_number_integer())
      info.launches = c["launches"].get<int64_t>();
    // The kernels come in modules compiled apart (docs/artifact.md); each names its sections.
    const json &modules = r.field(c, "modules", "cuda");
    if (!modules.is_array() || modules.empty())
      r.fail("cuda", "'modules' must be a non-empty list");
    for (size_t m = 0; m < modules.size(); ++m) {
      std::string where = str("cuda.modules[", m, "]");
      if (!modules[m].is_object())
        r.fail(where, "not an object");
      auto section = [&](const char *key) {
        std::string name = r.string(modules[m], key, where);
        auto it = a.sections.find(name);
        if (it == a.sections.end())
          r.fail(where, str("'", key, "' names the section '", name, "', which the file lacks"));
        return it->second;
      };
      CudaModule module;
      module.source = section("source");
      module.cubin = section("cubin");
      if (modules[m].contains("ptx")) // left out by medc compile --cuda-ptx=false
        module.ptx = section("ptx");
      if (modules[m].contains("arch")) {
        module.arch = r.string(modules[m], "arch", where);
        if (module.arch != "sm_90a")
          r.fail(where, str("'arch' is '", module.arch, "'; the only module architecture of "
                            "its own is sm_90a"));
      }
      if (module.cubin.empty() && module.ptx.empty())
        r.fail(where, "the cubin and PTX sections are empty");
      for (const std::string &k : kernelsDefinedIn(module.source))
        info.kernelModule.emplace(k, m); // the prelude's, in every module: the first
      info.modules.push_back(std::move(module));
    }
    for (const Function &f : a.functions)
      if (!f.cuda)
        r.fail(str("function '", f.name, "'"), "has no 'cuda_plan' in an artifact with CUDA kernels");
    a.cuda = std::move(info);
  }
  verifyPlan(a);
  return a;
}

const Function &Artifact::function(const std::string &name) const {
  for (const Function &f : functions)
    if (f.name == name)
      return f;
  std::string available;
  for (const Function &f : functions)
    available += (available.empty() ? "" : ", ") + f.name;
  throw Error(str(path, ": no function '", name, "' (the artifact has: ", available, ")"));
}

Tensor gatherFlat(const FlatBuffer &flat, const TensorMap &tensors, DType dtype) {
  Tensor y(dtype, {flat.size});
  std::memset(y.raw(), 0, y.nbytes());
  const size_t es = dtypeSize(dtype);
  for (const FlatBuffer::Member &m : flat.members) {
    auto it = tensors.find(m.name);
    if (it == tensors.end())
      throw Error(str("parameter '", m.name, "' (of flat buffer '", flat.name, "') is missing"));
    if (it->second.shape() != m.shape)
      throw Error(str("parameter '", m.name, "': expected ", shapeStr(m.shape), ", got ",
                      shapeStr(it->second.shape())));
    const Tensor t = it->second.dtype() == dtype ? it->second : it->second.to(dtype);
    std::memcpy(static_cast<std::byte *>(y.raw()) + m.offset * es, t.raw(), t.nbytes());
  }
  return y;
}

void scatterFlat(const FlatBuffer &flat, const Tensor &value, TensorMap &out) {
  const size_t es = dtypeSize(value.dtype());
  for (const FlatBuffer::Member &m : flat.members) {
    Tensor t(value.dtype(), m.shape);
    std::memcpy(t.raw(), static_cast<const std::byte *>(value.raw()) + m.offset * es, t.nbytes());
    out[m.name] = std::move(t);
  }
}

const FlatBuffer *Artifact::flatBuffer(const std::string &name) const {
  for (const FlatBuffer &f : flatBuffers)
    if (f.name == name)
      return &f;
  return nullptr;
}

const ParameterInfo *Artifact::parameter(const std::string &name) const {
  for (const ParameterInfo &p : parameters)
    if (p.name == name)
      return &p;
  return nullptr;
}

} // namespace medrun
