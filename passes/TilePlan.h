// Tile plans of the fused attention ops: how many query rows a task owns
// (register blocking), how many a task owns (they share each key block
// read) and how many keys one online-softmax step covers. attn-plan-tiles
// chooses them for a target and records them on the op as
// `attn.tile_plan = {rows = R, query_block = Q, key_block = K}`; the
// lowerings read them (and plan with defaults where an op carries none).
// The GPU back end can read the same plan: query_block and key_block are
// its thread block's tiles, rows a warp's.
#ifndef ATTNC_PASSES_TILEPLAN_H
#define ATTNC_PASSES_TILEPLAN_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

namespace attnc {

struct TilePlan {
  /// Query rows of a register block.
  int64_t rows = 8;
  /// Query rows per task of the forward, a multiple of rows: the tiles of
  /// a task visit each key block together while it is in cache.
  int64_t queryBlock = 64;
  /// Keys per online-softmax step of the forward, a multiple of 32; of
  /// the backward, the keys whose dK and dV one task step computes.
  int64_t keyBlock = 128;
};

/// What the plan depends on in the target.
struct TileTarget {
  /// Width of the vector registers: 512 (AVX-512), 256 (AVX2), 128.
  int64_t vectorBits = 512;
  /// AMX tiles with bf16 products (amx-tile, amx-bf16).
  bool amx = false;
};

inline constexpr llvm::StringLiteral kTilePlanAttrName = "attn.tile_plan";
inline constexpr int64_t kMaxTileRows = 16, kMaxKeyBlock = 256,
                         kMaxQueryTiles = 16;
/// The rows and keys of an AMX tile of f32 scores, and the most keys of an
/// AMX step (its scores 4 tiles at a time: with A and B, AMX has 8 tile
/// registers).
inline constexpr int64_t kAmxRows = 16, kMaxAmxKeyBlock = 256;

/// The most keys a backward key block of keys D and values Dv wide takes:
/// 128, halved while keys * (D + Dv) exceeds 2^15 floats (its per-thread
/// scratch, on the stack, then stays under about 0.5 MB).
int64_t maxBackwardKeyBlock(int64_t d, int64_t dv);

/// Whether the forward of `op` runs on AMX tiles on `target`: bf16 Q, K
/// and V, D a multiple of 32 and Dv of 16 (whole tiles).
bool usesAmxTiles(mlir::Operation *op, const TileTarget &target);

/// The plan for an attn.attention or attn.attention_grad op on `target`.
TilePlan planTiles(mlir::Operation *op, const TileTarget &target);

/// The plan recorded on `op`, if any; emits an error at the op and fails
/// when the attribute is malformed (rows outside [1, 16], query_block not
/// 1 to 16 times rows, key_block not a positive multiple of 32 up to 256).
mlir::FailureOr<std::optional<TilePlan>> readTilePlan(mlir::Operation *op);
void writeTilePlan(mlir::Operation *op, const TilePlan &plan);

} // namespace attnc

#endif // ATTNC_PASSES_TILEPLAN_H
