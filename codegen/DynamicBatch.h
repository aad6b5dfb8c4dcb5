// A spec's dynamic batch: `?` as the first dimension of a kernel's tensors.
//
// The kernels are compiled for one batch entry: the spec is specialized to
// a batch of 1 before anything else sees it, and the entry point loops over
// the caller's entries (attn-batch-entries), each one a call of the
// one-entry kernel on its slices of the batched tensors. Batch entries are
// independent in every attn op (their tasks are split per entry anyway), so
// the result is the static kernel's at every batch size, and one object
// serves them all; the backward's gradients of inputs without the batch
// are summed over the entries (attn.batch_sums). What would couple the
// entries otherwise is rejected with a located error: a result without the
// batch (a sum or mean over it), a region that computes with its batch
// index beyond reading its own entry of a batched capture, and appends to a
// paged cache (whose pages the entries may share).
#ifndef ATTNC_CODEGEN_DYNAMICBATCH_H
#define ATTNC_CODEGEN_DYNAMICBATCH_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace attnc {

/// Whether `type` is a tensor whose first dimension is the dynamic batch.
bool isBatchedType(mlir::Type type);

/// Checks the dynamic dimensions of every tensor in `module` (only the
/// first may be `?`) and what a per-entry kernel needs of the functions
/// that use one, marks each public such function with attn.batch_slices
/// (its arguments and results at one batch entry), and replaces every `?`
/// batch by `batch`; returns whether there was one. Diagnostics go to the
/// context; the module is not verified yet (it is parsed without
/// verification, which follows).
mlir::FailureOr<bool> specializeBatch(mlir::ModuleOp module, int64_t batch);

/// The bytes of one batch entry of a specialized tensor of `type` (its
/// elements past the first dimension).
int64_t batchSliceBytes(mlir::Type type);

} // namespace attnc

#endif // ATTNC_CODEGEN_DYNAMICBATCH_H
