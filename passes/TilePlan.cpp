// Tile plans (see TilePlan.h).
#include "passes/TilePlan.h"

#include "dialect/AttnOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace attnc {

namespace {

/// The keys one query row can see at most: Skv, or the window.
template <typename OpTy> int64_t visibleKeys(OpTy op) {
  int64_t skv = cast<ShapedType>(op.getKey().getType()).getShape()[2];
  if (std::optional<uint64_t> window = op.getWindow())
    return std::min<int64_t>(skv, int64_t(*window));
  return skv;
}

} // namespace

TilePlan planTiles(Operation *op, const TileTarget &target) {
  TilePlan plan;
  // The microkernels hold 2 * rows vectors of 16 floats as accumulators,
  // plus two operand vectors and a broadcast: 8 rows fill AVX-512's 32
  // registers; a 256-bit vector<16xf32> takes two of AVX2's 16 registers,
  // a 128-bit one four. Measured (interleaved A/B, S=1024, D=64): on
  // x86-64-v3, 3 rows ran 19% faster than 2, 32% than 4, 28% than 6 and
  // (backward) 23% than 8; on x86-64, 1 row 5% faster than 2 and 7% than 8.
  plan.rows = target.vectorBits >= 512 ? 8 : target.vectorBits >= 256 ? 3 : 1;
  int64_t visible = 0;
  if (auto fwd = dyn_cast<attn::AttentionOp>(op))
    visible = visibleKeys(fwd);
  else if (auto grad = dyn_cast<attn::AttentionGradOp>(op))
    visible = visibleKeys(grad);
  // The keys a query tile sees, in whole 32-key tiles: larger steps share
  // the per-row softmax work (reductions, the rescale of O) among more
  // keys; 128 ran 3-6% faster than 64 and 64 4-8% faster than 32 (forward,
  // interleaved A/B on AVX-512), while a sliding window needs no more than
  // it spans.
  int64_t span = visible + plan.rows - 1;
  plan.keyBlock = std::clamp<int64_t>((span + 31) / 32 * 32, 32, kMaxKeyBlock);
  return plan;
}

FailureOr<std::optional<TilePlan>> readTilePlan(Operation *op) {
  Attribute attr = op->getAttr(kTilePlanAttrName);
  if (!attr)
    return std::optional<TilePlan>();
  auto dict = dyn_cast<DictionaryAttr>(attr);
  auto rows = dict ? dict.getAs<IntegerAttr>("rows") : IntegerAttr();
  auto keyBlock = dict ? dict.getAs<IntegerAttr>("key_block") : IntegerAttr();
  if (!rows || !keyBlock || dict.size() != 2)
    return op->emitError() << "'" << kTilePlanAttrName
                           << "' must be {rows = R, key_block = K}, got "
                           << attr;
  TilePlan plan{rows.getInt(), keyBlock.getInt()};
  if (plan.rows < 1 || plan.rows > kMaxTileRows)
    return op->emitError() << "tile plan rows must be in [1, " << kMaxTileRows
                           << "], got " << plan.rows;
  if (plan.keyBlock < 32 || plan.keyBlock > kMaxKeyBlock ||
      plan.keyBlock % 32)
    return op->emitError()
           << "tile plan key_block must be a multiple of 32 in [32, "
           << kMaxKeyBlock << "], got " << plan.keyBlock;
  return std::optional<TilePlan>(plan);
}

void writeTilePlan(Operation *op, const TilePlan &plan) {
  Builder b(op->getContext());
  op->setAttr(kTilePlanAttrName,
              b.getDictionaryAttr(
                  {b.getNamedAttr("rows", b.getI64IntegerAttr(plan.rows)),
                   b.getNamedAttr("key_block",
                                  b.getI64IntegerAttr(plan.keyBlock))}));
}

} // namespace attnc
