# lit configuration of the attnc test suite.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "attnc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["unit", "package", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.attnc_obj_root, "test")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["attnc", "attnc-opt", "attnc-lsp-server"],
                                   [config.attnc_tools_dir])
config.substitutions.append(("%cc", config.c_compiler))
# The sanitized build (ATTNC_SANITIZE): tests that cannot run under ASan say
# UNSUPPORTED: asan.
if config.attnc_sanitize.upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("asan")
# JIT caches of the tests stay in the build tree.
config.environment["ATTNC_CACHE_DIR"] = os.path.join(config.attnc_obj_root, "test", "jit-cache")
config.substitutions.append(("%attnc_src", config.attnc_src_root))
# Vulkan kernels run on Mesa's lavapipe (a Vulkan device on the CPU) when
# it is installed (tools/scripts/build.sh installs it): feature "vulkan".
import glob
lavapipe = sorted(glob.glob("/usr/share/vulkan/icd.d/lvp_icd*.json"))
if lavapipe:
    config.environment["VK_ICD_FILENAMES"] = lavapipe[0]
    config.available_features.add("vulkan")
# Shaders are compiled anew for each subgroup size the tests choose.
config.environment["MESA_SHADER_CACHE_DISABLE"] = "true"
config.substitutions.append(
    ("%attnc_runtime_include",
     os.path.join(config.attnc_src_root, "runtime", "include")))
config.substitutions.append(
    ("%attnc_runtime_lib",
     os.path.join(config.attnc_obj_root, "runtime", "libattnc_rt.a")))

# The CUDA target's tests: "cuda-toolkit" where ptxas, fatbinary and
# libdevice are (CUDA_HOME, else /usr/local/cuda); "cuda-device" where,
# moreover, the driver answers with a GPU (never on CI's machines).
cuda_path = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
if all(os.path.exists(os.path.join(cuda_path, f)) for f in
       ["bin/ptxas", "bin/fatbinary", "nvvm/libdevice/libdevice.10.bc"]):
    config.available_features.add("cuda-toolkit")
    config.substitutions.append(("%ptxas", os.path.join(cuda_path, "bin", "ptxas")))
    try:
        import ctypes
        libcuda = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        if libcuda.cuInit(0) == 0 and libcuda.cuDeviceGetCount(ctypes.byref(count)) == 0 \
                and count.value > 0:
            config.available_features.add("cuda-device")
    except OSError:
        pass
