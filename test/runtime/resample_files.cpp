//===- resample_files.cpp - helper for the SciPy check of the resampling -------------===//
//
//   resample-files IN.npy OUT.npy D,H,W ORDER AXIS [seg]
//
// resamples the 3-D array IN (any numeric dtype) to D x H x W as nnU-Net does
// (medrun/Resample.h): an image with ORDER (0, 1, 3), or with `seg` a label map; AXIS >= 0
// treats that axis apart (separate z), -1 not. Writes f64 (images) or i64 (labels).
// check_resample.py compares the output with SciPy.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/Npy.h"
#include "medrun/Resample.h"

#include <iostream>
#include <string>

using namespace medrun;

int main(int argc, char **argv) {
  if (argc != 6 && argc != 7) {
    std::cerr << "usage: resample-files IN.npy OUT.npy D,H,W ORDER AXIS [seg]\n";
    return 2;
  }
  try {
    Tensor in = readNpy(argv[1]).to(DType::F64);
    if (in.rank() != 3)
      throw Error(str(argv[1], ": expected a 3-D array"));
    const Shape3 from = {in.dim(0), in.dim(1), in.dim(2)};
    Shape3 to{};
    if (std::sscanf(argv[3], "%ld,%ld,%ld", &to[0], &to[1], &to[2]) != 3)
      throw Error(str("expected D,H,W, got ", argv[3]));
    const int order = std::stoi(argv[4]), axis = std::stoi(argv[5]);
    const double *p = in.data<double>();
    std::vector<double> x(p, p + in.numel());
    if (argc == 7) {
      std::vector<int64_t> ids(x.begin(), x.end());
      std::vector<int64_t> r = resampleSegmentation(ids, from, to, axis);
      Tensor out(DType::I64, {to[0], to[1], to[2]});
      std::copy(r.begin(), r.end(), out.data<int64_t>());
      writeNpy(argv[2], out);
    } else {
      std::vector<double> r = resampleImage(x, from, to, order, axis);
      Tensor out(DType::F64, {to[0], to[1], to[2]});
      std::copy(r.begin(), r.end(), out.data<double>());
      writeNpy(argv[2], out);
    }
  } catch (const std::exception &e) {
    std::cerr << "resample-files: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
