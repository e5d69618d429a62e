//===- TensorIOTest.cpp - .npy and safetensors read/write and validation ----------===//
#include "medrun/Error.h"
#include "medrun/Npy.h"
#include "medrun/Safetensors.h"
#include "medrun/Tensor.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <sstream>

using namespace medrun;
namespace fs = std::filesystem;

namespace {

const DType kAll[] = {DType::F32, DType::F64, DType::BF16, DType::F16, DType::I8,
                      DType::I16, DType::I32, DType::I64,  DType::U8,  DType::Bool};

/// Deterministic, dtype-appropriate contents (exactly representable in every type).
Tensor makeTensor(DType dt, Shape shape, int seed = 0) {
  Tensor t(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t k = i + seed;
    double v = static_cast<double>(k % 200) * 0.5 - 10;
    switch (dt) {
    case DType::F32:
      t.data<float>()[i] = static_cast<float>(v);
      break;
    case DType::F64:
      t.data<double>()[i] = v;
      break;
    case DType::BF16:
      t.data<bf16>()[i] = bf16(static_cast<float>(v));
      break;
    case DType::F16: { // v is a multiple of 0.5 in [-10, 89.5]: build the half by hand
      uint16_t h = 0;
      if (v != 0) {
        double a = std::fabs(v);
        int e = static_cast<int>(std::floor(std::log2(a)));
        uint16_t mant = static_cast<uint16_t>(std::lround((a / std::ldexp(1.0, e) - 1) * 1024));
        h = static_cast<uint16_t>((v < 0 ? 0x8000 : 0) | ((e + 15) << 10) | mant);
      }
      std::memcpy(static_cast<char *>(t.raw()) + 2 * i, &h, 2);
      break;
    }
    case DType::I8:
      t.data<int8_t>()[i] = static_cast<int8_t>(k % 100 - 50);
      break;
    case DType::I16:
      t.data<int16_t>()[i] = static_cast<int16_t>(k * 37 % 60000 - 30000);
      break;
    case DType::I32:
      t.data<int32_t>()[i] = static_cast<int32_t>(k * 100003 - 7);
      break;
    case DType::I64:
      t.data<int64_t>()[i] = (int64_t(1) << 40) * (k % 5) - k;
      break;
    case DType::U8:
      t.data<uint8_t>()[i] = static_cast<uint8_t>(k * 7 % 256);
      break;
    case DType::Bool:
      static_cast<uint8_t *>(t.raw())[i] = k % 3 == 0;
      break;
    }
  }
  return t;
}

void expectSameTensor(const Tensor &a, const Tensor &b, const std::string &what) {
  ASSERT_TRUE(b.defined()) << what;
  EXPECT_EQ(a.dtype(), b.dtype()) << what;
  EXPECT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.nbytes(), b.nbytes()) << what;
  if (a.nbytes()) {
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << what << ": contents differ";
  }
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int k = 0; k < 8; ++k)
    s[k] = static_cast<char>((v >> (8 * k)) & 0xff);
  return s;
}

/// Expects `fn` to throw medrun::Error whose message contains every phrase.
void expectError(const std::function<void()> &fn, std::initializer_list<std::string> phrases) {
  try {
    fn();
  } catch (const Error &e) {
    std::string msg = e.what();
    for (const std::string &p : phrases)
      EXPECT_NE(msg.find(p), std::string::npos) << "message lacks \"" << p << "\":\n  " << msg;
    return;
  } catch (const std::exception &e) {
    ADD_FAILURE() << "threw a non-medrun exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "did not throw; expected an error containing \"" << *phrases.begin() << "\"";
}

class TempDirTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "medrun-tensorio-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string file(const std::string &name) const { return dir + "/" + name; }
  /// Names in the directory (to check that no temporary files are left behind).
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto &e : fs::directory_iterator(dir))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string dir;
};

//===----------------------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------------------===//

