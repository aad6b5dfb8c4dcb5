// A float64 interpreter of attn specs: the reference `attnc run` checks
// compiled kernels against, for any spec (regions included). The maths is
// Reference.h's; this file maps ops and regions onto it.
#ifndef ATTNC_TOOLS_REFERENCE_SPECINTERPRETER_H
#define ATTNC_TOOLS_REFERENCE_SPECINTERPRETER_H

#include "tools/reference/Reference.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <memory>
#include <vector>

namespace attnc {
namespace attn {
class AttentionOp;
} // namespace attn

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
/// located error for an op it cannot evaluate. `largestScore`, when given,
/// receives the largest finite |score| a score_mod took or gave.
mlir::FailureOr<std::vector<HostTensor>>
interpretSpec(mlir::func::FuncOp func, const std::vector<HostTensor> &inputs,
              bool roundResults = false, double *largestScore = nullptr);

/// One attn.attention op as the float64 reference evaluates it on given
/// inputs: its Q, K and V (the ops before it interpreted as interpretSpec
/// does with roundResults), its scale, and its masks and score_mod as
/// Reference.h's callbacks (regions evaluated in float64 on the values of
/// their captures). The callbacks use `state`: they are valid while a copy
/// of this object lives.
struct InterpretedAttention {
  ref::AttentionShape shape;
  double scale = 1;
  HostTensor query, key, value;
  ref::MaskSpec mask;
  ref::ScoreMod scoreMod;
  std::shared_ptr<const void> state;
};

/// Interprets `func` on `inputs` up to `op`, an attn.attention of its body
/// (not nested), and returns `op` as it evaluates there. Emits a located
/// error for an op before it that it cannot evaluate, or for an `op` that
/// is not in the body.
mlir::FailureOr<InterpretedAttention>
interpretAttention(mlir::func::FuncOp func, attn::AttentionOp op,
                   const std::vector<HostTensor> &inputs);

} // namespace attnc

#endif // ATTNC_TOOLS_REFERENCE_SPECINTERPRETER_H
