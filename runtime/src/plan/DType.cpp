//===- DType.cpp - element types and shapes --------------------------------------===//
//
// The free functions of medrun/Tensor.h that a plan's values need: part of the plan reader,
// which depends on nothing else of the runtime.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Tensor.h"

namespace medrun {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::BF16:
  case DType::F16:
  case DType::I16:
    return 2;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::BF16: return "bf16";
  case DType::F16: return "f16";
  case DType::I8: return "i8";
  case DType::I16: return "i16";
  case DType::I32: return "i32";
  case DType::I64: return "i64";
  case DType::U8: return "u8";
  case DType::Bool: return "bool";
  }
  return "?";
}

DType parseDType(const std::string &name, const std::string &what) {
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::I8, DType::I16,
                  DType::I32, DType::I64, DType::U8, DType::Bool})
    if (name == dtypeName(t))
      return t;
  throw Error(str(what, ": unknown element type '", name,
                  "' (expected f32, f64, bf16, f16, i8, i16, i32, i64, u8 or bool)"));
}

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::BF16 || t == DType::F16;
}

std::string shapeStr(const Shape &shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      throw Error(str("a tensor of shape ", shapeStr(shape), " has ",
                      d < 0 ? "a negative size" : "more than 2^63 elements"));
  return n;
}

} // namespace medrun