class NpyIO : public TempDirTest {
protected:
  /// A .npy file with the given version, header dict text and data bytes.
  std::string npy(const std::string &name, const std::string &dict, const std::string &data,
                  int major = 1) {
    std::string header = dict;
    size_t pre = major == 1 ? 10 : 12;
    while ((pre + header.size() + 1) % 64)
      header += ' ';
    header += '\n';
    std::string bytes("\x93NUMPY", 6);
    bytes += static_cast<char>(major);
    bytes += '\0';
    for (size_t k = 0; k < pre - 8; ++k)
      bytes += static_cast<char>((header.size() >> (8 * k)) & 0xff);
    bytes += header + data;
    std::string path = file(name);
    writeBytes(path, bytes);
    return path;
  }
};

TEST_F(NpyIO, RoundTripEveryDType) {
  for (DType dt : kAll) {
    if (dt == DType::BF16)
      continue;
    for (const Shape &shape :
         {Shape{2, 3, 4}, Shape{7}, Shape{}, Shape{0, 3}, Shape{1, 1, 2, 5, 3}}) {
      std::string what = str(dtypeName(dt), " ", shapeStr(shape));
      Tensor t = makeTensor(dt, shape, 3);
      std::string path = file(str(dtypeName(dt), "_", shapeStr(shape), ".npy"));
      writeNpy(path, t);
      expectSameTensor(t, readNpy(path), what);
      // numpy's layout: header padded so the data starts at a multiple of 64.
      std::string bytes = readBytes(path);
      ASSERT_GE(bytes.size(), 10u);
      size_t hlen = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9])
                                                               << 8;
      EXPECT_EQ((10 + hlen) % 64, 0u) << what;
      EXPECT_EQ(bytes[10 + hlen - 1], '\n') << what;
      EXPECT_EQ(bytes.size(), 10 + hlen + t.nbytes()) << what;
    }
  }
  EXPECT_EQ(readBytes(file("f32_2x3x4.npy")).substr(10, 62),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }");
  EXPECT_NE(readBytes(file("i32_7.npy")).find("'shape': (7,)"), std::string::npos);
  EXPECT_NE(readBytes(file("u8_scalar.npy")).find("'shape': ()"), std::string::npos);
}

TEST_F(NpyIO, OverwriteIsAtomicAndLeavesNoTemporaries) {
  std::string path = file("w.npy");
  writeNpy(path, makeTensor(DType::F32, {100}));
  Tensor second = makeTensor(DType::I16, {3, 3}, 5);
  writeNpy(path, second);
  expectSameTensor(second, readNpy(path), "overwritten");
  EXPECT_EQ(listing(), std::vector<std::string>{"w.npy"});
}

TEST_F(NpyIO, WriteErrors) {
  std::string path = file("bf.npy");
  expectError([&] { writeNpy(path, makeTensor(DType::BF16, {2})); },
              {path, "bf16", "NumPy has no bfloat16", "convert"});
  expectError([&] { writeNpy(path, Tensor()); }, {path, "undefined"});
  std::string missingDir = file("no/such/dir/x.npy");
  expectError([&] { writeNpy(missingDir, makeTensor(DType::F32, {2})); },
              {missingDir, "cannot create a temporary file"});
  EXPECT_TRUE(listing().empty());
}

