// The float64 evaluation of a score_mod or mask_mod region, for the
// reference of attnc run.
#ifndef ATTNC_TOOLS_REFERENCE_REGIONEVALUATOR_H
#define ATTNC_TOOLS_REFERENCE_REGIONEVALUATOR_H

#include "tools/reference/SpecInterpreter.h"

#include "mlir/IR/Region.h"
#include "llvm/ADT/APInt.h"
#include "llvm/ADT/DenseMap.h"

#include <vector>

namespace attnc {

/// Evaluates a region's scalar code for one (b, h, i, j): floats in
/// float64 (the reference's precision for f32 and f64 code), integers,
/// indices and i1 exactly at their width, through the ops' own folders
/// (MLIR's semantics for wrapping, unsigned and shifted arithmetic), and
/// scf's control flow. With `rounding`, each f16 or bf16 result is rounded
/// to its type, as the kernels compute it (the forward's reference);
/// without, truncf passes its value through, as the derived backward does
/// (straight through), for the loss whose central differences judge it.
class RegionEvaluator {
public:
  RegionEvaluator(mlir::Region &region,
                  std::vector<const HostTensor *> captures, bool rounding)
      : region(region), captures(std::move(captures)), rounding(rounding) {}

  /// Checks once that every op, nested ones included, can be evaluated;
  /// else a located error.
  mlir::LogicalResult check();

  /// The region's yielded value (a float, or an i1 as 0 or 1) for its
  /// leading arguments: the score (score_mod only), then b, h, i, j.
  double evaluate(llvm::ArrayRef<double> leading);

  /// A scalar: a float as a double, or an integer of any width.
  struct Scalar {
    double f = 0;
    llvm::APInt i;
  };

private:
  /// Runs `block` on `args`; returns its terminator's operands.
  llvm::SmallVector<Scalar> run(mlir::Block &block,
                                llvm::ArrayRef<Scalar> args);
  /// Sets the results of one op.
  void step(mlir::Operation &op);
  llvm::SmallVector<Scalar> runRegion(mlir::Region &r,
                                      llvm::ArrayRef<Scalar> args) {
    return run(r.front(), args);
  }
  Scalar get(mlir::Value v) const { return values.lookup(v); }
  double floatOf(mlir::Operation &op, double a, double b, double c);
  void foldIntegers(mlir::Operation &op);

  mlir::Region &region;
  std::vector<const HostTensor *> captures;
  bool rounding;
  llvm::DenseMap<mlir::Value, Scalar> values;
};

} // namespace attnc

#endif // ATTNC_TOOLS_REFERENCE_REGIONEVALUATOR_H
