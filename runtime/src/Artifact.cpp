//===- Artifact.cpp - reading and validating artifacts -------------------------===//
#include "medrun/Artifact.h"
#include "medrun/Error.h"
#include "PlanVerifier.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <fstream>
#include <iterator>
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
// OpInfo accessors
//===----------------------------------------------------------------------------------===//

std::string OpInfo::describe() const {
  return str("'med.", kind, "'", location.empty() ? "" : " at " + location);
}

const std::vector<int> &OpInfo::operand(const std::string &name) const {
  for (auto &[key, ids] : operands)
    if (key == name)
      return ids;
  throw Error(str(describe(), ": the plan has no operand '", name, "'"));
}

int OpInfo::single(const std::string &name) const {
  const std::vector<int> &ids = operand(name);
  if (ids.size() != 1)
    throw Error(str(describe(), ": operand '", name, "' needs exactly one value, the plan has ",
                    ids.size()));
  return ids.front();
}

std::optional<int> OpInfo::optional(const std::string &name) const {
  const std::vector<int> &ids = operand(name);
  if (ids.size() > 1)
    throw Error(str(describe(), ": optional operand '", name, "' has ", ids.size(), " values"));
  return ids.empty() ? std::nullopt : std::optional<int>(ids.front());
}

namespace {
template <typename T> const T &attrAs(const OpInfo &op, const std::string &name, const char *what) {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end())
    throw Error(str(op.describe(), ": the plan has no attribute '", name, "'"));
  if (const T *v = std::get_if<T>(&it->second))
    return *v;
  throw Error(str(op.describe(), ": attribute '", name, "' is not ", what));
}
} // namespace

int64_t OpInfo::intAttr(const std::string &n) const { return attrAs<int64_t>(*this, n, "an integer"); }
double OpInfo::floatAttr(const std::string &n) const {
  auto it = attrs.find(n);
  if (it != attrs.end())
    if (const int64_t *i = std::get_if<int64_t>(&it->second))
      return static_cast<double>(*i); // JSON writes 1.0 as 1
  return attrAs<double>(*this, n, "a number");
}
bool OpInfo::boolAttr(const std::string &n) const { return attrAs<bool>(*this, n, "a boolean"); }
const std::string &OpInfo::strAttr(const std::string &n) const {
  return attrAs<std::string>(*this, n, "a string");
}
std::vector<int64_t> OpInfo::intsAttr(const std::string &n) const {
  auto it = attrs.find(n);
  if (it != attrs.end())
    if (auto *d = std::get_if<std::vector<double>>(&it->second); d && d->empty())
      return {};
  return attrAs<std::vector<int64_t>>(*this, n, "a list of integers");
}
std::vector<double> OpInfo::floatsAttr(const std::string &n) const {
  auto it = attrs.find(n);
  if (it != attrs.end())
    if (auto *i = std::get_if<std::vector<int64_t>>(&it->second))
      return std::vector<double>(i->begin(), i->end());
  return attrAs<std::vector<double>>(*this, n, "a list of numbers");
}

//===----------------------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------------------===//

namespace {

// Reads fields of the JSON plan, reporting where a malformed one sits.
struct Reader {
  std::string file;
  std::vector<std::shared_ptr<const Function>> fusions; ///< bodies read so far