TEST_F(NpyIO, ReadsOtherHeaderSpellings) {
  // Versions 2.0 and 3.0, '|i1' and '<i1', '<u1', double quotes, Python 2 longs,
  // numpy's extra growth padding, keys in any order.
  std::string f4(8, '\0');
  float vals[2] = {1.5f, -2.0f};
  std::memcpy(f4.data(), vals, 8);
  Tensor t =
      readNpy(npy("v2.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f4, 2));
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_EQ(t.shape(), Shape{2});
  EXPECT_EQ(t.data<float>()[1], -2.0f);
  t = readNpy(
      npy("v3.npy", "{\"shape\": (1, 2), \"descr\": \"<f4\", \"fortran_order\": False}", f4, 3));
  EXPECT_EQ(t.shape(), (Shape{1, 2}));
  t = readNpy(npy("i1.npy", "{'descr': '<i1', 'fortran_order': False, 'shape': (3L,), }",
                  std::string("\x01\xff\x02", 3)));
  EXPECT_EQ(t.dtype(), DType::I8);
  EXPECT_EQ(t.at(1), -1);
  t = readNpy(npy("pipe_i1.npy", "{'descr': '|i1', 'fortran_order': False, 'shape': (), }",
                  std::string("\x05", 1)));
  EXPECT_EQ(t.rank(), 0);
  EXPECT_EQ(t.at(0), 5);
  t = readNpy(npy("u1.npy", "{'descr': '<u1', 'fortran_order': False, 'shape': (0, 4), }", ""));
  EXPECT_EQ(t.dtype(), DType::U8);
  EXPECT_EQ(t.numel(), 0);
  t = readNpy(npy("b1.npy", "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }",
                  std::string("\x01\x00", 2)));
  EXPECT_EQ(t.dtype(), DType::Bool);
  EXPECT_EQ(t.at(0), 1);
  t = readNpy(npy("f2.npy", "{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }",
                  std::string("\x00\x3c", 2))); // 1.0 in half precision
  EXPECT_EQ(t.dtype(), DType::F16);
  EXPECT_EQ(t.at(0), 1.0);
}

TEST_F(NpyIO, ReadErrors) {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string data(24, '\0');
  std::string p;

  p = file("missing.npy");
  expectError([&] { readNpy(p); }, {p, "cannot open", "No such file"});
  expectError([&] { readNpy(dir); }, {dir, "is a directory"});

  p = file("empty.npy");
  writeBytes(p, "");
  expectError([&] { readNpy(p); }, {p, "bad magic", "empty file"});
  p = file("magic.npy");
  writeBytes(p, "PK\x03\x04 this is a zip file");
  expectError([&] { readNpy(p); }, {p, "not a .npy file: bad magic", "50 4b 03 04"});
  p = file("short.npy");
  writeBytes(p, std::string("\x93NUMPY\x01\x00\x10", 9));
  expectError([&] { readNpy(p); }, {p, "truncated header"});

  p = npy("version.npy", dict, data);
  std::string bytes = readBytes(p);
  bytes[6] = 4;
  writeBytes(p, bytes);
  expectError([&] { readNpy(p); },
              {p, "unsupported .npy format version 4.0", "expected 1.0, 2.0 or 3.0"});

  p = npy("hdr_trunc.npy", dict, data);
  writeBytes(p, readBytes(p).substr(0, 40));
  expectError([&] { readNpy(p); }, {p, "truncated header", "expected 118 header bytes"});

  p = npy("nokey.npy", "{'descr': '<f4', 'fortran_order': False, }", data);
  expectError([&] { readNpy(p); }, {p, "missing key 'shape'"});
  p = npy("extrakey.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", data);
  expectError([&] { readNpy(p); }, {p, "unexpected key 'x'"});
  p = npy("dupkey.npy", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}",
          data);
  expectError([&] { readNpy(p); }, {p, "duplicate key 'descr'"});
  p = npy("complex.npy", "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", data);
  expectError([&] { readNpy(p); }, {p, "unsupported descr '<c8'", "expected <f4"});
  p = npy("bigendian.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }", data);
  expectError([&] { readNpy(p); }, {p, "unsupported descr '>f4'", "big-endian"});
  p = npy("u2.npy", "{'descr': '<u2', 'fortran_order': False, 'shape': (12,), }", data);
  expectError([&] { readNpy(p); }, {p, "unsupported descr '<u2'"});
  p = npy("pipe_f4.npy", "{'descr': '|f4', 'fortran_order': False, 'shape': (6,), }", data);
  expectError([&] { readNpy(p); }, {p, "unsupported descr '|f4'"});
  p = npy("structured.npy",
          "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (3,), }", data);
  expectError([&] { readNpy(p); }, {p, "unsupported descr (a structured dtype)"});
  p = npy("fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data);
  expectError([&] { readNpy(p); }, {p, "fortran_order is True", "C-order"});
  p = npy("negative.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", data);
  expectError([&] { readNpy(p); }, {p, "negative dimension"});
  p = npy("floatdim.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,), }", data);
  expectError([&] { readNpy(p); }, {p, "malformed .npy header", "expected an integer"});
  p = npy("huge.npy",
          "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", data);
  expectError([&] { readNpy(p); }, {p, "element count overflows"});
  p = npy("hugeint.npy",
          "{'descr': '<f4', 'fortran_order': False, 'shape': (123456789012345678901234567890,), }",
          data);
  expectError([&] { readNpy(p); }, {p, "too large"});
  p = npy("syntax.npy", "{'descr': '<f4' 'fortran_order': False}", data);
  expectError([&] { readNpy(p); }, {p, "malformed .npy header", "expected ',' or '}'"});
  p = npy("notdict.npy", "('<f4', False, (6,))", data);
  expectError([&] { readNpy(p); }, {p, "malformed .npy header", "not a dict"});
  p = npy("unterminated.npy", "{'descr: '<f4'}", data);
  expectError([&] { readNpy(p); }, {p, "malformed .npy header"});

  p = npy("truncated.npy", dict, data.substr(0, 20));
  expectError([&] { readNpy(p); },
              {p, "truncated: expected 24 bytes of array data", "file has 20"});
  p = npy("trailing.npy", dict, data + "xx");
  expectError([&] { readNpy(p); }, {p, "trailing data", "expected 24 bytes", "file has 26"});
  // The well-formed file itself is fine.
  EXPECT_EQ(readNpy(npy("ok.npy", dict, data)).shape(), (Shape{2, 3}));
}

//===----------------------------------------------------------------------------------===//
// safetensors
//===----------------------------------------------------------------------------------===//

class SafetensorsIO : public TempDirTest {
protected:
  /// A file with the given JSON header (padded to 8 with spaces) and data bytes.
  std::string st(const std::string &name, const std::string &json, const std::string &data) {
    std::string header = json;
    while (header.size() % 8)
      header += ' ';
    std::string path = file(name);
    writeBytes(path, le64(header.size()) + header + data);
    return path;
  }
};

TEST_F(SafetensorsIO, RoundTripEveryDTypeInOrder) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  int seed = 0;
  for (DType dt : kAll) {
    tensors.emplace_back(str("enc_block_0.", seed, ".conv1.", dtypeName(dt)),
                         makeTensor(dt, {2, 1, 3, 3, 3}, seed));
    ++seed;
  }
  tensors.emplace_back("scalar_f32", makeTensor(DType::F32, {}, 1));
  tensors.emplace_back("scalar_bool", makeTensor(DType::Bool, {}, 0));
  tensors.emplace_back("empty_i64", makeTensor(DType::I64, {0, 4}));
  tensors.emplace_back("empty_bf16", makeTensor(DType::BF16, {3, 0}));
  tensors.emplace_back("dummy_tensor", makeTensor(DType::F32, {1}));
  tensors.emplace_back("a_last_but_alphabetically_first", makeTensor(DType::U8, {5}));
  std::string path = file("model.safetensors");
  writeSafetensors(path, tensors, {{"epoch", "3"}, {"note", "h\xc3\xa9llo \"quoted\""}});

  SafetensorsFile f = readSafetensors(path);
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (size_t k = 0; k < tensors.size(); ++k) {
    EXPECT_EQ(f.tensors[k].first, tensors[k].first) << "order must be preserved";
    expectSameTensor(tensors[k].second, f.tensors[k].second, tensors[k].first);
  }
  EXPECT_EQ(f.metadata,
            (std::map<std::string, std::string>{
                {"epoch", "3"}, {"format", "pt"}, {"note", "h\xc3\xa9llo \"quoted\""}}));
  ASSERT_NE(f.find("dummy_tensor"), nullptr);
  EXPECT_EQ(f.find("nope"), nullptr);

  // Header: multiple of 8, starts with '{', padded with spaces, data contiguous.
  std::string bytes = readBytes(path);
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k)
    n = (n << 8) | static_cast<unsigned char>(bytes[k]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
  std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.find("\"__metadata__\""), 1u) << header;
  size_t total = 0;
  for (const auto &[name, t] : tensors)
    total += t.nbytes();
  EXPECT_EQ(bytes.size(), 8 + n + total);
  EXPECT_EQ(listing(), std::vector<std::string>{"model.safetensors"});
}

