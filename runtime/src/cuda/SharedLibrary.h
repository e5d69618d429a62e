//===- SharedLibrary.h - a library opened with dlopen, its functions by name ------===//
//
// libcuda and cuDNN are opened at run time, never linked: medrun starts and says what is
// missing on machines without them.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_CUDA_SHAREDLIBRARY_H
#define MEDRUN_CUDA_SHAREDLIBRARY_H

#include "medrun/Error.h"

#include <dlfcn.h>

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <type_traits>

namespace medrun {

struct SharedLibrary {
  void *handle = nullptr;
  std::string name;
  std::string error; ///< why it is unusable; empty if usable

  /// Opens `fallback`, or the file the environment variable `override` names (tests: a
  /// missing library, a stand-in).
  void open(const char *override, const char *fallback) {
    const char *env = std::getenv(override);
    name = env && *env ? env : fallback;
    handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *e = dlerror();
      error = str(name, " does not load: ", e ? e : "unknown reason");
    }
  }

  /// Sets `fn` to the first of `names` the library has; false if it has none.
  template <typename Fn> bool find(Fn &fn, std::initializer_list<const char *> names) {
    for (const char *n : names)
      if (void *p = dlsym(handle, n)) {
        fn = reinterpret_cast<Fn>(p);
        return true;
      }
    return false;
  }

  /// As find, but a missing function makes the library unusable (the first one is said).
  template <typename Fn> void require(Fn &fn, std::initializer_list<const char *> names) {
    if (!find(fn, names) && error.empty())
      error = str(name, " lacks ", *names.begin());
  }
};

} // namespace medrun

#endif // MEDRUN_CUDA_SHAREDLIBRARY_H
