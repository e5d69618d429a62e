//===- Npy.cpp - NumPy .npy tensor files ---------------------------------------------===//
//
// Format (numpy/lib/format.py): "\x93NUMPY", major, minor, header length (u16 LE for 1.0,
// u32 LE for 2.0/3.0), then a Python dict literal
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces and a final '\n', then the raw array data.
//
// This file also holds the file helpers shared with Safetensors.cpp (detail::InputFile,
// detail::writeFileAtomic).
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Npy.h"
#include "medrun/Error.h"
#include "medrun/Sizes.h"

#include <array>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the tensor file readers assume a little-endian host");

namespace medrun {
namespace detail {

//===----------------------------------------------------------------------------------===//
// Shared file helpers
//===----------------------------------------------------------------------------------===//

InputFile::InputFile(const std::string &path) : path_(path) {
  do {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0)
    throw Error(str(path, ": cannot open: ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    int err = errno;
    ::close(fd_);
    throw Error(str(path, ": cannot stat: ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw Error(str(path, S_ISDIR(st.st_mode) ? ": is a directory, not a tensor file"
                                              : ": is not a regular file"));
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

void InputFile::read(uint64_t offset, void *dst, size_t n, const char *what) const {
  auto *out = static_cast<char *>(dst);
  size_t done = 0;
  while (done < n) {
    size_t chunk = std::min<size_t>(n - done, size_t(1) << 30);
    ssize_t got = ::pread(fd_, out + done, chunk, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR)
        continue;
      throw Error(str(path_, ": cannot read ", what, ": ", std::strerror(errno)));
    }
    if (got == 0) // the file shrank after it was opened
      throw Error(str(path_, ": truncated: expected ", n, " bytes of ", what, " at offset ", offset,
                      ", file ends after ", offset + done));
    done += static_cast<size_t>(got);
  }
}

namespace {
/// The process umask without changing it (umask(2) would race with other threads).
mode_t currentUmask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Umask:", 0) == 0)
      return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
  return 022;
}

std::string parentDir(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}
} // namespace

void writeFileAtomic(const std::string &path,
                     const std::vector<std::pair<const void *, size_t>> &pieces) {
  std::string tmp = path + ".tmp-XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0)
    throw Error(str(path, ": cannot create a temporary file next to it: ", std::strerror(errno)));
  auto fail = [&](const char *op) {
    int err = errno;
    if (fd >= 0)
      ::close(fd);
    ::unlink(tmp.c_str());
    throw Error(str(path, ": cannot write: ", op, " failed: ", std::strerror(err)));
  };
  if (::fchmod(fd, 0666 & ~currentUmask()) != 0)
    fail("fchmod");
  for (const auto &[data, n] : pieces) {
    const char *p = static_cast<const char *>(data);
    size_t done = 0;
    while (done < n) {
      size_t chunk = std::min<size_t>(n - done, size_t(1) << 30);
      ssize_t put = ::write(fd, p + done, chunk);
      if (put < 0) {
        if (errno == EINTR)
          continue;
        fail("write");
      }
      done += static_cast<size_t>(put);
    }
  }
  if (::fsync(fd) != 0)
    fail("fsync");
  int closing = fd;
  fd = -1;
  if (::close(closing) != 0)
    fail("close");
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    fail("rename");
  // Make the rename itself durable; best effort (some file systems refuse directory fsync).
  int dfd = ::open(parentDir(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

} // namespace detail

//===----------------------------------------------------------------------------------===//
// Header dict parsing: the subset of Python literals numpy writes.
//===----------------------------------------------------------------------------------===//

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
/// No sane header is anywhere near this (numpy itself refuses headers over 10 kB by default).
constexpr uint64_t kMaxHeaderLen = 1u << 20;

struct PyValue {
  enum Kind { Str, Int, Bool, None, Seq, Dict } kind = None;
  std::string s;                                     // Str
  int64_t i = 0;                                     // Int
  bool b = false;                                    // Bool
  std::vector<PyValue> items;                        // Seq
  std::vector<std::pair<std::string, PyValue>> dict; // Dict (keys are strings)
  bool intTooLarge = false;                          // Int that does not fit int64
};

class DictParser {
public:
  DictParser(const std::string &text, const std::string &path) : t_(text), path_(path) {}

  PyValue parseTop() {
    skipWs();
    PyValue v = value(0);
    skipWs();
    if (pos_ != t_.size())
      fail("unexpected text after the dict");
    if (v.kind != PyValue::Dict)
      fail("the header is not a dict");
    return v;
  }

private:
  [[noreturn]] void fail(const std::string &why) const {
    std::string shown = t_.size() > 200 ? t_.substr(0, 200) + "..." : t_;
    while (!shown.empty() && (shown.back() == '\n' || shown.back() == ' '))
      shown.pop_back();
    throw Error(
        str(path_, ": malformed .npy header: ", why, " at offset ", pos_, " in \"", shown, "\""));
  }
  void skipWs() {
    while (pos_ < t_.size() &&
           (t_[pos_] == ' ' || t_[pos_] == '\t' || t_[pos_] == '\n' || t_[pos_] == '\r'))
      ++pos_;
  }
  bool eat(char c) {
    skipWs();
    if (pos_ < t_.size() && t_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool startsWith(const char *word) const { return t_.compare(pos_, std::strlen(word), word) == 0; }

  PyValue value(int depth) {
    if (depth > 32)
      fail("nesting too deep");
    skipWs();
    if (pos_ >= t_.size())
      fail("unexpected end of header");
    char c = t_[pos_];
    PyValue v;
    if (c == '\'' || c == '"') {
      v.kind = PyValue::Str;
      v.s = string();
    } else if (c == '{') {
      ++pos_;
      v.kind = PyValue::Dict;
      while (!eat('}')) {
        skipWs();
        if (pos_ >= t_.size() || (t_[pos_] != '\'' && t_[pos_] != '"'))
          fail("expected a string key");
        std::string key = string();
        if (!eat(':'))
          fail("expected ':'");
        v.dict.emplace_back(std::move(key), value(depth + 1));
        if (!eat(',')) {
          if (!eat('}'))
            fail("expected ',' or '}'");
          break;
        }
      }
    } else if (c == '(' || c == '[') {
      char close = c == '(' ? ')' : ']';
      ++pos_;
      v.kind = PyValue::Seq;
      while (!eat(close)) {
        v.items.push_back(value(depth + 1));
        if (!eat(',')) {
          if (!eat(close))
            fail(str("expected ',' or '", close, "'"));
          break;
        }
      }
    } else if (c == '-' || c == '+' || (c >= '0' && c <= '9')) {
      v.kind = PyValue::Int;
      bool neg = c == '-';
      if (c == '-' || c == '+')
        ++pos_;
      if (pos_ >= t_.size() || t_[pos_] < '0' || t_[pos_] > '9')
        fail("expected a digit");
      uint64_t mag = 0;
      while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') {
        unsigned d = static_cast<unsigned>(t_[pos_++] - '0');
        if (mag > (UINT64_MAX - d) / 10)
          v.intTooLarge = true;
        else
          mag = mag * 10 + d;
      }
      if (pos_ < t_.size() && (t_[pos_] == 'L' || t_[pos_] == 'l')) // Python 2 long
        ++pos_;
      if (pos_ < t_.size() && (t_[pos_] == '.' || t_[pos_] == 'e' || t_[pos_] == 'E'))
        fail("expected an integer");
      if (mag > static_cast<uint64_t>(INT64_MAX))
        v.intTooLarge = true;
      v.i = v.intTooLarge ? 0 : (neg ? -static_cast<int64_t>(mag) : static_cast<int64_t>(mag));
    } else if (startsWith("True")) {
      pos_ += 4;
      v.kind = PyValue::Bool;
      v.b = true;
    } else if (startsWith("False")) {
      pos_ += 5;
      v.kind = PyValue::Bool;
    } else if (startsWith("None")) {
      pos_ += 4;
    } else {
      fail(str("unexpected character '", c, "'"));
    }
    return v;
  }

  std::string string() {
    char quote = t_[pos_++];
    std::string s;
    while (true) {
      if (pos_ >= t_.size())
        fail("unterminated string");
      char c = t_[pos_++];
      if (c == quote)
        return s;
      if (c == '\\') {
        if (pos_ >= t_.size())
          fail("unterminated string");
        char e = t_[pos_++];
        s += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        s += c;
      }
    }
  }

  const std::string &t_;
  const std::string &path_;
  size_t pos_ = 0;
};

std::string repr(const PyValue &v) {
  switch (v.kind) {
  case PyValue::Str:
    return "'" + v.s + "'";
  case PyValue::Int:
    return v.intTooLarge ? "<huge int>" : std::to_string(v.i);
  case PyValue::Bool:
    return v.b ? "True" : "False";
  case PyValue::None:
    return "None";
  case PyValue::Seq: {
    std::string s = "(";
    for (size_t k = 0; k < v.items.size(); ++k)
      s += (k ? ", " : "") + repr(v.items[k]);
    return s + ")";
  }
  case PyValue::Dict:
    return "{...}";
  }
  return "?";
}

constexpr const char *kSupportedDescrs = "<f4, <f8, <f2, |i1, <i2, <i4, <i8, |u1 or |b1";

/// Maps a descr to a dtype; returns false if unsupported.
bool descrToDType(const std::string &descr, DType &out) {
  if (descr.size() < 3)
    return false;
  char order = descr[0];
  std::string code = descr.substr(1);
  static const std::map<std::string, DType> codes = {
      {"f4", DType::F32}, {"f8", DType::F64}, {"f2", DType::F16},
      {"i1", DType::I8},  {"i2", DType::I16}, {"i4", DType::I32},
      {"i8", DType::I64}, {"u1", DType::U8},  {"b1", DType::Bool}};
  auto it = codes.find(code);
  if (it == codes.end())
    return false;
  // '|' (not applicable) is only meaningful for one-byte types; '=' is native = little here.
  bool oneByte = dtypeSize(it->second) == 1;
  if (!(order == '<' || order == '=' || (order == '|' && oneByte)))
    return false;
  out = it->second;
  return true;
}

const char *dtypeToDescr(DType t) {
  switch (t) {
  case DType::F32:
    return "<f4";
  case DType::F64:
    return "<f8";
  case DType::F16:
    return "<f2";
  case DType::I8:
    return "|i1";
  case DType::I16:
    return "<i2";
  case DType::I32:
    return "<i4";
  case DType::I64:
    return "<i8";
  case DType::U8:
    return "|u1";
  case DType::Bool:
    return "|b1";
  case DType::BF16:
    return nullptr;
  }
  return nullptr;
}

std::string hexBytes(const unsigned char *p, size_t n) {
  std::string s;
  char buf[8];
  for (size_t k = 0; k < n; ++k) {
    std::snprintf(buf, sizeof buf, "%s%02x", k ? " " : "", p[k]);
    s += buf;
  }
  return s;
}

} // namespace

//===----------------------------------------------------------------------------------===//
// readNpy / writeNpy
//===----------------------------------------------------------------------------------===//

namespace detail {

NpyHeader readNpyHeader(const InputFile &f) {
  const std::string &path = f.path();
  auto fail = [&](const std::string &why) -> Error { return Error(str(path, ": ", why)); };

  unsigned char pre[12] = {};
  size_t have = static_cast<size_t>(std::min<uint64_t>(f.size(), sizeof pre));
  f.read(0, pre, have, "preamble");
  if (have < kMagicLen || std::memcmp(pre, kMagic, kMagicLen) != 0)
    throw fail(str("not a .npy file: bad magic (expected 93 4e 55 4d 50 59 = \"\\x93NUMPY\", "
                   "found ",
                   have ? hexBytes(pre, std::min(have, kMagicLen)) : std::string("an empty file"),
                   ")"));
  if (have < 8)
    throw fail(str("truncated header: the file has only ", f.size(), " bytes"));
  unsigned major = pre[6], minor = pre[7];
  if (!(major >= 1 && major <= 3) || minor != 0)
    throw fail(
        str("unsupported .npy format version ", major, ".", minor, " (expected 1.0, 2.0 or 3.0)"));
  size_t preamble = major == 1 ? 10 : 12;
  if (have < preamble)
    throw fail(str("truncated header: a version ", major, ".0 preamble has ", preamble,
                   " bytes, the file has only ", f.size()));
  uint64_t hlen = major == 1 ? (uint64_t(pre[8]) | uint64_t(pre[9]) << 8)
                             : (uint64_t(pre[8]) | uint64_t(pre[9]) << 8 | uint64_t(pre[10]) << 16 |
                                uint64_t(pre[11]) << 24);
  if (hlen > kMaxHeaderLen)
    throw fail(str("header length ", hlen, " exceeds the limit of ", kMaxHeaderLen, " bytes"));
  if (preamble + hlen > f.size())
    throw fail(str("truncated header: expected ", hlen, " header bytes after the ", preamble,
                   "-byte preamble, the file has only ", f.size() - preamble));
  std::string header(hlen, '\0');
  f.read(preamble, header.data(), hlen, "header");

  PyValue dict = DictParser(header, path).parseTop();
  const PyValue *descr = nullptr, *fortran = nullptr, *shapeV = nullptr;
  for (const auto &[key, value] : dict.dict) {
    const PyValue **slot = key == "descr"           ? &descr
                           : key == "fortran_order" ? &fortran
                           : key == "shape"         ? &shapeV
                                                    : nullptr;
    if (!slot)
      throw fail(str("unexpected key '", key,
                     "' in the header dict (expected exactly 'descr', 'fortran_order' and "
                     "'shape')"));
    if (*slot)
      throw fail(str("duplicate key '", key, "' in the header dict"));
    *slot = &value;
  }
  for (auto [name, v] : {std::pair<const char *, const PyValue *>{"descr", descr},
                         {"fortran_order", fortran},
                         {"shape", shapeV}})
    if (!v)
      throw fail(str("header dict is missing key '", name, "'"));

  if (descr->kind != PyValue::Str)
    throw fail(str("unsupported descr ",
                   descr->kind == PyValue::Seq ? "(a structured dtype)" : repr(*descr),
                   " (expected ", kSupportedDescrs, ")"));
  if (fortran->kind != PyValue::Bool)
    throw fail(str("fortran_order must be True or False, found ", repr(*fortran)));
  if (fortran->b)
    throw fail("fortran_order is True: only C-order arrays are supported (save "
               "np.ascontiguousarray(a) instead)");
  if (shapeV->kind != PyValue::Seq)
    throw fail(str("shape must be a tuple of integers, found ", repr(*shapeV)));

  Shape shape;
  for (const PyValue &d : shapeV->items) {
    if (d.kind != PyValue::Int)
      throw fail(str("shape must be a tuple of integers, found ", repr(*shapeV)));
    if (d.intTooLarge)
      throw fail(str("shape ", repr(*shapeV), " has a dimension that is too large"));
    if (d.i < 0)
      throw fail(str("shape ", repr(*shapeV), " has a negative dimension"));
    shape.push_back(d.i);
  }
  return {descr->s, shape, preamble + hlen};
}

} // namespace detail

Tensor readNpy(const std::string &path) {
  detail::InputFile f(path);
  auto fail = [&](const std::string &why) -> Error { return Error(str(path, ": ", why)); };
  const detail::NpyHeader h = readNpyHeader(f);
  const Shape &shape = h.shape;
  DType dtype;
  if (!descrToDType(h.descr, dtype)) {
    std::string hint = !h.descr.empty() && h.descr[0] == '>'
                           ? "; big-endian data is not supported, convert with "
                             "a.astype(a.dtype.newbyteorder('<'))"
                           : "";
    throw fail(str("unsupported descr '", h.descr, "' (expected ", kSupportedDescrs, hint, ")"));
  }
  // The element count, checked, bounded by the bytes the file holds after its header.
  uint64_t dataOffset = h.dataOffset;
  uint64_t avail = f.size() - dataOffset;
  const std::string declared = str("shape ", shapeStr(shape), ", descr '", h.descr, "'");
  const int64_t numel = checkedCount(shape, str(path, " (.npy header)"), 0);
  uint64_t nbytes = checkedBytes(numel, dtypeSize(dtype), UINT64_MAX, str(path, " (", declared, ")"),
                                 "a 64-bit size");
  if (avail < nbytes)
    throw fail(str("truncated: expected ", nbytes, " bytes of array data (", declared,
                   "), file has ", avail));
  if (avail > nbytes)
    throw fail(str("unexpected trailing data: expected ", nbytes, " bytes of array data (",
                   declared, "), file has ", avail));

  Tensor t;
  try {
    t = Tensor(dtype, shape);
  } catch (const std::bad_alloc &) {
    throw allocationError(path, declared, nbytes);
  }
  if (nbytes)
    f.read(dataOffset, t.raw(), static_cast<size_t>(nbytes), "array data");
  return t;
}

namespace {

/// The .npy header of `t` (version 1.0, or 2.0 if the header needs it).
std::string npyHeader(const std::string &path, const Tensor &t) {
  if (!t.defined())
    throw Error(str(path, ": cannot write an undefined (default-constructed) tensor"));
  const char *descr = dtypeToDescr(t.dtype());
  if (!descr)
    throw Error(str(path, ": cannot write a ", dtypeName(t.dtype()),
                    " tensor to .npy: NumPy has no bfloat16 type; convert it first, e.g. "
                    "t.to(medrun::DType::F32), or use safetensors (BF16)"));
  std::string shape = "(";
  for (size_t k = 0; k < t.shape().size(); ++k)
    shape += (k ? ", " : "") + std::to_string(t.shape()[k]);
  shape += t.shape().size() == 1 ? ",)" : ")";
  std::string dict =
      str("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");

  // Version 1.0 unless the header does not fit its 16-bit length; total header size is a
  // multiple of 64 and the header ends with '\n' (as numpy writes it).
  size_t preamble = 10;
  size_t total = (preamble + dict.size() + 1 + 63) / 64 * 64;
  if (total - preamble > 65535) {
    preamble = 12;
    total = (preamble + dict.size() + 1 + 63) / 64 * 64;
  }
  size_t hlen = total - preamble;
  std::string head(kMagic, kMagicLen);
  head += static_cast<char>(preamble == 10 ? 1 : 2);
  head += '\0';
  for (size_t k = 0; k < (preamble == 10 ? 2u : 4u); ++k)
    head += static_cast<char>((hlen >> (8 * k)) & 0xff);
  head += dict;
  head.append(total - head.size() - 1, ' ');
  head += '\n';
  return head;
}

/// CRC-32 (ISO-HDLC, as zip stores it), continued from `crc`.
uint32_t crc32(uint32_t crc, const void *data, size_t n) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  const auto *p = static_cast<const unsigned char *>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i)
    crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

void put16(std::string &s, uint32_t v) {
  s += static_cast<char>(v & 0xff);
  s += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string &s, uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}

} // namespace

void writeNpy(const std::string &path, const Tensor &t) {
  const std::string head = npyHeader(path, t);
  detail::writeFileAtomic(path, {{head.data(), head.size()}, {t.raw(), t.nbytes()}});
}

void writeNpz(const std::string &path, const std::vector<std::pair<std::string, Tensor>> &arrays) {
  // A zip archive of KEY.npy members, stored (numpy.load reads it as it reads savez's).
  std::vector<std::string> locals(arrays.size());
  std::string central;
  uint64_t offset = 0;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const auto &[key, t] = arrays[i];
    const std::string name = key + ".npy", head = npyHeader(path, t);
    const uint64_t size = head.size() + t.nbytes();
    if (size >= 0xffffffffull || offset >= 0xffffffffull)
      throw Error(str(path, ": '", key, "' does not fit a zip without ZIP64 (4 GiB)"));
    const uint32_t crc = crc32(crc32(0, head.data(), head.size()), t.raw(), t.nbytes());
    std::string &l = locals[i];
    put32(l, 0x04034b50); // local file header
    put16(l, 20);         // version needed: 2.0
    put16(l, 0);          // flags
    put16(l, 0);          // stored
    put16(l, 0);          // time
    put16(l, 0x21);       // date: 1980-01-01
    put32(l, crc);
    put32(l, static_cast<uint32_t>(size));
    put32(l, static_cast<uint32_t>(size));
    put16(l, static_cast<uint32_t>(name.size()));
    put16(l, 0);
    l += name;
    l += head;
    put32(central, 0x02014b50); // central directory entry
    put16(central, 20);
    put16(central, 20);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0x21);
    put32(central, crc);
    put32(central, static_cast<uint32_t>(size));
    put32(central, static_cast<uint32_t>(size));
    put16(central, static_cast<uint32_t>(name.size()));
    put16(central, 0); // extra
    put16(central, 0); // comment
    put16(central, 0); // disk
    put16(central, 0); // internal attributes
    put32(central, 0); // external attributes
    put32(central, static_cast<uint32_t>(offset));
    central += name;
    offset += l.size() - head.size() + size;
  }
  if (offset + central.size() >= 0xffffffffull)
    throw Error(str(path, ": the arrays do not fit a zip without ZIP64 (4 GiB)"));
  std::string end;
  put32(end, 0x06054b50); // end of central directory
  put16(end, 0);
  put16(end, 0);
  put16(end, static_cast<uint32_t>(arrays.size()));
  put16(end, static_cast<uint32_t>(arrays.size()));
  put32(end, static_cast<uint32_t>(central.size()));
  put32(end, static_cast<uint32_t>(offset));
  put16(end, 0);
  std::vector<std::pair<const void *, size_t>> pieces;
  for (size_t i = 0; i < arrays.size(); ++i) {
    pieces.push_back({locals[i].data(), locals[i].size()});
    pieces.push_back({arrays[i].second.raw(), arrays[i].second.nbytes()});
  }
  pieces.push_back({central.data(), central.size()});
  pieces.push_back({end.data(), end.size()});
  detail::writeFileAtomic(path, pieces);
}

} // namespace medrun