TEST_F(SafetensorsIO, MetadataFormatIsKeptAndEmptyFilesWork) {
  std::string path = file("m.safetensors");
  writeSafetensors(path, {}, {{"format", "np"}});
  SafetensorsFile f = readSafetensors(path);
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"format", "np"}}));
  // A minimal file from another writer: no metadata, no tensors, no padding.
  writeBytes(path, le64(2) + "{}");
  f = readSafetensors(path);
  EXPECT_TRUE(f.tensors.empty());
  EXPECT_TRUE(f.metadata.empty());
}

TEST_F(SafetensorsIO, ReadsHeaderOrderNotOffsetOrder) {
  // Header order b, a; data order a, b; extra entry fields are ignored (as upstream);
  // "__metadata__": null is accepted.
  std::string data(8, '\0');
  float a = 1.0f, b = 2.0f;
  std::memcpy(data.data(), &a, 4);
  std::memcpy(data.data() + 4, &b, 4);
  std::string p = st("order.safetensors",
                     R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8],"x":1},)"
                     R"("__metadata__":null,"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
                     data);
  SafetensorsFile f = readSafetensors(p);
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].first, "b");
  EXPECT_EQ(f.tensors[0].second.at(0), 2.0);
  EXPECT_EQ(f.tensors[1].first, "a");
  EXPECT_EQ(f.tensors[1].second.rank(), 0);
  EXPECT_EQ(f.tensors[1].second.at(0), 1.0);
}

