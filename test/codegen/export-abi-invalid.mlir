// RUN: attnc-opt %s -split-input-file -attn-export-abi -verify-diagnostics

// What attn-export-abi refuses: results (not yet out-parameters) and
// arguments that are not statically shaped, row-major memrefs.

// expected-error @+1 {{attn-export-abi expects results passed as out-parameters (run buffer-results-to-out-params first)}}
func.func @results(%a: memref<4xf32>) -> memref<4xf32> {
  return %a : memref<4xf32>
}

// -----

// expected-error @+1 {{kernel arguments must be statically shaped, row-major buffers; got 'memref<?xf32>'}}
func.func @dynamic(%a: memref<?xf32>) {
  return
}

// -----

// expected-error @+1 {{kernel arguments must be statically shaped, row-major buffers; got 'memref<4x4xf32, strided<[8, 1]>>'}}
func.func @strided(%a: memref<4x4xf32, strided<[8, 1]>>) {
  return
}

// -----

// expected-error @+1 {{kernel arguments must be statically shaped, row-major buffers; got 'f32'}}
func.func @scalar(%a: memref<4xf32>, %x: f32) {
  return
}

// -----

// expected-error @+1 {{kernel arguments must be statically shaped, row-major buffers; got 'tensor<4xf32>'}}
func.func @tensor(%a: tensor<4xf32>) {
  return
}
