//===- Sizes.cpp - checked products and bounds of declared sizes ----------------------===//
#include "medrun/Sizes.h"

#include <cstdio>

namespace medrun {

std::string shapeString(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "()";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

int64_t checkedMul(int64_t a, int64_t b, const std::string &what) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    throw Error(str(what, ": ", a, " x ", b, " overflows a 64-bit size"));
  return r;
}

int64_t checkedCount(const std::vector<int64_t> &shape, const std::string &what, int64_t minDim,
                     int64_t maxElements, const char *label) {
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < minDim)
      throw Error(str(what, ": ", label, " ", shapeString(shape), " has dimension ", i, " = ", shape[i],
                      " (every dimension must be at least ", minDim, ")"));
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : shape)
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  if (overflow)
    throw Error(str(what, ": ", label, " ", shapeString(shape),
                    ": its element count overflows a 64-bit size"));
  if (n > maxElements)
    throw Error(str(what, ": ", label, " ", shapeString(shape), " declares ", n,
                    " elements, more than ", maxElements, " (the limit on one array)"));
  return n;
}

std::string byteString(uint64_t bytes) {
  if (bytes < 10 * 1024)
    return str(bytes, " bytes");
  const char *unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 5)
    v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %s", v, unit[u]);
  return buf;
}

uint64_t checkedBytes(int64_t count, uint64_t elemSize, uint64_t limit, const std::string &what,
                      const std::string &limitWhat) {
  uint64_t bytes = 0;
  if (count < 0 || __builtin_mul_overflow(static_cast<uint64_t>(count), elemSize, &bytes))
    throw Error(str(what, ": ", count, " elements of ", elemSize,
                    " bytes overflow a 64-bit size"));
  if (bytes > limit)
    throw Error(str(what, ": declares ", count, " elements of ", elemSize, " bytes (",
                    byteString(bytes), "), more than ", limitWhat));
  return bytes;
}

Error allocationError(const std::string &what, const std::string &declared, uint64_t bytes) {
  return Error(str(what, ": cannot allocate ", byteString(bytes), " for ", declared,
                   " (out of memory)"));
}

} // namespace medrun
