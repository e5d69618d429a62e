//===- PreprocessCommand.cpp - `medrun preprocess` ------------------------------------===//
#include "PreprocessCommand.h"

#include "medrun/Error.h"
#include "medrun/Parallel.h"

#include <chrono>
#include <cstdio>

namespace medrun {

int preprocessCommand(const PreprocessOptions &o) {
  if (o.dataset.empty())
    throw Error("medrun preprocess needs the nnU-Net raw dataset folder: medrun preprocess "
                "DATASET -o DIR");
  if (o.out.empty())
    throw Error("medrun preprocess: give the cache folder with -o DIR");
  std::fprintf(stderr, "preprocess %s into %s on %d threads\n", o.dataset.c_str(), o.out.c_str(),
               numThreads());
  const auto start = std::chrono::steady_clock::now();
  const PreprocessSummary s = preprocessDataset(o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("preprocessed %lld cases into %s in %.1f s: %lld written, %lld unchanged and kept\n",
              static_cast<long long>(s.cases), o.out.c_str(), seconds,
              static_cast<long long>(s.done), static_cast<long long>(s.reused));
  return 0;
}

} // namespace medrun
