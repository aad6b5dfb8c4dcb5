// The CPU kernel of attn.distill: KL(P_t || P_s) per query row from the
// student's and the teacher's score tiles and both LSEs, a key block at a
// time, never an Sq x Skv buffer. One task per (batch, head, query tile):
// both sides' Q rows packed (times their scales), both sides' K^T in key
// tiles (a per-call copy each), then per row and key
//   P_t = exp(S_t - LSE_t), r = (S_t - LSE_t) - (S_s - LSE_s),
//   KL_i += P_t r   (where P_t != 0: a masked key adds nothing),
// in 16 lanes a row, summed at the tile's end. The mean form sums the rows
// that see a key afterwards, in row order.
#include "codegen/cpu/FlashAttention.h"
#include "codegen/cpu/FlashCommon.h"

#include "codegen/cpu/WidenRegion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace attnc {

namespace {

class FlashDistill : public FlashCommon {
public:
  FlashDistill(ImplicitLocOpBuilder &b, attn::DistillOp op,
               attn::CpuPlanAttr plan, int64_t vectorBits)
      : FlashCommon(b, op, plan.getRows(), vectorBits), op(op),
        teacherScale(float(op.getEffectiveTeacherScale())),
        blockTiles(plan.getKeyBlock() / kCols), width(plan.getKeyBlock()),
        qTiles((Sq + rows - 1) / rows) {
    teacherD = shapeOf(op.getTeacherQuery())[3];
    teacherHkv = shapeOf(op.getTeacherKey())[1];
  }

