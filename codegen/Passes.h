// Passes of the code generator.
#ifndef ATTNC_CODEGEN_PASSES_H
#define ATTNC_CODEGEN_PASSES_H

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace attnc {

/// The SPIR-V environment attn-spirv-attach-target assumes by default: a
/// Vulkan 1.1 device (SPIR-V 1.3) with subgroup arithmetic, 16-bit storage
/// f16 arithmetic and 64-bit integers, 32 KiB of workgroup memory and 1024
/// invocations per workgroup (what lavapipe and current AMD, Intel and NVIDIA
/// drivers offer). The subgroup size is a hint only: the kernels read theirs at
/// run time.
inline constexpr const char *kDefaultVulkanTargetEnv =
    "#spirv.target_env<#spirv.vce<v1.3, [Shader, GroupNonUniform, "
    "GroupNonUniformArithmetic, GroupNonUniformBallot, Float16, Int16, Int64, "
    "StorageBuffer16BitAccess], [SPV_KHR_storage_buffer_storage_class, "
    "SPV_KHR_16bit_storage]>, api=Vulkan, "
    "#spirv.resource_limits<max_compute_shared_memory_size = 32768, "
    "max_compute_workgroup_invocations = 1024, "
    "max_compute_workgroup_size = [1024, 1024, 64], subgroup_size = 32>>";

/// The prefix of the globals attn-cuda-lower-host puts each kernel module's
/// binary in (`attnc compile --emit=ptx` reads them back).
inline constexpr const char *kCudaImagePrefix = "__attnc_cuda_";

#define GEN_PASS_DECL
#include "codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "codegen/Passes.h.inc"

} // namespace attnc

#endif // ATTNC_CODEGEN_PASSES_H
