//===- TorchFile.cpp - state_dicts from PyTorch files, no pickle code run -----------===//
#include "medrun/TorchFile.h"

#include "medrun/Error.h"
#include "medrun/Sizes.h"

#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <vector>

namespace medrun {

std::string torchConversionHint(const std::string &path) {
  return str("python3 -c \"import torch; from safetensors.torch import save_file; "
             "sd = torch.load('", path, "', map_location='cpu'); "
             "sd = sd.get('state_dict', sd.get('network_weights', sd)); "
             "save_file({k: v.float().contiguous() for k, v in sd.items()}, "
             "'model.safetensors')\"");
}

namespace {

// The legacy format starts with a pickled magic number (torch/serialization.py).
const unsigned char kLegacyMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                      0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(str(path, ": cannot open"));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

uint64_t le(const std::string &b, uint64_t at, int bytes) {
  if (at > b.size() || b.size() - at < static_cast<uint64_t>(bytes))
    throw Error("truncated");
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

bool signature(const std::string &b, uint64_t at, const char *sig) {
  return at <= b.size() && b.size() - at >= 4 && b.compare(at, 4, sig) == 0;
}

//===--------------------------------------------------------------------------------===//
// Zip archives as torch.save writes them: stored (uncompressed) entries, zip64 when large.
//===--------------------------------------------------------------------------------===//

std::map<std::string, std::pair<uint64_t, uint64_t>> zipEntries(const std::string &b,
                                                                 const std::string &path) {
  // End of central directory: the last "PK\5\6" within the final 64 KiB + 22 bytes.
  size_t eocd = std::string::npos;
  for (size_t i = b.size() >= 22 ? b.size() - 22 : 0, stop = i > 65557 ? i - 65557 : 0;; --i) {
    if (signature(b, i, "PK\5\6")) {
      eocd = i;
      break;
    }
    if (i == stop)
      break;
  }
  if (eocd == std::string::npos)
    throw Error(str(path, ": a zip file without its central directory (truncated?)"));
  uint64_t count = le(b, eocd + 10, 2), offset = le(b, eocd + 16, 4);
  if ((count == 0xffff || offset == 0xffffffff) && eocd >= 20 &&
      signature(b, eocd - 20, "PK\6\7")) {
    uint64_t z64 = le(b, eocd - 20 + 8, 8);
    if (!signature(b, z64, "PK\6\6"))
      throw Error(str(path, ": bad zip64 end of central directory"));
    count = le(b, z64 + 32, 8);
    offset = le(b, z64 + 48, 8);
  }
  std::map<std::string, std::pair<uint64_t, uint64_t>> entries; // name -> (data, size)
  uint64_t at = offset;
  for (uint64_t e = 0; e < count; ++e) {
    if (!signature(b, at, "PK\1\2"))
      throw Error(str(path, ": bad zip central directory entry ", e));
    const uint64_t method = le(b, at + 10, 2);
    uint64_t compressed = le(b, at + 20, 4), size = le(b, at + 24, 4);
    const uint64_t nameLen = le(b, at + 28, 2), extraLen = le(b, at + 30, 2),
                   commentLen = le(b, at + 32, 2);
    uint64_t local = le(b, at + 42, 4);
    if (at + 46 > b.size() || b.size() - (at + 46) < nameLen)
      throw Error(str(path, ": bad zip central directory entry ", e));
    const std::string name = b.substr(at + 46, nameLen);
    // Zip64 extra field: the 64-bit values of the fields that read 0xffffffff, in order.
    for (uint64_t x = at + 46 + nameLen, end = x + extraLen; x + 4 <= end;) {
      const uint64_t id = le(b, x, 2), len = le(b, x + 2, 2);
      if (id == 1) {
        uint64_t f = x + 4;
        if (size == 0xffffffff)
          size = le(b, f, 8), f += 8;
        if (compressed == 0xffffffff)
          compressed = le(b, f, 8), f += 8;
        if (local == 0xffffffff)
          local = le(b, f, 8);
      }
      x += 4 + len;
    }
    if (method != 0)
      throw Error(str(path, ": zip entry '", name, "' is compressed (method ", method,
                      "); torch.save stores entries uncompressed. Convert the file with\n  ",
                      torchConversionHint(path)));
    if (!signature(b, local, "PK\3\4"))
      throw Error(str(path, ": bad zip local header of '", name, "'"));
    const uint64_t data = local + 30 + le(b, local + 26, 2) + le(b, local + 28, 2);
    if (data > b.size() || size > b.size() - data)
      throw Error(str(path, ": zip entry '", name, "' runs past the end of the file"));
    entries[name] = {data, size};
    at += 46 + nameLen + extraLen + commentLen;
  }
  return entries;
}

//===--------------------------------------------------------------------------------===//
// Pickle opcodes as data
//===--------------------------------------------------------------------------------===//

// Objects live in the unpickler's arena and point at each other (a pickle may build
// cycles through its memo): nothing is freed before the whole reader is.
struct Obj;
using Ref = Obj *;

struct Obj {
  enum Kind { None, Bool, Int, Float, Str, Tuple, List, Dict, Global, Call, Storage, TensorK, Mark };
  Kind kind = None;
  int64_t i = 0;
  double f = 0;
  std::string s;                          // Str/bytes; Global: "module.name"; Storage: key
  std::vector<Ref> items;                 // Tuple, List; Call: callee, args
  std::vector<std::pair<Ref, Ref>> dict;  // Dict
  DType dtype = DType::F32;               // Storage
  Tensor tensor;                          // TensorK
};

const char *kindName(Obj::Kind k) {
  static const char *names[] = {"None", "bool", "int", "float", "str", "tuple", "list",
                                "dict", "global", "object", "storage", "tensor", "mark"};
  return names[k];
}

bool storageDType(const std::string &global, DType &t) {
  static const std::map<std::string, DType> types = {
      {"torch.FloatStorage", DType::F32}, {"torch.DoubleStorage", DType::F64},
      {"torch.HalfStorage", DType::F16},  {"torch.BFloat16Storage", DType::BF16},
      {"torch.LongStorage", DType::I64},  {"torch.IntStorage", DType::I32},
      {"torch.ShortStorage", DType::I16}, {"torch.CharStorage", DType::I8},
      {"torch.ByteStorage", DType::U8},   {"torch.BoolStorage", DType::Bool}};
  auto it = types.find(global);
  if (it == types.end())
    return false;
  t = it->second;
  return true;
}

class Unpickler {
public:
  Unpickler(const std::string &pkl, const std::string &path,
            std::function<Tensor(const Obj &storage, int64_t offset, const Shape &size,
                                 const Shape &stride)>
                rebuild)
      : p_(pkl), path_(path), rebuild_(std::move(rebuild)) {}

  Ref run() {
    while (true) {
      const unsigned char op = byte();
      switch (op) {
      case 0x80: byte(); break; // PROTO
      case 0x95: take(8); break; // FRAME
      case '.': // STOP
        if (stack_.size() != 1)
          fail(op, "the stack does not hold one object");
        return stack_.back();
      case '(': push(make(Obj::Mark)); break;
      case '}': push(make(Obj::Dict)); break;
      case ']': push(make(Obj::List)); break;
      case ')': push(make(Obj::Tuple)); break;
      case 'N': push(make(Obj::None)); break;
      case 0x88: case 0x89: {
        Ref b = make(Obj::Bool);
        b->i = op == 0x88;
        push(b);
        break;
      }
      case 'J': pushInt(static_cast<int32_t>(le(take(4), 0, 4))); break;
      case 'K': pushInt(byte()); break;
      case 'M': pushInt(static_cast<int64_t>(le(take(2), 0, 2))); break;
      case 0x8a: { // LONG1: little-endian two's complement
        const int n = byte();
        if (n > 8)
          fail(op, "an integer of more than 64 bits");
        std::string bytes = take(n);
        uint64_t v = n ? le(bytes, 0, n) : 0;
        if (n && n < 8 && (static_cast<unsigned char>(bytes[n - 1]) & 0x80))
          v |= ~uint64_t(0) << (8 * n);
        pushInt(static_cast<int64_t>(v));
        break;
      }
      case 'G': { // BINFLOAT: big-endian double
        std::string b = take(8);
        uint64_t v = 0;
        for (unsigned char c : b)
          v = (v << 8) | c;
        Ref f = make(Obj::Float);
        std::memcpy(&f->f, &v, 8);
        push(f);
        break;
      }
      case 'X': pushStr(take(le(take(4), 0, 4))); break;             // BINUNICODE
      case 0x8c: pushStr(take(byte())); break;                       // SHORT_BINUNICODE
      case 0x8d: pushStr(take(le(take(8), 0, 8))); break;            // BINUNICODE8
      case 'C': case 'U': pushStr(take(byte())); break;              // SHORT_BIN{BYTES,STRING}
      case 'B': case 'T': pushStr(take(le(take(4), 0, 4))); break;   // BIN{BYTES,STRING}
      case 0x8e: pushStr(take(le(take(8), 0, 8))); break;            // BINBYTES8
      case 'q': memo(byte()); break;                                 // BINPUT
      case 'r': memo(le(take(4), 0, 4)); break;                      // LONG_BINPUT
      case 0x94: memo(memo_.size()); break;                          // MEMOIZE (next index)
      case 'h': get(byte()); break;                                  // BINGET
      case 'j': get(le(take(4), 0, 4)); break;                       // LONG_BINGET
      case 'c': { // GLOBAL "module\nname\n"
        std::string module = line(), name = line();
        Ref g = make(Obj::Global);
        g->s = module + "." + name;
        push(g);
        break;
      }
      case 0x93: { // STACK_GLOBAL
        Ref name = pop(), module = pop();
        Ref g = make(Obj::Global);
        g->s = module->s + "." + name->s;
        push(g);
        break;
      }
      case 't': { Ref t = make(Obj::Tuple); t->items = popMark(); push(t); break; }
      case 0x85: case 0x86: case 0x87: {
        Ref t = make(Obj::Tuple);
        t->items.resize(op - 0x84);
        for (size_t k = t->items.size(); k-- > 0;)
          t->items[k] = pop();
        push(t);
        break;
      }
      case 'l': { Ref l = make(Obj::List); l->items = popMark(); push(l); break; }
      case 'd': {
        Ref d = make(Obj::Dict);
        std::vector<Ref> kv = popMark();
        for (size_t k = 0; k + 1 < kv.size(); k += 2)
          d->dict.push_back({kv[k], kv[k + 1]});
        push(d);
        break;
      }
      case 'a': { Ref v = pop(); top()->items.push_back(v); break; }
      case 'e': { std::vector<Ref> v = popMark(); for (Ref &x : v) top()->items.push_back(x); break; }
      case 's': {
        Ref v = pop(), k = pop();
        top()->dict.push_back({k, v});
        break;
      }
      case 'u': {
        std::vector<Ref> kv = popMark();
        for (size_t k = 0; k + 1 < kv.size(); k += 2)
          top()->dict.push_back({kv[k], kv[k + 1]});
        break;
      }
      case 'R': case 0x81: { // REDUCE, NEWOBJ: recorded, never called
        Ref args = pop(), callee = pop();
        push(call(callee, args));
        break;
      }
      case 'b': pop(); break; // BUILD: an object's state (OrderedDict's _metadata) is not needed
      case 'Q': { // BINPERSID ('storage', StorageType, key, location, numel)
        Ref id = pop();
        DType t;
        if (id->kind != Obj::Tuple || id->items.size() < 5 || id->items[0]->s != "storage" ||
            id->items[1]->kind != Obj::Global || !storageDType(id->items[1]->s, t))
          fail(op, "a persistent id that is not a typed storage");
        Ref s = make(Obj::Storage);
        s->dtype = t;
        s->s = id->items[2]->s;
        s->i = id->items[4]->i;
        push(s);
        break;
      }
      case '0': pop(); break;
      case '1': popMark(); break;
      case '2': push(top()); break;
      default:
        fail(op, "an opcode this reader does not interpret");
      }
    }
  }

private:
  [[noreturn]] void fail(unsigned char op, const std::string &why) {
    throw Error(str(path_, ": data.pkl, byte ", pos_ - 1, " (opcode 0x", std::hex,
                    static_cast<int>(op), std::dec, "): ", why,
                    ". It is read without running any pickle code; convert the file with\n  ",
                    torchConversionHint(path_)));
  }
  unsigned char byte() {
    if (pos_ >= p_.size())
      throw Error(str(path_, ": data.pkl ends without STOP (truncated)"));
    return static_cast<unsigned char>(p_[pos_++]);
  }
  std::string take(uint64_t n) {
    if (n > p_.size() - pos_)
      throw Error(str(path_, ": data.pkl is truncated"));
    std::string s = p_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string line() {
    size_t end = p_.find('\n', pos_);
    if (end == std::string::npos)
      throw Error(str(path_, ": data.pkl is truncated"));
    std::string s = p_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  void push(Ref o) { stack_.push_back(o); }
  void pushInt(int64_t v) { Ref o = make(Obj::Int); o->i = v; push(o); }
  void pushStr(std::string s) { Ref o = make(Obj::Str); o->s = std::move(s); push(o); }
  Ref top() {
    if (stack_.empty() || stack_.back()->kind == Obj::Mark)
      throw Error(str(path_, ": data.pkl: an opcode with nothing to work on (corrupted)"));
    return stack_.back();
  }
  Ref pop() { Ref o = top(); stack_.pop_back(); return o; }
  std::vector<Ref> popMark() {
    std::vector<Ref> items;
    while (!stack_.empty() && stack_.back()->kind != Obj::Mark) {
      items.push_back(stack_.back());
      stack_.pop_back();
    }
    if (stack_.empty())
      throw Error(str(path_, ": data.pkl: no MARK (corrupted)"));
    stack_.pop_back();
    return {items.rbegin(), items.rend()};
  }
  Ref make(Obj::Kind k) {
    arena_.push_back(std::make_unique<Obj>());
    arena_.back()->kind = k;
    return arena_.back().get();
  }
  void memo(uint64_t k) { memo_[k] = top(); }
  void get(uint64_t k) {
    auto it = memo_.find(k);
    if (it == memo_.end())
      throw Error(str(path_, ": data.pkl: memo entry ", k, " is not set (corrupted)"));
    push(it->second);
  }
  static Shape ints(const Ref &t) {
    Shape v;
    for (const Ref &x : t->items)
      v.push_back(x->i);
    return v;
  }
  // The calls we know make data from data; any other is kept as an inert record.
  Ref call(const Ref &callee, const Ref &args) {
    const std::string name = callee->kind == Obj::Global ? callee->s : "";
    const std::vector<Ref> &a = args->items;
    if (name == "collections.OrderedDict" && a.empty())
      return make(Obj::Dict);
    if (name == "torch._utils._rebuild_tensor_v2" && a.size() >= 4 &&
        a[0]->kind == Obj::Storage && a[1]->kind == Obj::Int && a[2]->kind == Obj::Tuple &&
        a[3]->kind == Obj::Tuple) {
      Ref t = make(Obj::TensorK);
      t->tensor = rebuild_(*a[0], a[1]->i, ints(a[2]), ints(a[3]));
      return t;
    }
    if ((name == "torch._utils._rebuild_parameter" ||
         name == "torch._utils._rebuild_parameter_with_state") &&
        !a.empty() && a[0]->kind == Obj::TensorK)
      return a[0];
    Ref c = make(Obj::Call);
    c->s = name;
    c->items = {callee, args};
    return c;
  }

  const std::string &p_;
  const std::string &path_;
  std::function<Tensor(const Obj &, int64_t, const Shape &, const Shape &)> rebuild_;
  size_t pos_ = 0;
  std::vector<std::unique_ptr<Obj>> arena_;
  std::vector<Ref> stack_;
  std::map<uint64_t, Ref> memo_;
};

} // namespace

bool isTorchFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  char head[sizeof kLegacyMagic] = {};
  in.read(head, sizeof head);
  const std::streamsize n = in.gcount();
  return (n >= 4 && std::memcmp(head, "PK\3\4", 4) == 0) ||
         (n == sizeof head && std::memcmp(head, kLegacyMagic, sizeof head) == 0);
}

TensorMap readTorchStateDict(const std::string &path, std::string *note) {
  const std::string bytes = readAll(path);
  if (bytes.size() >= sizeof kLegacyMagic &&
      std::memcmp(bytes.data(), kLegacyMagic, sizeof kLegacyMagic) == 0)
    throw Error(str(path, ": a PyTorch file in the legacy format (before 1.6, not a zip), "
                          "which cannot be read without running its pickle code. Convert it "
                          "to safetensors with\n  ",
                    torchConversionHint(path)));
  std::map<std::string, std::pair<uint64_t, uint64_t>> entries;
  try {
    entries = zipEntries(bytes, path);
  } catch (const Error &e) {
    throw Error(std::string(e.what()).rfind(path, 0) == 0 ? e.what()
                                                          : str(path, ": bad zip file (", e.what(), ")"));
  }
  std::string archive; // "<name>/" of <name>/data.pkl
  for (auto &[name, where] : entries)
    if (name.size() > 9 && name.compare(name.size() - 9, 9, "/data.pkl") == 0 &&
        name.find('/') == name.size() - 9)
      archive = name.substr(0, name.size() - 8);
  if (archive.empty())
    throw Error(str(path, ": a zip file without <name>/data.pkl: not written by torch.save"));
  if (auto it = entries.find(archive + "byteorder"); it != entries.end() &&
      bytes.compare(it->second.first, it->second.second, "little") != 0)
    throw Error(str(path, ": saved on a big-endian machine; convert it with\n  ",
                    torchConversionHint(path)));
  auto rebuild = [&](const Obj &storage, int64_t offset, const Shape &size,
                     const Shape &stride) -> Tensor {
    auto it = entries.find(archive + "data/" + storage.s);
    if (it == entries.end())
      throw Error(str(path, ": storage '", storage.s, "' has no entry ", archive, "data/",
                      storage.s));
    const size_t elem = dtypeSize(storage.dtype);
    const int64_t available = static_cast<int64_t>(it->second.second / elem);
    if (size.size() != stride.size())
      throw Error(str(path, ": a tensor with ", size.size(), " sizes and ", stride.size(),
                      " strides"));
    // The elements it reads, checked against the storage before anything is allocated.
    for (size_t d = 0; d < size.size(); ++d)
      if (size[d] < 0 || stride[d] < 0)
        throw Error(str(path, ": a tensor with a negative size or stride"));
    const int64_t numel = checkedCount(size, str(path, ": a tensor of storage '", storage.s, "'"), 0);
    int64_t last = offset;
    bool overflow = offset < 0;
    for (size_t d = 0; d < size.size(); ++d) {
      int64_t reach = 0;
      overflow = overflow || __builtin_mul_overflow(size[d] ? size[d] - 1 : 0, stride[d], &reach) ||
                 __builtin_add_overflow(last, reach, &last);
    }
    if (!overflow && numel == 0)
      return Tensor(storage.dtype, size);
    if (overflow || last >= available || numel > available)
      throw Error(str(path, ": a tensor of ", shapeStr(size), " reads past its storage '",
                      storage.s, "' (", available, " elements)"));
    Tensor t;
    try {
      t = Tensor(storage.dtype, size);
    } catch (const std::bad_alloc &) {
      throw allocationError(str(path, ": a tensor of storage '", storage.s, "'"),
                            str(shapeStr(size), " ", dtypeName(storage.dtype)),
                            static_cast<uint64_t>(numel) * elem);
    }
    const char *src = bytes.data() + it->second.first;
    char *dst = static_cast<char *>(t.raw());
    std::vector<int64_t> index(size.size(), 0);
    for (int64_t n = 0; n < t.numel(); ++n) {
      int64_t at = offset;
      for (size_t d = 0; d < size.size(); ++d)
        at += index[d] * stride[d];
      std::memcpy(dst + n * elem, src + at * elem, elem);
      for (size_t d = size.size(); d-- > 0;)
        if (++index[d] < size[d])
          break;
        else
          index[d] = 0;
    }
    return t;
  };
  const auto &pkl = entries.at(archive + "data.pkl");
  const std::string pickle = bytes.substr(pkl.first, pkl.second);
  Unpickler unpickler(pickle, path, rebuild); // owns every object until the end
  Ref root = unpickler.run();

  auto tensorsOf = [&](const Ref &d, const std::string &where) {
    TensorMap out;
    for (auto &[k, v] : d->dict) {
      if (k->kind != Obj::Str)
        throw Error(str(path, ": ", where, " has a key that is no string (", kindName(k->kind), ")"));
      if (v->kind != Obj::TensorK)
        throw Error(str(path, ": ", where, "['", k->s, "'] is a ", kindName(v->kind),
                        ", expected a tensor"));
      out[k->s] = v->tensor;
    }
    return out;
  };
  if (root->kind != Obj::Dict)
    throw Error(str(path, ": holds a ", kindName(root->kind), ", expected a state_dict (a dict "
                          "of tensors) or a checkpoint dict that holds one"));
  bool allTensors = !root->dict.empty();
  for (auto &[k, v] : root->dict)
    allTensors = allTensors && v->kind == Obj::TensorK;
  if (allTensors) {
    if (note)
      *note = "";
    return tensorsOf(root, "the state_dict");
  }
  std::string keys;
  for (const char *name : {"state_dict", "network_weights", "model", "module"})
    for (auto &[k, v] : root->dict)
      if (k->kind == Obj::Str && k->s == name && v->kind == Obj::Dict) {
        if (note)
          *note = str("the state_dict is the file's entry '", name, "'");
        return tensorsOf(v, str("entry '", name, "'"));
      }
  for (auto &[k, v] : root->dict)
    if (k->kind == Obj::Str)
      keys += (keys.empty() ? "" : ", ") + k->s;
  throw Error(str(path, ": holds a dict (keys: ", keys.empty() ? "none" : keys,
                  ") without tensors or an entry state_dict, network_weights, model or module"));
}

} // namespace medrun
