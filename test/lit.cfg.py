# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "MED"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "unit", "regressions"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.med_obj_root, "test")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# medc's cubin cache (lib/Target/CudaCompile.cpp): one for the test run, inside the build
# tree, never the user's; tests that compile the same kernels share its entries.
config.environment["MEDC_CACHE_DIR"] = os.path.join(config.med_obj_root, "test", "cubin-cache")
# The CPU emulation gains nothing from measuring kernel variants (the sm_90a wgmma kernels
# beside their mma.sync ones; each measurement runs both four times): tests run the mma.sync
# kernels unless they set MEDRUN_MMA themselves (test/cuda/mlp.test).
config.environment["MEDRUN_MMA"] = "mma.sync"
# The machine's own cuDNN and cuBLASLt cannot run on the fake driver (test/cuda/FakeCuda.cpp),
# and loading them (cuBLASLt is 600 MB) cost each emulated process a quarter of a second:
# tests see them missing, as on a machine without them, unless they name a library
# themselves (the stand-ins %fakecudnn and %fakecublaslt).
config.environment["MEDRUN_LIBCUDNN"] = os.path.join(config.med_obj_root, "test", "no-libcudnn.so")
config.environment["MEDRUN_LIBCUBLASLT"] = os.path.join(config.med_obj_root, "test", "no-libcublaslt.so")
# LibTorch's and PyTorch's OpenMP threads (medcheck, the Python checks) spin while they wait
# for work: under ctest -j, with every core taken, a spinning thread holds the core that the
# thread it waits for needs. Two medchecks of MedNeXt-S's train step on two cores: LibTorch's
# part took 3.7 times as long as alone, 1.3 times with passive waiting, which changes no
# result and was as fast alone (test/CMakeLists.txt sets it for the tests outside lit too).
config.environment["OMP_WAIT_POLICY"] = "PASSIVE"
config.substitutions.append(("%models", os.path.join(config.med_src_root, "models")))
config.substitutions.append(("%scripts", os.path.join(config.med_src_root, "scripts")))
config.substitutions.append(("%python", config.python_executable))
# The op table's generator (tools/med-tblgen) and the dialect's ODS it reads.
config.substitutions.append(("%gen_op_table", "%s %s --tblgen %s -I %s -I %s" % (
    config.python_executable, os.path.join(config.med_src_root, "tools", "med-tblgen", "gen_op_table.py"),
    os.path.join(config.llvm_tools_dir, "llvm-tblgen"), os.path.join(config.med_src_root, "include"),
    os.path.join(os.path.dirname(config.llvm_tools_dir), "include"))))

tool_dirs = [os.path.join(config.med_obj_root, "bin"), config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["med-opt", "medc", "medcheck", "medrun"], tool_dirs)

# medc links NVRTC (the CUDA toolkit was found): tests that compile CUDA kernels run.
if getattr(config, "med_have_nvrtc", 0):
    config.available_features.add("nvrtc")

# The CUDA emulation (test/cuda): the fake libcuda.so.1, its device-language header and the
# host compiler that builds the generated kernels for it.
config.substitutions.append(("%fakecudnn", os.path.join(config.med_obj_root, "test", "cuda", "libfakecudnn.so")))
config.substitutions.append(("%fakecublaslt", os.path.join(config.med_obj_root, "test", "cuda", "libfakecublaslt.so")))
config.substitutions.append(("%fakenccl", os.path.join(config.med_obj_root, "test", "cuda", "libfakenccl.so")))
config.substitutions.append(("%reducercheck", os.path.join(config.med_obj_root, "test", "runtime", "train-reducer-check")))
config.substitutions.append(("%inplacecheck", os.path.join(config.med_obj_root, "test", "cuda", "cuda-in-place-check")))
config.substitutions.append(("%fakecuda", os.path.join(config.med_obj_root, "test", "cuda", "libcuda.so.1")))
config.substitutions.append(("%cuda_emu_h", os.path.join(config.med_src_root, "test", "cuda", "emu.h")))
config.substitutions.append(("%cxx", getattr(config, "cxx_compiler", "c++")))
