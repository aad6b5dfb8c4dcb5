// An f16 kernel for the Vulkan runtime's tests: 16-bit storage buffers, f16
// arithmetic and an f16 subgroup reduction, which need the device features
// the runtime enables (storageBuffer16BitAccess, shaderFloat16,
// shaderSubgroupExtendedTypes). Compiled like axpy.mlir.
module attributes {gpu.container_module} {
  gpu.module @kernels attributes {spirv.target_env = #spirv.target_env<
      #spirv.vce<v1.3, [Shader, Float16, StorageBuffer16BitAccess,
                        GroupNonUniform, GroupNonUniformArithmetic],
                 [SPV_KHR_storage_buffer_storage_class, SPV_KHR_16bit_storage]>,
      #spirv.resource_limits<subgroup_size = 8>>} {
    // out[i] = x[i] * x[i] + 0.5, and total[0] = the sum of 2 * x[i] over
    // subgroup 0, on one workgroup of 64.
    gpu.func @half_square(%x: memref<64xf16>, %out: memref<64xf16>,
                          %total: memref<1xf16>) kernel
        attributes {spirv.entry_point_abi =
                    #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>} {
      %c0 = arith.constant 0 : index
      %half = arith.constant 0.5 : f16
      %two = arith.constant 2.0 : f16
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<64xf16>
      %sq = arith.mulf %v, %v : f16
      %r = arith.addf %sq, %half : f16
      memref.store %r, %out[%i] : memref<64xf16>
      %d = arith.mulf %v, %two : f16
      %s = gpu.subgroup_reduce add %d : (f16) -> f16
      %first = arith.cmpi eq, %i, %c0 : index
      scf.if %first {
        memref.store %s, %total[%c0] : memref<1xf16>
      }
      gpu.return
    }
  }
}
