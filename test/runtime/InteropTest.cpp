//===- InteropTest.cpp - MedNeXt v1 state_dicts, trilinear resize, PyTorch files ------===//
#include "medrun/Error.h"
#include "medrun/Interop.h"
#include "medrun/TorchFile.h"

#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>

using namespace medrun;

namespace {

// Trilinear interpolation reproduces a linear function at the source coordinates PyTorch
// computes: align_corners False, 3 -> 5: (d + 0.5) * 3/5 - 0.5 clamped to [0, 2].
TEST(Interop, TrilinearOfALinearFunction) {
  Tensor w(DType::F32, {1, 1, 3, 3, 3});
  for (int64_t i = 0; i < 27; ++i)
    w.data<float>()[i] = static_cast<float>(9 * (i / 9) + 3 * (i / 3 % 3) + i % 3);
  for (bool corners : {false, true}) {
    const float c[2][5] = {{0, 0.4f, 1, 1.6f, 2}, {0, 0.5f, 1, 1.5f, 2}};
    const float *at = c[corners];
    Tensor out = interpolateTrilinear(w, {5, 5, 5}, corners);
    ASSERT_EQ(out.shape(), (Shape{1, 1, 5, 5, 5}));
    for (int z = 0; z < 5; ++z)
      for (int y = 0; y < 5; ++y)
        for (int x = 0; x < 5; ++x)
          EXPECT_NEAR(out.data<float>()[(z * 5 + y) * 5 + x], 9 * at[z] + 3 * at[y] + at[x], 1e-5)
              << "align_corners " << corners << " at " << z << "," << y << "," << x;
  }
  // The same size copies.
  Tensor same = interpolateTrilinear(w, {3, 3, 3});
  for (int64_t i = 0; i < 27; ++i)
    EXPECT_EQ(same.data<float>()[i], w.data<float>()[i]);
  EXPECT_THROW(interpolateTrilinear(Tensor(DType::F32, {3, 3, 3}), {5, 5, 5}), Error);
}

TensorMap tensorsOf(const std::vector<std::pair<std::string, Shape>> &keys) {
  TensorMap t;
  for (auto &[k, s] : keys)
    t.emplace(k, Tensor(DType::F32, s));
  return t;
}

TEST(Interop, MedNeXtV1StateDict) {
  MedNeXtV1 s; // MedNeXt-S, kernel 3: 228 tensors, 5,550,947 elements, plus dummy_tensor
  s.inChannels = 1, s.nChannels = 32, s.nClasses = 3, s.encKernel = s.decKernel = 3;
  s.expR.fill(2), s.blockCounts.fill(2), s.doResUpDown = true;
  auto keys = mednextV1StateDict(s);
  ASSERT_EQ(keys.size(), 229u);
  EXPECT_EQ(keys.front().first, "dummy_tensor");
  int64_t elements = 0;
  for (auto &[k, shape] : keys)
    elements += numElements(shape);
  EXPECT_EQ(elements, 5550947 + 1);
  EXPECT_EQ(s.factory(), "create_mednext_v1(1, 3, 'S', kernel_size=3, deep_supervision=False)");

  // Read back from the keys: the same architecture, with or without dummy_tensor.
  MedNeXtV1 l = s;
  l.expR = {3, 4, 8, 8, 8, 8, 8, 4, 3}, l.blockCounts = l.expR, l.encKernel = 5;
  l.deepSupervision = l.grn = true;
  for (const MedNeXtV1 &n : {s, l}) {
    TensorMap t = tensorsOf(mednextV1StateDict(n));
    MedNeXtV1 back = mednextV1Of(t, "t");
    EXPECT_EQ(back.python(), n.python());
    t.erase("dummy_tensor");
    EXPECT_EQ(mednextV1Of(t, "t").python(), n.python());
  }
  EXPECT_EQ(l.factory(), ""); // GRN and two kernel sizes: no factory variant

  // Strict: a missing key, an extra key, another shape are errors that name them.
  TensorMap t = tensorsOf(mednextV1StateDict(s));
  t.erase("dec_block_1.1.norm.bias");
  t.emplace("extra.weight", Tensor(DType::F32, {2}));
  t["up_2.conv1.weight"] = Tensor(DType::F32, {256, 1, 5, 5, 5});
  try {
    mednextV1Of(t, "file");
    FAIL() << "no error";
  } catch (const Error &e) {
    std::string m = e.what();
    EXPECT_NE(m.find("1 missing: dec_block_1.1.norm.bias"), std::string::npos) << m;
    EXPECT_NE(m.find("1 unexpected: extra.weight (2)"), std::string::npos) << m;
    EXPECT_NE(m.find("up_2.conv1.weight (256x1x5x5x5, expected 256x1x3x3x3)"), std::string::npos) << m;
  }
  // dummy_tensor of another shape is not MedNeXt's: it stays and is reported.
  TensorMap d = tensorsOf(mednextV1StateDict(s));
  d["dummy_tensor"] = Tensor(DType::F32, {4});
  eraseDummyTensor(d);
  EXPECT_TRUE(d.count("dummy_tensor"));
  EXPECT_THROW(mednextV1Of(d, "d"), Error);
}

// A minimal zip of stored entries holding `pkl` as archive/data.pkl.
std::string storedZip(const std::string &pkl) {
  auto u16 = [](std::string &s, uint16_t v) { s += char(v & 255), s += char(v >> 8); };
  auto u32 = [&](std::string &s, uint32_t v) { u16(s, v & 0xffff), u16(s, v >> 16); };
  const std::string name = "archive/data.pkl";
  std::string zip, central;
  zip += "PK\3\4", u16(zip, 20), u16(zip, 0), u16(zip, 0), u32(zip, 0), u32(zip, 0);
  u32(zip, pkl.size()), u32(zip, pkl.size()), u16(zip, name.size()), u16(zip, 0);
  zip += name + pkl;
  central += "PK\1\2", u16(central, 20), u16(central, 20), u16(central, 0), u16(central, 0);
  u32(central, 0), u32(central, 0), u32(central, pkl.size()), u32(central, pkl.size());
  u16(central, name.size()), u16(central, 0), u16(central, 0), u16(central, 0), u16(central, 0);
  u32(central, 0), u32(central, 0);
  central += name;
  const uint32_t at = zip.size();
  zip += central;
  zip += "PK\5\6", u16(zip, 0), u16(zip, 0), u16(zip, 1), u16(zip, 1);
  u32(zip, central.size()), u32(zip, at), u16(zip, 0);
  return zip;
}

template <size_t N> std::string bytes(const char (&s)[N]) { return std::string(s, N - 1); }

std::string readError(const std::string &pkl) {
  const std::string path = testing::TempDir() + "interop_test.pth";
  std::ofstream(path, std::ios::binary) << storedZip(pkl);
  EXPECT_TRUE(isTorchFile(path));
  try {
    readTorchStateDict(path);
  } catch (const Error &e) {
    return e.what();
  }
  return "no error";
}

// Pickles that are data, however odd: read without running anything, errors named.
TEST(Interop, PickleAsData) {
  // A list that holds itself (a cycle through the memo).
  EXPECT_NE(readError(bytes("\x80\x02]q\x00h\x00\x61.")).find("holds a list"), std::string::npos);
  // A call of os.system: recorded, never made; no weights in it.
  EXPECT_NE(readError(bytes("\x80\x02}q\x00X\x01\x00\x00\x00xcposix\nsystem\nX\x04\x00\x00\x00"
                            "true\x85R\x73."))
                .find("holds a dict (keys: x) without tensors"),
            std::string::npos);
  // A memo index of 2^32 - 1 and a get of one never set.
  EXPECT_NE(readError(bytes("\x80\x02]r\xff\xff\xff\xffj\x00\x00\x00\x01."))
                .find("memo entry 16777216 is not set"),
            std::string::npos);
  // An opcode outside what torch.save writes, and a pickle without STOP.
  EXPECT_NE(readError("\x80\x02I1\n.").find("opcode 0x49"), std::string::npos);
  EXPECT_NE(readError("\x80\x02}").find("ends without STOP"), std::string::npos);
}

} // namespace
