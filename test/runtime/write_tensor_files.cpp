//===- write_tensor_files.cpp - helper for the Python cross-check ------------------===//
//
//   write-tensor-files write DIR   writes .npy and safetensors files with deterministic
//                                  contents plus DIR/manifest.txt describing them
//   write-tensor-files read FILE   reads a .npy or .safetensors file and prints
//                                  "meta\tKEY\tVALUE" and
//                                  "tensor\tNAME\tDTYPE\tSHAPE\tCHECKSUM" lines
//
// Contents (shared with check_tensor_files.py), element i of a tensor:
//   F32/F64/F16/BF16: (i % 200) * 0.5 - 10      I8: i % 100 - 50
//   I16: i * 37 % 60000 - 30000                 I32: i * 100003 - 7
//   I64: 2^40 * (i % 5) - i                     U8: i * 7 % 256        BOOL: i % 3 == 0
// CHECKSUM = sum_i value(i) * (i % 7 + 1), printed with %.17g.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Npy.h"
#include "medrun/Safetensors.h"
#include "medrun/Tensor.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

using namespace medrun;

namespace {

uint16_t toHalf(double v) { // exact for the multiples of 0.5 used here
  if (v == 0)
    return 0;
  double a = std::fabs(v);
  int e = static_cast<int>(std::floor(std::log2(a)));
  auto mant = static_cast<uint16_t>(std::lround((a / std::ldexp(1.0, e) - 1) * 1024));
  return static_cast<uint16_t>((v < 0 ? 0x8000 : 0) | ((e + 15) << 10) | mant);
}

Tensor make(DType dt, Shape shape) {
  Tensor t(dt, std::move(shape));
  auto *p = static_cast<char *>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) {
    double f = static_cast<double>(i % 200) * 0.5 - 10;
    switch (dt) {
    case DType::F32:
      t.data<float>()[i] = static_cast<float>(f);
      break;
    case DType::F64:
      t.data<double>()[i] = f;
      break;
    case DType::BF16:
      t.data<bf16>()[i] = bf16(static_cast<float>(f));
      break;
    case DType::F16: {
      uint16_t h = toHalf(f);
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case DType::I8:
      t.data<int8_t>()[i] = static_cast<int8_t>(i % 100 - 50);
      break;
    case DType::I16:
      t.data<int16_t>()[i] = static_cast<int16_t>(i * 37 % 60000 - 30000);
      break;
    case DType::I32:
      t.data<int32_t>()[i] = static_cast<int32_t>(i * 100003 - 7);
      break;
    case DType::I64:
      t.data<int64_t>()[i] = (int64_t(1) << 40) * (i % 5) - i;
      break;
    case DType::U8:
      t.data<uint8_t>()[i] = static_cast<uint8_t>(i * 7 % 256);
      break;
    case DType::Bool:
      reinterpret_cast<uint8_t *>(p)[i] = i % 3 == 0;
      break;
    }
  }
  return t;
}

std::string shapeCsv(const Shape &s) {
  std::string out;
  for (size_t k = 0; k < s.size(); ++k)
    out += (k ? "," : "") + std::to_string(s[k]);
  return out;
}

std::string checksum(const Tensor &t) {
  double sum = 0;
  for (int64_t i = 0; i < t.numel(); ++i)
    sum += t.at(i) * static_cast<double>(i % 7 + 1);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", sum);
  return buf;
}

void printTensor(const std::string &name, const Tensor &t) {
  std::cout << "tensor\t" << name << '\t' << safetensorsDTypeName(t.dtype()) << '\t'
            << shapeCsv(t.shape()) << '\t' << checksum(t) << '\n';
}

int write(const std::string &dir) {
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"enc_block_0.0.conv1.weight", make(DType::F32, {4, 1, 3, 3, 3})},
      {"enc_block_0.0.conv1.bias", make(DType::F32, {4})},
      {"enc_block_0.0.norm.weight", make(DType::BF16, {4, 5})},
      {"enc_block_0.0.conv2.weight", make(DType::F16, {8, 4, 1, 1, 1})},
      {"stem.weight", make(DType::F64, {4, 1, 1, 1, 1})},
      {"step", make(DType::I64, {})},
      {"positions", make(DType::I64, {3, 2})},
      {"labels", make(DType::I8, {2, 3, 4})},
      {"counts", make(DType::I16, {5})},
      {"index", make(DType::I32, {3, 2})},
      {"raw", make(DType::U8, {2, 2, 70})},
      {"mask", make(DType::Bool, {7})},
      {"empty", make(DType::F32, {0, 3})},
      {"dummy_tensor", make(DType::F32, {1})},
  };
  const std::map<std::string, std::string> metadata = {{"epoch", "7"}, {"model", "mednext_S"}};
  std::ofstream manifest(dir + "/manifest.txt");
  const std::string st = "ours.safetensors";
  writeSafetensors(dir + "/" + st, tensors, metadata);
  for (const auto &[k, v] : metadata)
    manifest << "meta\t" << st << '\t' << k << '\t' << v << '\n';
  for (const auto &[name, t] : tensors)
    manifest << "safetensors\t" << st << '\t' << name << '\t' << safetensorsDTypeName(t.dtype())
             << '\t' << shapeCsv(t.shape()) << '\n';
  for (const auto &[name, t] : tensors) {
    if (t.dtype() == DType::BF16)
      continue; // not a numpy type
    std::string file = "ours." + name + ".npy";
    writeNpy(dir + "/" + file, t);
    manifest << "npy\t" << file << '\t' << name << '\t' << safetensorsDTypeName(t.dtype()) << '\t'
             << shapeCsv(t.shape()) << '\n';
  }
  manifest.close();
  if (!manifest)
    throw Error(dir + "/manifest.txt: cannot write");
  return 0;
}

int read(const std::string &path) {
  auto endsWith = [&](const std::string &suffix) {
    return path.size() >= suffix.size() &&
           path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (endsWith(".npy")) {
    printTensor("-", readNpy(path));
  } else {
    SafetensorsFile f = readSafetensors(path);
    for (const auto &[k, v] : f.metadata)
      std::cout << "meta\t" << k << '\t' << v << '\n';
    for (const auto &[name, t] : f.tensors)
      printTensor(name, t);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3 || (std::string(argv[1]) != "write" && std::string(argv[1]) != "read")) {
    std::cerr << "usage: " << argv[0] << " write DIR | read FILE\n";
    return 2;
  }
  try {
    return std::string(argv[1]) == "write" ? write(argv[2]) : read(argv[2]);
  } catch (const Error &e) {
    std::cerr << "error: " << e.what() << '\n';
    return 1;
  }
}
