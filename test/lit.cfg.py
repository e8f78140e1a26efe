# -*- Python -*-
# The lit configuration of ZeroBubble MLIR's test suite.

import os

import lit.formats
from lit.llvm import llvm_config

config.name = "ZB"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.zb_obj_root, "test")
# test/e2e holds pytest suites and the models they run, not lit tests.
config.excludes = ["Inputs", "e2e", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%shlibext", config.llvm_shlib_ext))
config.substitutions.append(("%zb_src_root", config.zb_src_root))

llvm_config.with_system_environment(
    ["HOME", "INCLUDE", "LIB", "TMP", "TEMP", "ZB_TARGET_CPU"]
)
llvm_config.use_default_substitutions()

config.zb_tools_dir = os.path.join(config.zb_obj_root, "bin")
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.zb_tools_dir, append_path=True)

# zb-run caches compiled models inside the build tree, not in $HOME.
config.environment["ZB_CACHE_DIR"] = os.path.join(config.zb_obj_root, "cache")

tool_dirs = [config.zb_tools_dir, config.llvm_tools_dir]
tools = ["zb-opt", "zb-sched", "zb-run"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# The GPU runtime (libzbrt_cuda.so) is built where CMake found the CUDA
# toolkit and NCCL: feature `zbrt-cuda`. `REQUIRES: cuda` tests run a GPU:
# they also need a usable NVIDIA GPU (nvidia-smi lists one), not only the
# toolkit; elsewhere lit reports them UNSUPPORTED.
def _have_usable_gpu():
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return listed.returncode == 0 and b"GPU" in listed.stdout


if os.path.exists(os.path.join(config.zb_obj_root, "lib", "libzbrt_cuda.so")):
    config.available_features.add("zbrt-cuda")
    if _have_usable_gpu():
        config.available_features.add("cuda")
config.substitutions.append(("%python", config.python_executable))

# The CUDA toolkit the GPU lowering compiles kernels with (ptxas, and
# libdevice for math functions), found as --zb-lower-to-gpu finds it:
# feature `cuda-toolkit`. Tests that build cubins or call math functions in
# kernels require it; the other GPU lowering tests need only LLVM's NVPTX
# backend.
def _cuda_toolkit():
    for name in ("CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(name):
            return os.environ[name]
    return "/usr/local/cuda"


_toolkit = _cuda_toolkit()
if os.path.exists(os.path.join(_toolkit, "bin", "ptxas")) and os.path.isdir(
    os.path.join(_toolkit, "nvvm", "libdevice")
):
    config.available_features.add("cuda-toolkit")

# MLIR's mlir-opt and mlir-runner with the runner utilities, which run a
# GPU lowering's loops on the CPU (its device buffers made host ones):
# feature `mlir-runner` (a GPU machine's bundle does not carry them).
_mlir_lib_dir = os.path.join(os.path.dirname(config.llvm_tools_dir), "lib")
if all(
    os.path.exists(os.path.join(config.llvm_tools_dir, tool))
    for tool in ("mlir-opt", "mlir-runner")
) and all(
    os.path.exists(os.path.join(_mlir_lib_dir, lib + config.llvm_shlib_ext))
    for lib in ("libmlir_runner_utils", "libmlir_c_runner_utils")
):
    config.available_features.add("mlir-runner")
    config.substitutions.append(("%mlir_lib_dir", _mlir_lib_dir))
