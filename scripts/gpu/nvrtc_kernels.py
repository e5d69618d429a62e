"""Small CUDA kernels from source on the GPU machine, for the scripts that check prelude.cuh's
device arithmetic (convert.py, gelu-erf.py): NVRTC (PyTorch's CUDA 13 wheel) compiles the
source for this GPU, the driver loads it, and launch() runs one of its kernels on 256-thread
blocks with ctypes arguments. Errors end the script with the call that failed (and NVRTC's log)."""
import ctypes, os
import torch

N = '/opt/torch/.venv/lib/python3.12/site-packages/nvidia'
nvrtc = ctypes.CDLL(os.path.join(N, 'cu13/lib/libnvrtc.so.13'))
cuda = ctypes.CDLL('libcuda.so.1')


def check(r, what):
    if r != 0:
        raise SystemExit(f'{what} failed ({r})')


def init():
    """The primary context (torch's), current on this thread, and the driver API."""
    torch.zeros(1, device='cuda')
    check(cuda.cuInit(0), 'cuInit')


def load(source, names):
    """The kernels `names` of `source` (NVRTC with -default-device), by name."""
    prog = ctypes.c_void_p()
    check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b'check.cu', 0, None, None), 'nvrtcCreateProgram')
    major, minor = torch.cuda.get_device_capability()
    opts = [f'--gpu-architecture=sm_{major}{minor}'.encode(), b'-default-device', b'--std=c++17']
    if nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)) != 0:
        n = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise SystemExit('NVRTC failed:\n' + log.value.decode())
    n = ctypes.c_size_t()
    nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(n))
    cubin = ctypes.create_string_buffer(n.value)
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    module = ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), cubin), 'cuModuleLoadData')
    fns = {}
    for name in names:
        f = ctypes.c_void_p()
        check(cuda.cuModuleGetFunction(ctypes.byref(f), module, name.encode()), 'cuModuleGetFunction ' + name)
        fns[name] = f
    return fns


def launch(f, blocks, args):
    """Kernel f on `blocks` blocks of 256 threads; args are ctypes values, in order."""
    ptrs = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])
    check(cuda.cuLaunchKernel(f, blocks, 1, 1, 256, 1, 1, 0, None, ptrs, None), 'cuLaunchKernel')
