// Parsing and validating a spec: the kernel interface of each function.
#ifndef ATTNC_CODEGEN_SPEC_H
#define ATTNC_CODEGEN_SPEC_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace attnc {

/// One pointer argument of an exported entry point.
struct KernelArg {
  std::string name;           // a C identifier
  std::vector<int64_t> shape; // row-major, contiguous
  std::string dtype;          // f32, f16, bf16, i32, i64
  bool isOutput = false;
  /// An input the kernel writes into (the cache of an attn.append).
  bool updatedInPlace = false;
  /// Its first dimension is the spec's dynamic batch (`?`): `shape` is one
  /// batch entry's (a first dimension of the batch the spec was parsed
  /// for), and the entry point takes the batch size after the tensors.
  bool batched = false;
  /// An output without the batch of a kernel with one: the gradient of an
  /// input without it, summed over the batch's entries.
  bool summedOverBatch = false;
  /// What the argument holds, for the header's comment; set for the saved
  /// values of @f_fwd/@f_bwd ("the LSE of attention #0 (spec.mlir:6)").
  std::string description;
  /// An integer input whose entries the kernels bound (integerInputBounds:
  /// a cache's lengths, a block table, varlen's offsets): their largest
  /// value, and whether they must not decrease.
  std::optional<int64_t> maxValue;
  bool nondecreasing = false;
};

/// An exported entry point: inputs in order, then one output per result.
struct KernelSignature {
  std::string name;
  std::vector<KernelArg> args;
};

/// A parsed, verified and validated spec.
struct Spec {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<KernelSignature> kernels;
};

/// Parses the main buffer of `sourceMgr`, verifies it and checks that every
/// public function is a valid kernel (static tensors of supported types,
/// C-identifier names, only spec-level ops). Diagnostics go to the context's
/// handler. Argument names come from the SSA names in the source. A dynamic
/// batch (`?` first dimensions, DynamicBatch.h) becomes `batch`: 1 for the
/// compiler, the caller's size for a reference evaluation.
mlir::FailureOr<Spec> parseSpec(llvm::SourceMgr &sourceMgr,
                                mlir::MLIRContext &context, int64_t batch = 1);

/// Whether some kernel of `spec` takes a dynamic batch.
bool hasDynamicBatch(const Spec &spec);

/// After attn-derive-backward: appends the signatures of every kernel's
/// @f_fwd and @f_bwd to `spec.kernels`, named after @f's arguments: saved
/// values are saved<k> (each with its description), gradients d_<name>.
/// With a dynamic batch, marks @f_fwd and @f_bwd with attn.batch_slices
/// (and @f_bwd's gradients of inputs without the batch, summed over it,
/// with attn.batch_sums).
void appendDerivedSignatures(Spec &spec);

/// The C type of a dtype ("float", "uint16_t", ...).
std::string cTypeOf(const std::string &dtype);

} // namespace attnc

#endif // ATTNC_CODEGEN_SPEC_H
