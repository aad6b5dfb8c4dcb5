// Kernels for the Vulkan runtime's tests (VulkanRuntimeTest.cpp), compiled
// to SPIR-V at build time by MLIR's own mlir-opt and mlir-translate (see
// test/unit/CMakeLists.txt). Each kernel's buffers are bound at descriptor
// set 0, bindings 0, 1, ... in argument order; its entry point is its name.
module attributes {gpu.container_module} {
  gpu.module @kernels attributes {spirv.target_env = #spirv.target_env<
      #spirv.vce<v1.3, [Shader, GroupNonUniform, GroupNonUniformArithmetic],
                 [SPV_KHR_storage_buffer_storage_class]>,
      #spirv.resource_limits<subgroup_size = 8>>} {
    // out[i] = 2 * x[i] + y[i] for i < 1000, on ceil(1000 / 64) workgroups.
    gpu.func @axpy(%x: memref<1000xf32>, %y: memref<1000xf32>,
                   %out: memref<1000xf32>) kernel
        attributes {spirv.entry_point_abi =
                    #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>} {
      %n = arith.constant 1000 : index
      %two = arith.constant 2.0 : f32
      %i = gpu.global_id x
      %in = arith.cmpi ult, %i, %n : index
      scf.if %in {
        %a = memref.load %x[%i] : memref<1000xf32>
        %b = memref.load %y[%i] : memref<1000xf32>
        %ax = arith.mulf %a, %two : f32
        %r = arith.addf %ax, %b : f32
        memref.store %r, %out[%i] : memref<1000xf32>
      }
      gpu.return
    }

    // sums[w] = x[64 w] + ... + x[64 w + 63] on 16 workgroups of 64: each
    // subgroup reduces its values, its first lane stores the sum in
    // workgroup memory, and after a barrier thread 0 adds the subgroups'
    // sums. Workgroup 0 also stores the subgroup size in info[0].
    gpu.func @block_sums(%x: memref<1024xf32>, %sums: memref<16xf32>,
                         %info: memref<1xi32>) kernel
        attributes {spirv.entry_point_abi =
                    #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %zero = arith.constant 0.0 : f32
      %partial = memref.alloc() : memref<64xf32, 3>
      %t = gpu.thread_id x
      %i = gpu.global_id x
      %w = gpu.block_id x
      %lane = gpu.lane_id
      %subgroup = gpu.subgroup_id : index
      %subgroups = gpu.num_subgroups : index
      %v = memref.load %x[%i] : memref<1024xf32>
      %s = gpu.subgroup_reduce add %v : (f32) -> f32
      %first_lane = arith.cmpi eq, %lane, %c0 : index
      scf.if %first_lane {
        memref.store %s, %partial[%subgroup] : memref<64xf32, 3>
      }
      gpu.barrier
      %first_thread = arith.cmpi eq, %t, %c0 : index
      scf.if %first_thread {
        %total = scf.for %k = %c0 to %subgroups step %c1
            iter_args(%acc = %zero) -> (f32) {
          %p = memref.load %partial[%k] : memref<64xf32, 3>
          %sum = arith.addf %acc, %p : f32
          scf.yield %sum : f32
        }
        memref.store %total, %sums[%w] : memref<16xf32>
        %first_group = arith.cmpi eq, %w, %c0 : index
        scf.if %first_group {
          %size = gpu.subgroup_size : index
          %size32 = arith.index_cast %size : index to i32
          memref.store %size32, %info[%c0] : memref<1xi32>
        }
      }
      gpu.return
    }
  }
}
