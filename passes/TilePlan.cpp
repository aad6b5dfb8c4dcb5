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

int64_t maxBackwardKeyBlock(int64_t d, int64_t dv) {
  int64_t keys = 128;
  while (keys > 32 && keys * (d + dv) > (int64_t(1) << 15))
    keys /= 2;
  return keys;
}

bool usesAmxTiles(Operation *op, const TileTarget &target) {
  auto fwd = dyn_cast<attn::AttentionOp>(op);
  if (!target.amx || !fwd)
    return false;
  auto shape = [](Value v) { return cast<ShapedType>(v.getType()); };
  for (Value v : {fwd.getQuery(), fwd.getKey(), fwd.getValue()})
    if (!shape(v).getElementType().isBF16())
      return false;
  return shape(fwd.getQuery()).getShape()[3] % 32 == 0 &&
         shape(fwd.getValue()).getShape()[3] % 16 == 0;
}

TilePlan planTiles(Operation *op, const TileTarget &target) {
  TilePlan plan;
  // The microkernels hold 2 * rows vectors of 16 floats as accumulators,
  // plus two operand vectors and a broadcast: up to 14 rows fit AVX-512's
  // 32 registers; a 256-bit vector<16xf32> takes two of AVX2's 16
  // registers, a 128-bit one four. Measured (interleaved A/B): on AVX-512
  // (S=2048, 2 threads), 12 rows ran 4-5% faster than 8 forward and 4-6%
  // backward at D=64 and 128, causal or not; 10 and 14 within 3% of 12,
  // 16 (spills) 48% slower; the cost: 19% more instructions to compile
  // the mha_causal example (callgrind, attnc compile for sapphirerapids;
  // not unrolling the products' loops would take that back but ran the
  // D=64 forward 3% slower); on x86-64-v3 (S=1024, D=64), 3 rows ran 19%
  // faster than 2, 32% than 4, 28% than 6 and (backward) 23% than 8; on
  // x86-64, 1 row 5% faster than 2 and 7% than 8.
  int64_t maxRows = target.vectorBits >= 512   ? 12
                    : target.vectorBits >= 256 ? 3
                                               : 1;
  // heads: B * H of a forward (its query tiles decide the query block).
  int64_t sq = 0, skv = 0, visible = 0, heads = 0, maxKeyBlock = kMaxKeyBlock;
  if (auto fwd = dyn_cast<attn::AttentionOp>(op)) {
    ArrayRef<int64_t> q = cast<ShapedType>(fwd.getQuery().getType()).getShape();
    sq = q[2];
    heads = q[0] * q[1];
    skv = cast<ShapedType>(fwd.getKey().getType()).getShape()[2];
    visible = visibleKeys(fwd);
  } else if (auto grad = dyn_cast<attn::AttentionGradOp>(op)) {
    sq = cast<ShapedType>(grad.getQuery().getType()).getShape()[2];
    skv = cast<ShapedType>(grad.getKey().getType()).getShape()[2];
    visible = visibleKeys(grad);
    // Key blocks of 128 keys ran the backward 3-7% faster than 32 at
    // S = 2048 and D = 128 (64: 6%, 256: 3-7%), 3% at D = 128 causal and
    // at D = 64, within noise at D = 64 causal (2 threads, interleaved A/B
    // of AOT builds): each dQ row is loaded and stored once per block
    // rather than per 32 keys.
    maxKeyBlock = maxBackwardKeyBlock(
        cast<ShapedType>(grad.getQuery().getType()).getShape()[3],
        cast<ShapedType>(grad.getValue().getType()).getShape()[3]);
  }
  // The keys a tile of r rows sees at most (a window slides by a key per
  // row), in whole 32-key tiles.
  auto tileKeys = [&](int64_t r) {
    return (std::min(visible + r - 1, skv) + 31) / 32 * 32;
  };
  if (sq > 0) {
    // As few tiles as maxRows allows, of rows as even as they can be: the
    // rows past Sq only repeat its last row (Sq = 13: 2 tiles of 7, not 12
    // and 1 + 11 copies).
    int64_t tiles = (sq + maxRows - 1) / maxRows;
    plan.rows = (sq + tiles - 1) / tiles;
  } else {
    // Projections and merges (GEMMs over B * S rows) keep 8 on AVX-512:
    // 12 was not measured faster there (the MHA layer's forward and
    // backward within noise).
    plan.rows = std::min<int64_t>(maxRows, 8);
  }
  int64_t queryTiles = heads ? heads * ((sq + plan.rows - 1) / plan.rows) : 1;
  // Up to 8 query tiles per task share each key block read from L2 (at
  // S=2048 and D=128 on AVX-512, 4 tiles ran 22% faster than 1, and 8 8%
  // faster than 4; 16 2% more), keeping 64 tasks or more for the pool.
  plan.queryBlock =
      plan.rows * std::clamp<int64_t>(queryTiles / 64, 1, 8);
  // The keys a query tile sees, in whole 32-key tiles: larger steps share
  // the per-row softmax work (reductions, the rescale of O) among more
  // keys; 256 ran 2-3% faster than 128 at D=64 and 4% at D=128 (S=2048,
  // causal: the same), 128 3-6% faster than 64 and 64 4-8% faster than 32
  // (forward, interleaved A/B on AVX-512), while a sliding window needs no
  // more than it spans. 512 gained nothing at D=64.
  plan.keyBlock = std::clamp<int64_t>(tileKeys(plan.rows), 32, maxKeyBlock);
  // On AMX: tiles of 16 query rows by 16 keys, up to 16 per step (256
  // keys: the per-row softmax work shared among 4 times more keys than
  // with 64-key steps ran the bf16 forward 13-18% faster at S=2048, D=64
  // and 128, causal or not; 128-key steps 11% faster at D=64).
  if (usesAmxTiles(op, target)) {
    plan.queryBlock = plan.queryBlock / plan.rows * kAmxRows;
    plan.rows = kAmxRows;
    plan.keyBlock =
        std::clamp<int64_t>(tileKeys(kAmxRows), 32, kMaxAmxKeyBlock);
  }
  return plan;
}