TEST_F(SafetensorsIO, TruncatedFileFailsCleanly) {
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"enc_block_0.0.conv1.weight", makeTensor(DType::F32, {4, 1, 7, 7, 7})},
      {"enc_block_0.0.conv1.bias", makeTensor(DType::F32, {4})}};
  std::string path = file("ckpt.safetensors");
  writeSafetensors(path, tensors);
  std::string bytes = readBytes(path);
  uint64_t n = static_cast<unsigned char>(bytes[0]) | static_cast<unsigned char>(bytes[1]) << 8;
  const uint64_t dataBytes = (4 * 343 + 4) * 4;
  ASSERT_EQ(bytes.size(), 8 + n + dataBytes);

  // Cut inside the data: by one byte, and in the middle of the first tensor.
  for (uint64_t keep : {dataBytes - 1, dataBytes / 3, uint64_t(0)}) {
    std::string p = file(str("cut", keep, ".safetensors"));
    writeBytes(p, bytes.substr(0, 8 + n + keep));
    expectError([&] { readSafetensors(p); },
                {p,
                 str("truncated: expected ", dataBytes, " bytes of tensor data, file has ", keep),
                 "enc_block_0.0.conv1.bias"});
  }
  // Cut inside the header, and inside the length.
  std::string p = file("cut_header.safetensors");
  writeBytes(p, bytes.substr(0, 8 + n / 2));
  expectError([&] { readSafetensors(p); },
              {p, str("truncated: the header length is ", n, " bytes but only ", n / 2)});
  writeBytes(p, bytes.substr(0, 5));
  expectError([&] { readSafetensors(p); }, {p, "fewer than the 8-byte header length"});
}

