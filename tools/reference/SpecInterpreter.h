// A float64 interpreter of attn specs: the reference `attnc run` checks
// compiled kernels against, for any spec (regions included). The maths is
// Reference.h's; this file maps ops and regions onto it.
#ifndef ATTNC_TOOLS_REFERENCE_SPECINTERPRETER_H
#define ATTNC_TOOLS_REFERENCE_SPECINTERPRETER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <vector>

namespace attnc {

/// A dense row-major tensor of float64 values (integers stored exactly).
struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;
};

/// Evaluates `func` (attn ops, arith.constant, func.return; score_mod and
/// mask_mod regions of scalar arith/math code and tensor.extract) in
/// float64 on `inputs`. With `roundResults`, each op's f16/bf16 results
/// are rounded to their type, as the spec stores them (a projection's bf16
/// Q); without, the function is smooth (for central differences). Emits a
/// located error for an op it cannot evaluate.
mlir::FailureOr<std::vector<HostTensor>>
interpretSpec(mlir::func::FuncOp func, const std::vector<HostTensor> &inputs,
              bool roundResults = false);

} // namespace attnc

#endif // ATTNC_TOOLS_REFERENCE_SPECINTERPRETER_H