  [[noreturn]] void fail(const std::string &where, const std::string &msg) const {
    throw Error(str(file, ": malformed artifact: ", where, ": ", msg));
  }
  const json &field(const json &obj, const char *key, const std::string &where) const {
    if (!obj.is_object() || !obj.contains(key))
      fail(where, str("missing '", key, "'"));
    return obj.at(key);
  }
  std::string string(const json &obj, const char *key, const std::string &where) const {
    const json &v = field(obj, key, where);
    if (!v.is_string())
      fail(where, str("'", key, "' must be a string"));
    return v.get<std::string>();
  }
  std::vector<int64_t> ints(const json &v, const std::string &where) const {
    if (!v.is_array())
      fail(where, "expected a list of integers");
    std::vector<int64_t> out;
    for (const json &e : v) {
      if (!e.is_number_integer())
        fail(where, "expected a list of integers");
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
  Shape shape(const json &obj, const std::string &where) const {
    Shape s = ints(field(obj, "shape", where), where + ".shape");
    for (int64_t d : s)
      if (d < 0)
        fail(where, "negative size in shape");
    return s;
  }

  AttrValue attr(const json &v, const std::string &where) const {
    if (v.is_boolean())
      return v.get<bool>();
    if (v.is_number_integer())
      return v.get<int64_t>();
    if (v.is_number())
      return v.get<double>();
    if (v.is_string())
      return v.get<std::string>();
    if (v.is_array()) {
      bool allInts = std::all_of(v.begin(), v.end(), [](const json &e) { return e.is_number_integer(); });
      if (allInts && !v.empty())
        return ints(v, where);
      std::vector<double> out;
      for (const json &e : v) {
        if (!e.is_number())
          fail(where, "lists hold numbers only");
        out.push_back(e.get<double>());
      }
      return out;
    }
    fail(where, "unsupported attribute value");
  }

  Function function(const json &j, size_t index) const {
    Function f;
    std::string where = str("functions[", index, "]");
    f.name = string(j, "name", where);
    where = str("function '", f.name, "'");
    const json &values = field(j, "values", where);
    if (!values.is_array())
      fail(where, "'values' must be a list");
    for (size_t i = 0; i < values.size(); ++i) {
      const json &v = values[i];
      const std::string w = str(where, ".values[", i, "]");
      ValueInfo info{parseDType(string(v, "dtype", w), file), shape(v, where)};
      info.storage = info.dtype;
      if (v.contains("storage")) { // med-assign-storage's decision (mixed precision)
        info.storage = parseDType(string(v, "storage", w), file);
        if (!isFloat(info.dtype) ? info.storage != info.dtype : !isFloat(info.storage))
          fail(w, str("storage ", dtypeName(info.storage), " for a value of type ",
                      dtypeName(info.dtype)));
      }
      f.values.push_back(info);
    }
    auto ids = [&](const json &arr, const std::string &w) {
      std::vector<int> out;
      for (int64_t id : ints(arr, w)) {
        if (id < 0 || id >= static_cast<int64_t>(f.values.size()))
          fail(w, str("value id ", id, " out of range (", f.values.size(), " values)"));
        out.push_back(static_cast<int>(id));
      }
      return out;
    };
    f.inputs = ids(field(j, "inputs", where), where + ".inputs");
    f.outputs = ids(field(j, "outputs", where), where + ".outputs");
    // Optional name lists (older artifacts have none): one string per input / output.
    auto names = [&](const char *key, size_t count, const char *fallback) {
      std::vector<std::string> out;
      if (!j.contains(key)) {
        for (size_t i = 0; i < count; ++i)
          out.push_back(fallback + std::to_string(i));
        return out;
      }
      const json &list = j[key];
      if (!list.is_array() || list.size() != count)
        fail(where, str("'", key, "' must list one name per ", fallback == std::string("arg") ? "input" : "output"));
      for (const json &n : list) {
        if (!n.is_string())
          fail(where, str("'", key, "' must hold strings"));
        out.push_back(n.get<std::string>());
      }
      return out;
    };
    if (j.contains("precision")) {
      f.precision = string(j, "precision", where);
      if (f.precision != "fp32" && f.precision != "bf16-mixed" && f.precision != "fp16-mixed")
        fail(where, str("unknown precision '", f.precision,
                        "' (expected fp32, bf16-mixed or fp16-mixed)"));
    }
    // A mixed-precision function says how each value is stored (med-assign-storage).
    if (!f.precision.empty() && f.precision != "fp32")
      for (size_t i = 0; i < values.size(); ++i)
        if (!values[i].contains("storage"))
          fail(str(where, ".values[", i, "]"),
               str("a ", f.precision, " function needs the storage type of every value"));
    if (j.contains("init_loss_scale")) {
      const json &s = j["init_loss_scale"];
      if (!s.is_number() || !(s.get<double>() > 0))
        fail(where, "'init_loss_scale' must be a positive number");
      f.initLossScale = s.get<double>();
    }
    f.inputNames = names("input_names", f.inputs.size(), "arg");
    f.outputNames = names("output_names", f.outputs.size(), "out");
    const json &ops = field(j, "ops", where);
    if (!ops.is_array())
      fail(where, "'ops' must be a list");
    std::vector<bool> defined(f.values.size(), false);
    for (int id : f.inputs)
      defined[id] = true;
    for (size_t i = 0; i < ops.size(); ++i) {
      const json &o = ops[i];
      std::string w = str(where, ".ops[", i, "]");
      OpInfo op;
      op.kind = string(o, "op", w);
      if (o.contains("loc") && o["loc"].is_string())
        op.location = o["loc"].get<std::string>();
      if (o.contains("fp32")) {
        if (!o["fp32"].is_boolean())
          fail(w, "'fp32' must be true or false");
        op.fp32 = o["fp32"].get<bool>();
      }
      const json &operands = field(o, "operands", w);
      if (!operands.is_object())
        fail(w, "'operands' must be an object");
      for (auto it = operands.begin(); it != operands.end(); ++it) {
        std::vector<int> group = ids(it.value(), w + ".operands." + it.key());
        for (int id : group)
          if (!defined[id])
            fail(w, str("operand '", it.key(), "' uses value ", id, " before it is defined"));
        op.operands.emplace_back(it.key(), std::move(group));
      }
      op.results = ids(field(o, "results", w), w + ".results");
      for (int id : op.results) {
        if (defined[id])
          fail(w, str("value ", id, " is defined twice"));
        defined[id] = true;
      }
      const json &attrs = field(o, "attrs", w);
      if (!attrs.is_object())
        fail(w, "'attrs' must be an object");
      for (auto it = attrs.begin(); it != attrs.end(); ++it)
        op.attrs[it.key()] = attr(it.value(), w + ".attrs." + it.key());
      if (op.kind == "fusion")
        op.body = fusionBodyOf(op, f, w);
      f.ops.push_back(std::move(op));
    }
    for (int id : f.outputs)
      if (!defined[id])
        fail(where, str("output value ", id, " is never defined"));
    if (j.contains("cuda_plan"))
      f.cuda = cudaPlan(j["cuda_plan"], f, where + ".cuda_plan");
    return f;
  }

  /// The body a `fusion` op refers to, checked against the op's inputs and results.
  std::shared_ptr<const Function> fusionBodyOf(const OpInfo &op, const Function &f,
                                               const std::string &w) const {
    auto it = op.attrs.find("body");
    const int64_t *index = it == op.attrs.end() ? nullptr : std::get_if<int64_t>(&it->second);
    if (!index || *index < 0 || *index >= static_cast<int64_t>(fusions.size()))
      fail(w, str("a fusion needs 'body', the index of its body in 'fusions' (",
                  fusions.size(), " bodies)"));
    std::shared_ptr<const Function> body = fusions[*index];
    auto same = [&](const std::vector<int> &outer, const std::vector<int> &inner,
                    const char *what) {
      if (outer.size() != inner.size())
        fail(w, str("the fusion has ", outer.size(), " ", what, ", ", body->name, " has ",
                    inner.size()));
      for (size_t i = 0; i < outer.size(); ++i) {
        const ValueInfo &a = f.values[outer[i]], &b = body->values[inner[i]];
        if (a.shape != b.shape || a.dtype != b.dtype)
          fail(w, str(what, " #", i, " is ", shapeStr(a.shape), " ", dtypeName(a.dtype), ", in ",
                      body->name, " ", shapeStr(b.shape), " ", dtypeName(b.dtype)));
      }
    };
    auto inputs = std::find_if(op.operands.begin(), op.operands.end(),
                               [](const auto &g) { return g.first == "inputs"; });
    if (inputs == op.operands.end())
      fail(w, "a fusion needs the operand group 'inputs'");
    same(inputs->second, body->inputs, "inputs");
    same(op.results, body->outputs, "results");
    return body;
  }

  CudaPlan cudaPlan(const json &j, const Function &f, const std::string &where) const {
    CudaPlan plan;
    for (int64_t b : ints(field(j, "scratch", where), where + ".scratch")) {
      if (b < 0)
        fail(where, "negative scratch size");
      plan.scratch.push_back(b);
    }
    if (plan.scratch.empty() || plan.scratch[0] < 4)
      fail(where, "scratch 0 must be the 4-byte status word");
    const int64_t buffers = static_cast<int64_t>(f.values.size() + plan.scratch.size());
    const json &steps = field(j, "steps", where);
    if (!steps.is_array())
      fail(where, "'steps' must be a list");
    auto valueId = [&](const json &s, const char *key, const std::string &w) {
      const json &v = field(s, key, w);
      if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
          v.get<int64_t>() >= static_cast<int64_t>(f.values.size()))
        fail(w, str("'", key, "' is not a value id"));
      return v.get<int>();
    };
    for (size_t i = 0; i < steps.size(); ++i) {
      const json &s = steps[i];
      std::string w = str(where, ".steps[", i, "]");
      CudaStep step;
      std::string kind = string(s, "kind", w);
      const json &op = field(s, "op", w);
      if (!op.is_number_integer() || op.get<int64_t>() < 0 ||
          op.get<int64_t>() >= static_cast<int64_t>(f.ops.size()))
        fail(w, "'op' is not an op index");
      step.op = op.get<int>();
      if (kind == "launch") {
        step.kind = CudaStep::Kind::Launch;
        step.kernel = string(s, "kernel", w);
        auto dims = [&](const char *key) {
          std::vector<int64_t> d = ints(field(s, key, w), w + "." + key);
          if (d.size() != 3 || d[0] < 1 || d[1] < 1 || d[2] < 1 || d[0] > 0x7fffffff ||
              d[1] > 65535 || d[2] > 65535)
            fail(w, str("'", key, "' must be three positive sizes within the launch limits"));
          return std::array<uint32_t, 3>{static_cast<uint32_t>(d[0]), static_cast<uint32_t>(d[1]),
                                         static_cast<uint32_t>(d[2])};
        };
        step.grid = dims("grid");
        step.block = dims("block");
        if (uint64_t(step.block[0]) * step.block[1] * step.block[2] > 1024)
          fail(w, "a block has more than 1024 threads");
        const json &shared = field(s, "shared", w);
        if (!shared.is_number_integer() || shared.get<int64_t>() < 0 ||
            shared.get<int64_t>() > 0xffffffff)
          fail(w, "'shared' must be a byte count");
        step.shared = shared.get<uint32_t>();
        for (int64_t id : ints(field(s, "args", w), w + ".args")) {
          if (id < 0 || id >= buffers)
            fail(w, str("argument ", id, " is neither a value nor a scratch buffer"));
          step.args.push_back(static_cast<int>(id));
        }
        if (s.contains("scalars"))
          for (int64_t v : ints(s["scalars"], w + ".scalars")) {
            if (v < 0 || v > 0xffffffffLL)
              fail(w, str("scalar argument ", v, " is not a 32-bit unsigned value"));
            step.scalars.push_back(static_cast<uint32_t>(v));
          }
      } else if (kind == "param" || kind == "assign") {
        step.kind = kind == "param" ? CudaStep::Kind::Param : CudaStep::Kind::Assign;
        step.name = string(s, "name", w);
        step.value = valueId(s, "value", w);
        if (kind == "assign" && s.contains("in_place")) {
          if (!s["in_place"].is_boolean())
            fail(w, "'in_place' must be true or false");
          step.inPlace = s["in_place"].get<bool>();
        }
      } else if (kind == "alias") {
        step.kind = CudaStep::Kind::Alias;
        step.value = valueId(s, "value", w);
        step.from = valueId(s, "from", w);
      } else if (kind == "place") {
        step.kind = CudaStep::Kind::Place;
        step.value = valueId(s, "value", w);
        step.from = valueId(s, "into", w);
        const json &offset = field(s, "offset", w);
        if (!offset.is_number_integer() || offset.get<int64_t>() < 0 ||
            offset.get<int64_t>() % 16 != 0)
          fail(w, "'offset' must be a byte count that is a multiple of 16");
        step.offset = offset.get<size_t>();
      } else {
        fail(w, str("unknown step kind '", kind,
                    "' (expected launch, param, alias, place or assign)"));
      }
      plan.steps.push_back(std::move(step));
    }
    return plan;
  }
};

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
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(str(path, ": cannot open the artifact (does it exist? compile it with `medc "
                          "compile MODEL.mlir -o ",
                    path, "`)"));
  return std::string(std::istreambuf_iterator<char>(in), {});
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
    throw Error(str(path, ": artifact format version ", version, ", but this medrun reads version ",
                    kOldestFormatVersion == kFormatVersion
                        ? str(kFormatVersion, " only")
                        : str(kOldestFormatVersion, " to ", kFormatVersion),
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
  Reader r{path};
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
    } else if (p.init != "zeros" && p.init != "ones") {
      r.fail(where, str("unknown init '", p.init, "' (expected zeros, ones, uniform or copy)"));
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
      int64_t n = 1; // checked: the plan verifier bounds sizes only later
      for (int64_t d : p->shape)
        if (d < 0 || (d > 0 && n > f.size / d) || (n *= d) > f.size)
          r.fail(where, str("member '", m.name, "' (", shapeStr(p->shape), ") does not fit in ",
                            "the size ", f.size));
      end = m.offset + n;
      if (end > f.size)
        r.fail(where, str("member '", m.name, "' ends at ", end, ", beyond the size ", f.size));
      f.members.push_back(std::move(m));
    }
    a.flatBuffers.push_back(std::move(f));
  }
  // Fusion bodies first: ops of the functions refer to them. A body is shaped like a
  // function (values, inputs, outputs, ops) and names its template.
  if (doc.contains("fusions")) {
    const json &bodies = doc["fusions"];
    if (!bodies.is_array())
      r.fail("document", "'fusions' must be a list");
    for (size_t i = 0; i < bodies.size(); ++i) {
      json body = bodies[i];
      if (!body.is_object())
        r.fail(str("fusions[", i, "]"), "not an object");
      body["name"] = str("fusion body ", i);
      Function f = r.function(body, i);
      f.fusionTemplate = r.string(body, "template", f.name);
      if (f.cuda)
        r.fail(f.name, "a fusion body has no CUDA plan of its own");
      r.fusions.push_back(std::make_shared<const Function>(std::move(f)));
    }
  }
  a.fusions = r.fusions;
  const json &functions = r.field(doc, "functions", "document");
  if (!functions.is_array() || functions.empty())
    r.fail("document", "'functions' must be a non-empty list");
  for (size_t i = 0; i < functions.size(); ++i)
    a.functions.push_back(r.function(functions[i], i));
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