TEST_F(SafetensorsIO, ReadErrors) {
  const std::string f32x2 = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
  const std::string data8(8, '\0');
  std::string p;

  p = file("missing.safetensors");
  expectError([&] { readSafetensors(p); }, {p, "cannot open", "No such file"});
  expectError([&] { readSafetensors(dir); }, {dir, "is a directory"});

  p = file("huge_header.safetensors");
  writeBytes(p, le64(100000001) + "{}");
  expectError([&] { readSafetensors(p); },
              {p, "header length 100000001 exceeds the limit of 100000000"});
  p = file("beyond.safetensors");
  writeBytes(p, le64(64) + "{}      ");
  expectError([&] { readSafetensors(p); },
              {p, "truncated: the header length is 64 bytes but only 8"});
  p = file("zero_header.safetensors");
  writeBytes(p, le64(0));
  expectError([&] { readSafetensors(p); }, {p, "does not start with '{'", "empty"});
  p = st("array.safetensors", "[]", "");
  expectError([&] { readSafetensors(p); }, {p, "does not start with '{'", "0x5b"});
  p = st("space_first.safetensors", " {}", "");
  expectError([&] { readSafetensors(p); }, {p, "does not start with '{'"});
  p = st("badjson.safetensors", R"({"a": {"dtype": "F32",)", "");
  expectError([&] { readSafetensors(p); }, {p, "not valid JSON"});
  p = st("garbage_after.safetensors", "{} x", "");
  expectError([&] { readSafetensors(p); }, {p, "not valid JSON"});
  p = st("badutf8.safetensors", "{\"\xff\": 1}", "");
  expectError([&] { readSafetensors(p); }, {p, "not valid JSON"});

  p = st("not_object.safetensors", R"({"w": [1, 2]})", "");
  expectError([&] { readSafetensors(p); },
              {p, "tensor 'w'", "must be an object", "found an array"});
  p = st("no_dtype.safetensors", R"({"w": {"shape":[2],"data_offsets":[0,8]}})", data8);
  expectError([&] { readSafetensors(p); }, {p, "tensor 'w'", "missing \"dtype\""});
  p = st("no_shape.safetensors", R"({"w": {"dtype":"F32","data_offsets":[0,8]}})", data8);
  expectError([&] { readSafetensors(p); }, {p, "tensor 'w'", "missing \"shape\""});
  p = st("no_offsets.safetensors", R"({"w": {"dtype":"F32","shape":[2]}})", data8);
  expectError([&] { readSafetensors(p); }, {p, "tensor 'w'", "missing \"data_offsets\""});
  p = st("dtype_type.safetensors", R"({"w": {"dtype":32,"shape":[2],"data_offsets":[0,8]}})",
         data8);
  expectError([&] { readSafetensors(p); },
              {p, "tensor 'w'", "\"dtype\" must be a string", "found a number"});
  p = st("shape_type.safetensors", R"({"w": {"dtype":"F32","shape":"2","data_offsets":[0,8]}})",
         data8);
  expectError([&] { readSafetensors(p); },
              {p, "tensor 'w'", "\"shape\" must be an array", "found a string"});
  p = st("shape_float.safetensors", R"({"w": {"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})",
         data8);
  expectError([&] { readSafetensors(p); },
              {p, "tensor 'w'", "non-negative integers", "non-integer"});
  p = st("negative.safetensors", R"({"w": {"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
         data8);
  expectError([&] { readSafetensors(p); }, {p, "tensor 'w'", "negative dimension -2"});
  p = st("offsets_one.safetensors", R"({"w": {"dtype":"F32","shape":[2],"data_offsets":[8]}})",
         data8);
  expectError([&] { readSafetensors(p); }, {p, "tensor 'w'", "two non-negative integers", "[8]"});
  p = st("offsets_neg.safetensors", R"({"w": {"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})",
         data8);
  expectError([&] { readSafetensors(p); }, {p, "tensor 'w'", "two non-negative integers"});
  p = st("offsets_rev.safetensors", R"({"w": {"dtype":"F32","shape":[2],"data_offsets":[8,0]}})",
         data8);
  expectError([&] { readSafetensors(p); }, {p, "tensor 'w'", "begin > end"});

  p = st("u16.safetensors", R"({"w": {"dtype":"U16","shape":[4],"data_offsets":[0,8]}})", data8);
  expectError([&] { readSafetensors(p); },
              {p, "tensor 'w'", "unsupported dtype 'U16'", "expected F32"});
  p = st("f8.safetensors", R"({"w": {"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", data8);
  expectError([&] { readSafetensors(p); }, {p, "tensor 'w'", "unsupported dtype 'F8_E4M3'"});
  p = st("lower.safetensors", R"({"w": {"dtype":"f32","shape":[2],"data_offsets":[0,8]}})", data8);
  expectError([&] { readSafetensors(p); }, {p, "tensor 'w'", "unsupported dtype 'f32'"});

  p = st("size.safetensors", R"({"w": {"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8);
  expectError([&] { readSafetensors(p); },
              {p, "tensor 'w'", "span 8 bytes", "shape [3] needs 12 bytes"});
  p = st("overflow.safetensors",
         R"({"w": {"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", data8);
  expectError([&] { readSafetensors(p); }, {p, "tensor 'w'", "element count overflows"});

  p = st("hole.safetensors",
         R"({"a": {)" + f32x2 + R"(}, "b": {"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
         std::string(20, '\0'));
  expectError([&] { readSafetensors(p); }, {p, "hole", "bytes [8, 12)", "tensor 'b'"});
  p = st("hole_start.safetensors", R"({"a": {"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
         std::string(12, '\0'));
  expectError([&] { readSafetensors(p); }, {p, "hole", "bytes [0, 4)", "tensor 'a'"});
  p = st("overlap.safetensors",
         R"({"a": {)" + f32x2 + R"(}, "b": {"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
         std::string(12, '\0'));
  expectError([&] { readSafetensors(p); }, {p, "tensor 'b'", "overlap tensor 'a'"});
  p = st("alias.safetensors", R"({"a": {)" + f32x2 + R"(}, "b": {)" + f32x2 + "}}", data8);
  expectError([&] { readSafetensors(p); }, {p, "overlap"});
  p = st("out_of_buffer.safetensors", R"({"a": {"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
         std::string(6, '\0'));
  expectError([&] { readSafetensors(p); },
              {p, "truncated: expected 8 bytes of tensor data, file has 6", "tensor 'a'"});
  p = st("trailing.safetensors", R"({"a": {)" + f32x2 + "}}", data8 + "extra");
  expectError([&] { readSafetensors(p); },
              {p, "trailing data", "expected 8 bytes of tensor data, file has 13"});

  p = st("dup.safetensors", R"({"a": {)" + f32x2 + R"(}, "a": {)" + f32x2 + "}}", data8);
  expectError([&] { readSafetensors(p); }, {p, "duplicate key 'a'"});
  p = st("dup_field.safetensors",
         R"({"w": {"dtype":"F32","dtype":"I32","shape":[2],"data_offsets":[0,8]}})", data8);
  expectError([&] { readSafetensors(p); }, {p, "duplicate key 'dtype'", "'w'"});
  p = st("meta_value.safetensors", R"({"__metadata__": {"epoch": 3}})", "");
  expectError([&] { readSafetensors(p); },
              {p, "'__metadata__'", "key 'epoch'", "must be a string", "found a number"});
  p = st("meta_type.safetensors", R"({"__metadata__": ["format", "pt"]})", "");
  expectError([&] { readSafetensors(p); },
              {p, "'__metadata__' must be an object", "found an array"});
  p = st("meta_dup.safetensors", R"({"__metadata__": {"format": "pt", "format": "np"}})", "");
  expectError([&] { readSafetensors(p); }, {p, "duplicate key 'format'", "'__metadata__'"});

  // Sanity: the good variant of these files loads.
  p = st("good.safetensors", R"({"a": {)" + f32x2 + "}}", data8);
  EXPECT_EQ(readSafetensors(p).tensors.size(), 1u);
}

TEST_F(SafetensorsIO, WriteErrors) {
  std::string p = file("w.safetensors");
  Tensor t = makeTensor(DType::F32, {2});
  expectError([&] { writeSafetensors(p, {{"a", t}, {"a", t}}); }, {p, "duplicate tensor name 'a'"});
  expectError([&] { writeSafetensors(p, {{"__metadata__", t}}); }, {p, "reserved"});
  expectError([&] { writeSafetensors(p, {{"", t}}); }, {p, "empty name"});
  expectError([&] { writeSafetensors(p, {{"u", Tensor()}}); }, {p, "tensor 'u'", "undefined"});
  expectError([&] { writeSafetensors(p, {{"bad\xff", t}}); }, {p, "valid UTF-8"});
  std::string nodir = file("no/such/dir/w.safetensors");
  expectError(
      [&] {
        writeSafetensors(nodir, {{"a", t}});
      },
      {nodir, "cannot create a temporary file"});
  EXPECT_TRUE(listing().empty()) << "failed writes must leave nothing behind";

  // A failed write leaves an existing file untouched.
  writeSafetensors(p, {{"a", t}});
  expectError([&] { writeSafetensors(p, {{"a", t}, {"a", t}}); }, {p, "duplicate"});
  expectSameTensor(t, readSafetensors(p).tensors.at(0).second, "kept");
  EXPECT_EQ(listing(), std::vector<std::string>{"w.safetensors"});
}

} // namespace