FailureOr<std::optional<TilePlan>> readTilePlan(Operation *op) {
  Attribute attr = op->getAttr(kTilePlanAttrName);
  if (!attr)
    return std::optional<TilePlan>();
  auto dict = dyn_cast<DictionaryAttr>(attr);
  auto get = [&](StringRef name) {
    return dict ? dict.getAs<IntegerAttr>(name) : IntegerAttr();
  };
  IntegerAttr rows = get("rows"), queryBlock = get("query_block"),
              keyBlock = get("key_block");
  if (!rows || !queryBlock || !keyBlock || dict.size() != 3)
    return op->emitError()
           << "'" << kTilePlanAttrName
           << "' must be {rows = R, query_block = Q, key_block = K}, got "
           << attr;
  TilePlan plan{rows.getInt(), queryBlock.getInt(), keyBlock.getInt()};
  if (plan.rows < 1 || plan.rows > kMaxTileRows)
    return op->emitError() << "tile plan rows must be in [1, " << kMaxTileRows
                           << "], got " << plan.rows;
  if (plan.queryBlock < plan.rows || plan.queryBlock % plan.rows ||
      plan.queryBlock > kMaxQueryTiles * plan.rows)
    return op->emitError()
           << "tile plan query_block must be 1 to " << kMaxQueryTiles
           << " times rows (" << plan.rows << "), got " << plan.queryBlock;
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
                   b.getNamedAttr("query_block",
                                  b.getI64IntegerAttr(plan.queryBlock)),
                   b.getNamedAttr("key_block",
                                  b.getI64IntegerAttr(plan.keyBlock))}));
}

} // namespace attnc