  Value build() {
    Value qs = bufferOf(op.getQuery()), qt = bufferOf(op.getTeacherQuery());
    Value kl = alloc({B, H, Sq});
    SmallVector<Value> captured = {qs,
                                   transposed(bufferOf(op.getKey())),
                                   bufferOf(op.getLse()),
                                   qt,
                                   transposed(bufferOf(op.getTeacherKey())),
                                   bufferOf(op.getTeacherLse()),
                                   kl};
    if (op.getLengths())
      captured.push_back(bufferOf(op.getLengths()));
    appendCaptures(captured);
    parallelTasks(
        parent, "__attnc_flash_distill", captured, B * H * qTiles,
        [&](ArrayRef<Value>) {
          // Both sides' packed Q rows and score blocks, the KL's lane sums.
          return SmallVector<Value>{
              scratchBuffer({D, rows}), scratchBuffer({teacherD, rows}),
              scratchBuffer({rows, width}), scratchBuffer({rows, width}),
              scratchBuffer({rows, kLanes})};
        },
        [&](ArrayRef<Value> args, ArrayRef<Value> scratch, Value t) {
          Value tile = arith::RemUIOp::create(b, t, idx(qTiles));
          Value bh = arith::DivUIOp::create(b, t, idx(qTiles));
          task(args, scratch, arith::DivUIOp::create(b, bh, idx(H)),
               arith::RemUIOp::create(b, bh, idx(H)), tile);
        });
    if (!op.isMean())
      return tensorOf(kl, op.getKl().getType());
    return tensorOf(meanOfSeenRows(kl, bufferOf(op.getTeacherLse())),
                    op.getKl().getType());
  }

private:
  void task(ArrayRef<Value> args, ArrayRef<Value> scratch, Value bi, Value h,
            Value tile) {
    Value qs = args[0], kts = args[1], lses = args[2], qt = args[3],
          ktt = args[4], lset = args[5], kl = args[6];
    Value lengths = captureBase > 7 ? args[7] : Value();
    Value packedS = scratch[0], packedT = scratch[1], sBufS = scratch[2],
          sBufT = scratch[3], sums = scratch[4];
    Value i0 = arith::MulIOp::create(b, tile, idx(rows));
    Value gs = arith::DivUIOp::create(b, h, idx(H / Hkv)),
          gt = arith::DivUIOp::create(b, h, idx(H / teacherHkv));
    packRows(qs, bi, h, i0, Sq - 1, packedS, scale);
    packRows(qt, bi, h, i0, Sq - 1, packedT, teacherScale);
    loop(0, rows, [&](Value r) {
      vector::StoreOp::create(b, splat(f(0.0f)), sums, ValueRange{r, idx(0)});
    });
    Value limit = masks.keyLimit(b, lengths, bi);
    MaskTiles::KeyRange keys = masks.keysSeenBy(b, limit, i0, rows, width);
    Value zeros = splat(f(0.0f));
    loop(keys.start, keys.end, width, [&](Value j0) {
      Value tile0 = arith::DivUIOp::create(b, j0, idx(kCols));
      // Both sides' scores, tile by tile; tiles past the keys some row
      // sees are left as they are: the masks drop their lanes.
      loop(0, blockTiles, [&](Value t) {
        Value col = arith::MulIOp::create(b, t, idx(kCols));
        auto ifOp = scf::IfOp::create(
            b,
            arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                  arith::AddIOp::create(b, j0, col), keys.end),
            /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        Value at = arith::AddIOp::create(b, tile0, t);
        storeTile(tileProduct(packedS, {}, kts, bi, gs, at), sBufS, col);
        storeTile(tileProduct(packedT, {}, ktt, bi, gt, at), sBufT, col);
      });
      Value whole =
          masks.isWhole(b, limit, i0, rows, j0, width, /*existsOnly=*/true);
      forRows(i0, [&](Value r, Value i) {
        MaskTiles::RowRange range =
            masks.rowRange(b, limit, i, /*existsOnly=*/true);
        SmallVector<Value> in =
            keyMaskUnlessWhole(whole, j0, range.lo, range.hi, width);
        Value ls =
                  memref::LoadOp::create(b, lses, ValueRange{bi, h, range.row}),
              lt =
                  memref::LoadOp::create(b, lset, ValueRange{bi, h, range.row});
        // A row that sees no key (LSE_t = -inf) subtracts +inf: P_t = 0.
        Value ltSafe = arith::SelectOp::create(
            b,
            arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, lt, f(kNegInf)),
            f(-kNegInf), lt);
        Value sum = vector::LoadOp::create(b, vec, sums, ValueRange{r, idx(0)});
        for (int64_t w = 0; w < width / kLanes; ++w) {
          SmallVector<Value> at = {r, idx(w * kLanes)};
          Value ss = vector::LoadOp::create(b, vec, sBufS, at),
                st = vector::LoadOp::create(b, vec, sBufT, at);
          // The masks (and the mask_mod region) of the shared keys.
          Scores sc = scoresOf(args.slice(captureBase, captures.size()), ss,
                               in[w], bi, h, range.row, j0, w,
                               /*prescaled=*/true);
          Value pt = arith::SelectOp::create(
              b, sc.keep,
              expVector(arith::SubFOp::create(b, st, splat(ltSafe))), zeros);
          Value ratio =
              arith::SubFOp::create(b, arith::SubFOp::create(b, st, splat(lt)),
                                    arith::SubFOp::create(b, ss, splat(ls)));
          Value take =
              arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, pt, zeros);
          sum = arith::AddFOp::create(
              b, sum,
              arith::SelectOp::create(
                  b, take, arith::MulFOp::create(b, pt, ratio), zeros));
        }
        vector::StoreOp::create(b, sum, sums, ValueRange{r, idx(0)});
      });
    });
    forRows(i0, [&](Value r, Value i) {
      auto ifOp = scf::IfOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::ult, i, idx(Sq)),
          /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      Value total = vector::ReductionOp::create(
          b, vector::CombiningKind::ADD,
          vector::LoadOp::create(b, vec, sums, ValueRange{r, idx(0)}), Value(),
          arith::FastMathFlags::reassoc);
      memref::StoreOp::create(b, total, kl, ValueRange{bi, h, i});
    });
  }

  /// The mean of kl [B, H, Sq] over the rows whose LSE is above -inf (0
  /// when none is), summed in (b, h, i) order, as a rank-0 buffer.
  Value meanOfSeenRows(Value kl, Value lse) {
    Value mean = alloc({});
    auto rowLoop = scf::ForOp::create(b, idx(0), idx(B * H * Sq), idx(1),
                                      ValueRange{f(0.0f), f(0.0f)});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(rowLoop.getBody());
      Value n = rowLoop.getInductionVar();
      SmallVector<Value> at = {
          arith::DivUIOp::create(b, n, idx(H * Sq)),
          arith::RemUIOp::create(b, arith::DivUIOp::create(b, n, idx(Sq)),
                                 idx(H)),
          arith::RemUIOp::create(b, n, idx(Sq))};
      Value seen =
          arith::CmpFOp::create(b, arith::CmpFPredicate::UNE,
                                memref::LoadOp::create(b, lse, at), f(kNegInf));
      Value sum = rowLoop.getRegionIterArgs()[0],
            count = rowLoop.getRegionIterArgs()[1];
      scf::YieldOp::create(
          b, ValueRange{arith::SelectOp::create(
                            b, seen,
                            arith::AddFOp::create(
                                b, sum, memref::LoadOp::create(b, kl, at)),
                            sum),
                        arith::SelectOp::create(
                            b, seen, arith::AddFOp::create(b, count, f(1.0f)),
                            count)});
    }
    Value sum = rowLoop.getResult(0), count = rowLoop.getResult(1);
    Value none =
        arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, count, f(0.0f));
    memref::StoreOp::create(
        b,
        arith::SelectOp::create(b, none, f(0.0f),
                                arith::DivFOp::create(b, sum, count)),
        mean, ValueRange{});
    return mean;
  }

  attn::DistillOp op;
  float teacherScale;
  int64_t blockTiles, width, qTiles, teacherD = 0, teacherHkv = 1;
};

} // namespace

bool canLowerToFlashCpu(attn::DistillOp op) {
  return isFloatTensor(op.getQuery()) && isFloatTensor(op.getTeacherQuery()) &&
         canWidenRegion(op.getMaskMod());
}

FailureOr<Value> lowerToFlashDistill(RewriterBase &rewriter, attn::DistillOp op,
                                     attn::CpuPlanAttr plan,
                                     int64_t vectorBits) {
  if (!canLowerToFlashCpu(op))
    return rewriter.notifyMatchFailure(op, "not covered by the flash kernel");
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  Value kl = FlashDistill(b, op, plan, vectorBits).build();
  rewriter.replaceOp(op, kl);
  return kl;
}

} // namespace attnc
