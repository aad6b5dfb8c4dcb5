// The CPU tile planner (see TilePlan.h).
#include "passes/TilePlan.h"

#include "dialect/AttnOps.h"
#include "dialect/ShapeUtils.h"
#include "passes/ScalarGradients.h"

using namespace mlir;

namespace attnc {

namespace {

using attn::CpuPlanAttr;

/// The keys one query row can see at most: Skv, or the window.
template <typename OpTy> int64_t visibleKeys(OpTy op) {
  int64_t skv = attn::keyCountOf(op);
  if (std::optional<uint64_t> window = op.getWindow())
    return std::min<int64_t>(skv, int64_t(*window));
  return skv;
}

/// The most keys a backward key block of keys D and values Dv wide takes:
/// 128, halved while keys * (D + Dv) exceeds 2^15 floats (its per-thread
/// scratch then stays under about 0.5 MB).
int64_t maxBackwardKeyBlock(int64_t d, int64_t dv) {
  int64_t keys = 128;
  while (keys > 32 && keys * (d + dv) > (int64_t(1) << 15))
    keys /= 2;
  return keys;
}

/// Whether the forward of `op` runs on AMX tiles on `target`: bf16 Q, K
/// and V, D a multiple of 32 and Dv of 16 (whole tiles), and at least 4
/// query rows a head (the backward: 4 tiles of 16). A head of 8 query
/// tiles or fewer (below) is one task, which pairs each key block into its
/// scratch, as every task over a paged cache does; longer ones copy K and
/// V whole into pairs once per call, shared by their tasks, up to 16 MiB
/// of copies (past it each task pairs its key blocks too). (With a whole
/// copy per call at every Sq, a bf16 GQA decode step, B=4, H=32, Hkv=8,
/// Sq=1, Skv=4096, D=128, had run in 37.6 ms on AMX, +64 MB, and 9.9 ms on
/// AVX-512, +0.5 MB.) Pairing per block, against the f32 FMAs that steps
/// of 4 to 15 rows took before (B=4, H=32, Skv=4096, D=128, 2 threads, 9
/// interleaved rounds, min): GQA (Hkv=8) Sq=4 13.4 -> 12.2 ms, Sq=8 20.5
/// -> 12.4, Sq=16 32.4 -> 12.3; MHA Sq=4 26.5 -> 23.2, Sq=8 34.6 -> 26.0.
/// Below 4 rows AMX loses (GQA Sq=1 11.0 ms, Sq=2 11.1, MHA Sq=1 23.3,
/// against the dot products' 6.6, 8.9 and 18.3): a tile's 16 rows are then
/// mostly empty. Such steps take f32 FMAs on AMX CPUs (usesDotBf16).
bool usesAmxTiles(Operation *op, const CpuTarget &target) {
  auto fwd = dyn_cast<attn::AttentionOp>(op);
  auto grad = dyn_cast<attn::AttentionGradOp>(op);
  // The statistics kernel's Q K^T too (bf16, at S=16384 its products
  // on FMAs were half its time).
  auto stats = dyn_cast<attn::AttentionStatsOp>(op);
  if (!target.amx || (!fwd && !grad && !stats))
    return false;
  Value q = op->getOperand(0), k = op->getOperand(1);
  if (shapeOf(q)[2] < (fwd ? 4 : 4 * attn::CpuPlanAttr::kAmxRows) ||
      !elementTypeOf(q).isBF16() || !elementTypeOf(k).isBF16() ||
      shapeOf(q)[3] % 32 != 0)
    return false;
  if (stats)
    return true;
  Value v = op->getOperand(2);
  return elementTypeOf(v).isBF16() && shapeOf(v)[3] % (grad ? 32 : 16) == 0;
}

/// Whether the forward or backward of `op` multiplies with AVX-512 BF16
/// dot products on `target` (vdpbf16ps: a pair of bf16 products into each
/// f32 lane): where it has them, for bf16 Q, K and V (O and dO are V's
/// type), D and Dv multiples of 16. The forward where there is no AMX, at
/// any Sq (decoding steps pair each key block in their task); not on AMX
/// CPUs (Intel's, whose vdpbf16ps runs at half the FMAs' FLOP rate: 137
/// against 269 GFLOP/s measured), where steps of 4 rows or more take AMX
/// tiles and shorter ones f32 FMAs on converted bf16, which read K's and
/// V's rows where they lie (direct scores up to 4 rows a KV head, V in
/// place) rather than pairing them: on the 2-core Xeon (H=32, Skv=4096,
/// D=128, 2 threads, AOT host, min of 10-20, two runs) against the dot
/// products, B=1 GQA steps with Hkv=4, 8 and 16 took 0.39 / 0.55 / 0.87
/// ms against 0.57 / 0.72 / 1.20 (V still copied per block), and with V in
/// place MHA Sq=1 1.05 against 1.73 ms, at Skv=16384 9.0 against 9.2-9.8
/// and at B=4 8.0-8.5 against 9.1-10.2. The backward from 64 query rows,
/// where it does not take AMX tiles.
bool usesDotBf16(Operation *op, const CpuTarget &target) {
  auto fwd = dyn_cast<attn::AttentionOp>(op);
  auto grad = dyn_cast<attn::AttentionGradOp>(op);
  if (!target.dotBf16 || target.vectorBits < 512 || (!fwd && !grad) ||
      (fwd && target.amx))
    return false;
  Value q = op->getOperand(0), k = op->getOperand(1), v = op->getOperand(2);
  return (fwd || shapeOf(q)[2] >= 4 * attn::CpuPlanAttr::kAmxRows) &&
         elementTypeOf(q).isBF16() && elementTypeOf(k).isBF16() &&
         elementTypeOf(v).isBF16() && shapeOf(q)[3] % 16 == 0 &&
         shapeOf(v)[3] % 16 == 0;
}

/// The backward's dK/dV tasks per (batch, KV head): split s takes key
/// blocks s, s + splits, ... (interleaved, so that causal masks balance)
/// and accumulates dQ over them in its own f32 copy, the copies summed in
/// split order afterwards (deterministic for any thread count). Enough
/// splits for 32 tasks, no more than the key blocks, at most 64 MB of
/// copies, and at most one per 1024 keys a query row sees: each copy costs
/// memory traffic per query row (zeroing, accumulating, the final sum) that
/// only that much work hides. Measured on 2 threads (B = 1, H = 8, D = 64,
/// interleaved A/B): with a 256-key window and 2 KV heads, 1 split ran 2x
/// as fast as 16; at S = 2048, 1 split ran 9% faster than 4 causal, and 2
/// splits 4% faster than 4 without a mask (1.5-4% faster than at one per
/// 512 keys).
/// The floats of one of the backward's f32 dQ copies ([B, H, query tiles
/// x rows, D]).
static int64_t dqCopyFloats(attn::AttentionGradOp op, int64_t rows) {
  ArrayRef<int64_t> q = shapeOf(op.getQuery());
  return q[0] * q[1] * ((q[2] + rows - 1) / rows) * rows * q[3];
}

int64_t backwardSplits(attn::AttentionGradOp op, int64_t rows,
                       int64_t keyBlock) {
  ArrayRef<int64_t> q = shapeOf(op.getQuery());
  int64_t hkv = shapeOf(op.getKey())[1], skv = shapeOf(op.getKey())[2];
  int64_t copyFloats = dqCopyFloats(op, rows);
  int64_t splits = std::min<int64_t>((32 + q[0] * hkv - 1) / (q[0] * hkv),
                                     (skv + keyBlock - 1) / keyBlock);
  // Keys a query row sees on average, at most (Sq = Skv when causal).
  int64_t visibleKeys = op.getWindow() ? std::min<int64_t>(*op.getWindow(), skv)
                        : op.getCausal() ? (skv + 1) / 2
                                         : skv;
  splits = std::min<int64_t>(splits, visibleKeys / 1024);
  while (splits > 1 && splits * copyFloats > (int64_t(1) << 24))
    --splits;
  return std::max<int64_t>(splits, 1);
}

/// The backward's splits, and whether its tasks are those splits over
/// every (batch, KV head) (key_tasks) rather than one per (batch, KV head,
/// split). Float score captures' gradients take a partial copy per task,
/// except, with key tasks, those read at their keys (isReadAtItsKey: a
/// [Sq, Skv] bias), which take one; key tasks take a dQ copy per split
/// instead: as many as the pairs' tasks, at least 8 and at most 16, no
/// more than the key blocks. Chosen where those copies and the captures'
/// take fewer floats than the pairs' (memory and traffic), and leave as
/// many tasks as one per pair would (up to 16). bf16,
/// B=1, H=8, S=2048, D=64, causal, a [Sq, Skv] f32 bias, 2 threads on Zen
/// 5, AOT, medians of 10 interleaved rounds: the backward in 20.1 ms on 8
/// key tasks, 20.9 on 16 (4 were about 15% slower in an earlier run); 34-36
/// ms before, with a task and a copy of the bias per pair and Delta's exact
/// pass (which FlashBackward.cpp no longer takes for such a bias).
std::pair<int64_t, bool> backwardTasks(attn::AttentionGradOp op, int64_t rows,
                                       int64_t keyBlock) {
  int64_t splits = backwardSplits(op, rows, keyBlock);
  ArrayRef<int64_t> q = shapeOf(op.getQuery());
  int64_t hkv = shapeOf(op.getKey())[1], skv = attn::keyCountOf(op);
  int64_t copyFloats = dqCopyFloats(op, rows);
  int64_t atKeys = 0, others = 0;
  for (auto [k, capture, grad] :
       llvm::enumerate(op.getScoreCaptures(), op.getScoreCapturesGrad())) {
    if (!isFloatTensor(capture) || grad.use_empty())
      continue;
    int64_t elements = cast<ShapedType>(capture.getType()).getNumElements();
    (isReadAtItsKey(op.getScoreMod(), k, skv) ? atKeys : others) += elements;
  }
  if (atKeys == 0)
    return {splits, false};
  int64_t pairTasks = q[0] * hkv * splits;
  int64_t tasks = std::min(std::clamp<int64_t>(pairTasks, 8, 16),
                           (skv + keyBlock - 1) / keyBlock);
  int64_t perPair = pairTasks * (atKeys + others) + splits * copyFloats,
          perSplit = tasks * (copyFloats + others) + atKeys;
  // Never fewer tasks for the pool than one per pair gives (up to 16).
  if (perSplit >= perPair || tasks < std::min<int64_t>(pairTasks, 16))
    return {splits, false};
  return {tasks, true};
}

/// Split-KV ("flash-decoding") of a forward whose (batch, KV head) pairs
/// are too few for the threads: each of them is split into this many key
/// ranges, taken by tasks of their own that write a partial (O, LSE), and
/// merged in split order afterwards (codegen/cpu/FlashForward.h; exact and
/// the same for any thread count). Only for forwards with a query block
/// per head (decoding and short chunks; `headTiles` query tiles): enough
/// splits for kSplitTasks tasks, at least kSplitKeys keys a query row sees
/// per split, and partial results of at most 4 MB.
int64_t forwardSplits(attn::AttentionOp op, int64_t headTiles) {
  constexpr int64_t kSplitTasks = 16, kSplitKeys = 1024;
  ArrayRef<int64_t> q = shapeOf(op.getQuery());
  int64_t pairs = q[0] * shapeOf(op.getKey())[1];
  // (8 pairs or more already make as many tasks of grouped heads: the
  // forward's kMinTasks, codegen/cpu/FlashForward.h.)
  if (headTiles > 8 || pairs >= kSplitTasks / 2)
    return 1;
  int64_t splits = std::min((kSplitTasks + pairs - 1) / pairs,
                            visibleKeys(op) / kSplitKeys);
  int64_t partBytes = q[0] * q[1] * q[2] * shapeOf(op.getValue())[3] * 4;
  splits = std::min<int64_t>(splits, (int64_t(4) << 20) / partBytes);
  return std::max<int64_t>(splits, 1);
}

} // namespace

CpuPlanAttr planCpuTiles(Operation *op, const CpuTarget &target, int64_t rows) {
  const int64_t rowsAsked = rows;
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
  int64_t sq = 0, skv = 0, visible = 0, heads = 0,
          maxKeyBlock = CpuPlanAttr::kMaxKeyBlock;
  auto fwd = dyn_cast<attn::AttentionOp>(op);
  auto grad = dyn_cast<attn::AttentionGradOp>(op);
  auto stats = dyn_cast<attn::AttentionStatsOp>(op);
  auto distill = dyn_cast<attn::DistillOp>(op);
  auto distillGrad = dyn_cast<attn::DistillGradOp>(op);
  auto statsGrad = dyn_cast<attn::AttentionStatsGradOp>(op);
  if (distill || distillGrad) {
    // As the statistics: rows and key blocks of a forward's, two score
    // blocks of 128 keys.
    Operation *raw = op;
    Value q = raw->getOperand(0), k = raw->getOperand(1);
    sq = shapeOf(q)[2];
    skv = shapeOf(k)[2];
    visible = distill ? visibleKeys(distill) : visibleKeys(distillGrad);
    maxKeyBlock = 128;
  } else if (statsGrad) {
    // As attn.distill_grad's (the same two passes, one side).
    sq = shapeOf(statsGrad.getQuery())[2];
    skv = shapeOf(statsGrad.getKey())[2];
    visible = visibleKeys(statsGrad);
    maxKeyBlock = 128;
  } else if (stats) {
    // Rows and key blocks as a forward's (no AMX, no query blocks: a task
    // is a cell of rows, see codegen/cpu/FlashStats.h); 128-key blocks
    // keep every head's P of a block (similarity) in L2.
    sq = shapeOf(stats.getQuery())[2];
    skv = shapeOf(stats.getKey())[2];
    visible = visibleKeys(stats);
    maxKeyBlock = 128;
  } else if (fwd) {
    ArrayRef<int64_t> q = shapeOf(fwd.getQuery());
    sq = q[2];
    heads = q[0] * q[1];
    // A GQA decoding step without regions: the kernel's query tiles are a
    // KV head's query heads (codegen/cpu/FlashForward.h, foldHeads), each
    // K and V vector loaded feeding an FMA per head: the step (f32, B=4,
    // H=32, Hkv=8, Skv=4096, D=128, 2 threads, AOT, three interleaved
    // pairs) ran in 11.6-12.1 ms against 14.8-14.9 ms with a tile per head.
    int64_t group = q[1] / shapeOf(fwd.getKey())[1];
    if (sq == 1 && group > 1 && fwd.getScoreMod().empty() &&
        fwd.getMaskMod().empty()) {
      sq = group;
      heads /= group;
    }
    skv = attn::keyCountOf(fwd);
    visible = visibleKeys(fwd);
  } else if (grad) {
    sq = shapeOf(grad.getQuery())[2];
    skv = shapeOf(grad.getKey())[2];
    visible = visibleKeys(grad);
    // Key blocks of 128 keys ran the backward 3-7% faster than 32 at
    // S = 2048 and D = 128 (64: 6%, 256: 3-7%), 3% at D = 128 causal and
    // at D = 64, within noise at D = 64 causal (2 threads, interleaved A/B
    // of AOT builds): each dQ row is loaded and stored once per block
    // rather than per 32 keys.
    maxKeyBlock = maxBackwardKeyBlock(shapeOf(grad.getQuery())[3],
                                      shapeOf(grad.getValue())[3]);
  }
  // The keys a tile of r rows sees at most (a window slides by a key per
  // row), in whole 32-key tiles.
  auto tileKeys = [&](int64_t r) {
    return (std::min(visible + r - 1, skv) + 31) / 32 * 32;
  };
  bool amx = usesAmxTiles(op, target) && rowsAsked == 0;
  bool dotBf16 = !amx && usesDotBf16(op, target) && rowsAsked == 0;
  if (rows > 0) {
    // Asked for (attn-plan-tiles{rows=N}: a testing and tuning aid).
  } else if (sq > 0) {
    // As few tiles as maxRows allows, of rows as even as they can be: the
    // rows past Sq only repeat its last row (Sq = 13: 2 tiles of 7, not 12
    // and 1 + 11 copies).
    int64_t tiles = (sq + maxRows - 1) / maxRows;
    rows = (sq + tiles - 1) / tiles;
    // The dot backward's transposed products take rows in pairs.
    if (dotBf16 && grad)
      rows += rows % 2;
  } else {
    // Projections and merges (GEMMs over B * S rows) keep 8 on AVX-512:
    // 12 was not measured faster there (the MHA layer's forward and
    // backward within noise).
    rows = std::min<int64_t>(maxRows, 8);
  }
  MLIRContext *context = op->getContext();
  if (!fwd && !grad && !stats && !statsGrad && !distill && !distillGrad)
    return CpuPlanAttr::get(context, rows, /*queryBlock=*/0, /*keyBlock=*/0,
                            /*amx=*/false, /*splits=*/1, /*dotBf16=*/false,
                            /*keyTasks=*/false);
  int64_t queryTiles = heads ? heads * ((sq + rows - 1) / rows) : 1;
  // Up to 8 query tiles per task share each key block read from L2 (at
  // S=2048 and D=128 on AVX-512, 4 tiles ran 22% faster than 1, and 8 8%
  // faster than 4; 16 2% more), keeping 64 tasks or more for the pool; 16
  // for forwards, whose tasks may pack each key block they visit
  // (codegen/cpu/FlashForward.h, packedBlocks): twice the tiles share each
  // packing. (On AMX, bf16, B=1, H=8, S=16384, D=128, 2 threads, 2 rounds:
  // packed with 8 tiles a task the forward took 750 ms against 700 ms with
  // per-call copies, with 16 tiles 691-711 ms, and causal 409 / 395 /
  // 386 ms; at S=2048, where the copies stay, 16 tiles ran as 8, within
  // 1-4%.)
  int64_t queryBlock =
      rows * std::clamp<int64_t>(queryTiles / 64, 1, fwd ? 16 : 8);
  // The keys a query tile sees, in whole 32-key tiles: larger steps share
  // the per-row softmax work (reductions, the rescale of O) among more
  // keys; 256 ran 2-3% faster than 128 at D=64 and 4% at D=128 (S=2048,
  // causal: the same), 128 3-6% faster than 64 and 64 4-8% faster than 32
  // (forward, interleaved A/B on AVX-512), while a sliding window needs no
  // more than it spans. 512 gained nothing at D=64.
  int64_t keyBlock = std::clamp<int64_t>(tileKeys(rows), 32, maxKeyBlock);
  // On AMX: tiles of 16 query rows by 16 keys, up to 16 per step (256
  // keys: the per-row softmax work shared among 4 times more keys than
  // with 64-key steps ran the bf16 forward 13-18% faster at S=2048, D=64
  // and 128, causal or not; 128-key steps 11% faster at D=64).
  // The backward's query tiles are 32 rows, two tiles of rows and one
  // reduction step of dK's and dV's products (codegen/cpu/FlashBackward.h).
  // A forward's of 64 query rows or more too: two tiles of rows share each
  // K and V tile loaded, and with several query tiles a task each tile's
  // Q K^T runs between the previous tile's softmax rows (FlashForward.h,
  // pipelined). bf16, B=1, H=8, S=2048, 1 thread, interleaved AOT calls,
  // min of 9-41: D=64 27.5 -> 24.0 ms (rows of 32 alone: 27.3 -> 25.2),
  // D=128 ~10% (under contention from the host's other tenants the gain
  // fell within noise); tiles of 32 rows without the pipeline gained 3-7%.
  if (amx) {
    int64_t amxRows =
        (grad || (fwd && sq >= 64) ? 2 : 1) * CpuPlanAttr::kAmxRows;
    queryBlock = queryBlock / rows * amxRows;
    rows = amxRows;
    keyBlock = std::clamp<int64_t>(tileKeys(rows), 32, maxKeyBlock);
  }
  // A head of 8 query tiles or fewer (decoding, short chunks) is one task:
  // its kernel then packs K and V a block at a time rather than copying
  // them whole per call (codegen/cpu/FlashForward.h, packedBlocks). At
  // Sq = 16, Skv = 4096 (B = 1, H = 32, D = 128, f32) the copy had taken
  // 129 MB and the step ran at 0.52x torch's SDPA.
  int64_t headTiles = (sq + rows - 1) / rows;
  if (fwd && sq > 0 && headTiles <= 8)
    queryBlock = rows * headTiles;
  auto [splits, keyTasks] =
      grad  ? backwardTasks(grad, rows, keyBlock)
      : fwd ? std::pair(forwardSplits(fwd, headTiles), false)
            : std::pair<int64_t, bool>(1, false);
  return CpuPlanAttr::get(context, rows, queryBlock, keyBlock, amx, splits,
                          dotBf16, keyTasks);
}

} // namespace attnc
