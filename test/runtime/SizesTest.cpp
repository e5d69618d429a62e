//===- SizesTest.cpp - the checks on declared sizes (medrun/Sizes.h) -------------------===//
#include "ExpectError.h"

#include "medrun/Sizes.h"

#include "gtest/gtest.h"

using namespace medrun;

TEST(Sizes, CountsAndRules) {
  EXPECT_EQ(checkedCount({2, 3, 4}, "a.h5/raw"), 24);
  EXPECT_EQ(checkedCount({}, "x.npy"), 1);
  EXPECT_EQ(checkedCount({0, 5}, "x.npy", 0), 0);
  // The SIGFPE: 24 x 2^32 x 2^32 wraps to 0 in 64 bits.
  EXPECT_ERROR(checkedCount({24, int64_t(1) << 32, int64_t(1) << 32}, "a.h5/raw"), "a.h5/raw",
               "24x4294967296x4294967296", "overflows");
  EXPECT_ERROR(checkedCount({4, 0, 4}, "a.zarr/img"), "a.zarr/img", "dimension 1 = 0",
               "at least 1");
  EXPECT_ERROR(checkedCount({4, -2}, "x.npy", 0), "dimension 1 = -2", "at least 0");
  EXPECT_ERROR(checkedCount({int64_t(1) << 30, int64_t(1) << 30}, "z", 1, kMaxArrayElements),
               "more than 281474976710656");
  EXPECT_EQ(checkedMul(3, 5, "m"), 15);
  EXPECT_ERROR(checkedMul(int64_t(1) << 40, int64_t(1) << 30, "m"), "m: ", "overflows");
}

TEST(Sizes, BytesWithinTheirBound) {
  EXPECT_EQ(checkedBytes(1024, 4, 4096, "f", "the file's 4096 bytes"), 4096u);
  EXPECT_ERROR(checkedBytes(1025, 4, 4096, "f.h5/x", "the file's 4096 bytes"), "f.h5/x",
               "1025 elements of 4 bytes", "4100 bytes", "more than the file's 4096 bytes");
  EXPECT_ERROR(checkedBytes(int64_t(1) << 62, 8, UINT64_MAX, "f", "any"), "overflow");
  EXPECT_EQ(byteString(4096), "4096 bytes");
  EXPECT_EQ(byteString(uint64_t(256) << 30), "256 GiB");
}

TEST(Sizes, AllocationFailureIsAnError) {
  EXPECT_EQ(allocate<float>(3, "v", "3 float32").size(), 3u);
  // More than the address space: length_error or bad_alloc, either way a clear Error.
  EXPECT_ERROR(allocate<float>(int64_t(1) << 62, "a.h5/raw", "2^62 float32"), "a.h5/raw",
               "cannot allocate", "for 2^62 float32");
  std::vector<double> v;
  EXPECT_ERROR(resizeChecked(v, int64_t(1) << 61, "a.zarr/img", "chunk 2^61"), "a.zarr/img",
               "cannot allocate");
  resizeChecked(v, 5, "a", "5");
  EXPECT_EQ(v.size(), 5u);
}
