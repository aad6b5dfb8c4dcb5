// The GPU flash kernels (see FlashGpu.h).
//
// Thread mapping, for a workgroup of W invocations in subgroups of any size:
//   tiles    (Q, K, V, dO rows): invocation t stages elements t, t+W, ...
//   rows     (scores, softmax, Delta): subgroup s owns rows s, s+S, ...; its
//            lanes stride over the key block; row statistics come from
//            gpu.subgroup_reduce, written by lane 0;
//   outputs  (O, dQ accumulators): invocation t owns elements t, t+W, ...
// Barriers separate the phases, all in workgroup-uniform control flow.
// The dK/dV kernel gives each invocation one key, which it accumulates
// over every query row (and every query head of its KV head) that sees it.
#include "codegen/gpu/FlashGpu.h"

#include "codegen/MaskTiles.h"
#include "passes/ScalarGradients.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

#include <limits>

using namespace mlir;

namespace attnc {

namespace {

/// Workgroup memory on every GPU target (gpu.address_space<workgroup> does
/// not legalize for SPIR-V in MLIR 22; its number does).
constexpr unsigned kWorkgroupSpace = 3;

/// Builds kernels: loops, tiles in workgroup memory, regions per element.
class GpuBuilder {
public:
  explicit GpuBuilder(ImplicitLocOpBuilder &b) : b(b), f32(b.getF32Type()) {}

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value cst(float v) {
    return arith::ConstantOp::create(b, b.getF32FloatAttr(v));
  }
  Value negInf() { return cst(-std::numeric_limits<float>::infinity()); }
  Value add(Value x, Value y) {
    return isa<IndexType>(x.getType()) ? Value(arith::AddIOp::create(b, x, y))
                                       : Value(arith::AddFOp::create(b, x, y));
  }
  Value mul(Value x, Value y) {
    return isa<IndexType>(x.getType()) ? Value(arith::MulIOp::create(b, x, y))
                                       : Value(arith::MulFOp::create(b, x, y));
  }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, x, y); }
  Value divu(Value x, Value y) { return arith::DivUIOp::create(b, x, y); }
  Value remu(Value x, Value y) { return arith::RemUIOp::create(b, x, y); }
  Value ult(Value x, Value y) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::ult, x, y);
  }
  Value minu(Value x, Value y) { return arith::MinUIOp::create(b, x, y); }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, c, x, y);
  }
  Value isNegInf(Value x) {
    return arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, x, negInf());
  }
  /// exp(x - m), 0 where x is -inf (also when m is).
  Value expShifted(Value x, Value m) {
    Value e = math::ExpOp::create(b, sub(x, m));
    return select(isNegInf(x), cst(0.0f), e);
  }

  /// for (iv = lo; iv < hi; iv += step) body(iv).
  void loop(Value lo, Value hi, Value step, function_ref<void(Value)> body) {
    auto forOp = scf::ForOp::create(b, lo, hi, step);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(forOp.getBody()->getTerminator());
    body(forOp.getInductionVar());
  }
  void loop(int64_t lo, int64_t hi, function_ref<void(Value)> body) {
    loop(idx(lo), idx(hi), idx(1), body);
  }
  /// A loop carrying one value: acc = body(iv, acc).
  Value reduce(Value lo, Value hi, Value step, Value init,
               function_ref<Value(Value, Value)> body) {
    auto forOp = scf::ForOp::create(b, lo, hi, step, ValueRange{init});
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    Value next = body(forOp.getInductionVar(), forOp.getRegionIterArgs()[0]);
    scf::YieldOp::create(b, next);
    return forOp.getResult(0);
  }
  void ifThen(Value cond, function_ref<void()> body) {
    auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    body();
  }

  Value shared(ArrayRef<int64_t> shape) {
    return memref::AllocOp::create(
        b, MemRefType::get(shape, f32, MemRefLayoutAttrInterface(),
                           b.getI64IntegerAttr(kWorkgroupSpace)));
  }
  Value load(Value memref, ValueRange indices) {
    Value v = memref::LoadOp::create(b, memref, indices);
    return v.getType() == f32 ? v : Value(arith::ExtFOp::create(b, f32, v));
  }
  void store(Value v, Value memref, ValueRange indices) {
    Type element = cast<MemRefType>(memref.getType()).getElementType();
    if (element != v.getType())
      v = arith::TruncFOp::create(b, element, v);
    memref::StoreOp::create(b, v, memref, indices);
  }
  /// sum_k x[xRow, k] * y[yRow, k] over k < n, of two 2-D tiles.
  Value dot(Value x, Value xRow, Value y, Value yRow, int64_t n) {
    return reduce(idx(0), idx(n), idx(1), cst(0.0f), [&](Value k, Value acc) {
      return add(acc, mul(load(x, {xRow, k}), load(y, {yRow, k})));
    });
  }
  Value subgroupSum(Value v) {
    return gpu::SubgroupReduceOp::create(b, v, gpu::AllReduceOperation::ADD,
                                         /*uniform=*/false);
  }
  Value subgroupMax(Value v) {
    return gpu::SubgroupReduceOp::create(b, v, gpu::AllReduceOperation::MAXNUMF,
                                         /*uniform=*/false);
  }
  void barrier() { gpu::BarrierOp::create(b); }

  /// Clones `region`'s block at the builder with its arguments bound to
  /// `args` and returns the yielded value. Capture reads stay
  /// tensor.extract of the op's tensors: bufferization makes them loads.
  Value inlineRegion(Region &region, ValueRange args) {
    Block &block = region.front();
    IRMapping mapping;
    mapping.map(block.getArguments(), args);
    for (Operation &op : block.without_terminator())
      b.clone(op, mapping);
    return mapping.lookupOrDefault(block.getTerminator()->getOperand(0));
  }

  ImplicitLocOpBuilder &b;
  Type f32;
};

/// Shapes, plan and regions of a fused op, and the per-element score rule
/// its kernels share.
template <typename OpTy> struct FlashShape {
  explicit FlashShape(OpTy op, attn::GpuPlanAttr plan)
      : op(op), masks(op), plan(plan) {
    auto q = shapeOf(op.getQuery()), k = shapeOf(op.getKey()),
         v = shapeOf(op.getValue());
    B = q[0], H = q[1], Sq = q[2], D = q[3];
    Hkv = k[1], Skv = k[2], Dv = v[3];
    Bq = plan.getQueryBlock(), Bk = plan.getKeyBlock();
    W = plan.getWorkgroupSize();
    scale = op.getEffectiveScale();
  }
  OpTy op;
  MaskTiles masks;
  attn::GpuPlanAttr plan;
  int64_t B, H, Sq, D, Hkv, Skv, Dv, Bq, Bk, W;
  double scale;
};

/// The modified, masked score of (b, h, i, j) from the raw product `dot`:
/// -inf for keys past Skv, rows past Sq or masked pairs; `whole` (i1 or
/// null) skips the named masks. Regions see i and j clamped into range.
template <typename OpTy>
Value maskedScore(GpuBuilder &g, FlashShape<OpTy> &s, Value dot, Value bi,
                  Value h, Value i, Value j, Value limit, Value whole,
                  Value *modifiedOut = nullptr) {
  ImplicitLocOpBuilder &b = g.b;
  Value score = g.mul(dot, g.cst(float(s.scale)));
  Value ic = g.minu(i, g.idx(s.Sq - 1)), jc = g.minu(j, g.idx(s.Skv - 1));
  if (!s.op.getScoreMod().empty()) {
    SmallVector<Value> args = {score, bi, h, ic, jc};
    llvm::append_range(args, s.op.getScoreCaptures());
    score = g.inlineRegion(s.op.getScoreMod(), args);
  }
  if (modifiedOut)
    *modifiedOut = score;
  auto range = s.masks.rowRange(b, limit, i, /*existsOnly=*/true);
  Value visible = MaskTiles::inRange(b, j, range.lo, range.hi);
  if (whole)
    visible = arith::OrIOp::create(b, whole, visible);
  // Rows past Sq and keys past the limit are never visible.
  visible = arith::AndIOp::create(
      b, visible,
      arith::AndIOp::create(b, g.ult(i, g.idx(s.Sq)), g.ult(j, limit)));
  if (!s.op.getMaskMod().empty()) {
    SmallVector<Value> args = {bi, h, ic, jc};
    llvm::append_range(args, s.op.getMaskCaptures());
    visible = arith::AndIOp::create(b, visible,
                                    g.inlineRegion(s.op.getMaskMod(), args));
  }
  return g.select(visible, score, g.negInf());
}

Value bufferOf(ImplicitLocOpBuilder &b, Value tensor) {
  if (!tensor)
    return nullptr;
  auto type = cast<RankedTensorType>(tensor.getType());
  return bufferization::ToBufferOp::create(
      b, MemRefType::get(type.getShape(), type.getElementType()), tensor,
      /*read_only=*/true);
}

Value allocLike(ImplicitLocOpBuilder &b, Type tensorType) {
  auto type = cast<RankedTensorType>(tensorType);
  return memref::AllocOp::create(
      b, MemRefType::get(type.getShape(), type.getElementType()));
}

Value tensorOf(ImplicitLocOpBuilder &b, Value memref, Type type) {
  return bufferization::ToTensorOp::create(b, type, memref, b.getUnitAttr(),
                                           b.getUnitAttr());
}

/// A gpu.launch of grid (x, y) and `threads` invocations; `body` builds
/// inside it with the block ids and the thread id.
void launch(ImplicitLocOpBuilder &b, int64_t x, int64_t y, int64_t threads,
            function_ref<void(Value, Value, Value)> body) {
  auto c = [&](int64_t v) { return arith::ConstantIndexOp::create(b, v); };
  auto op = gpu::LaunchOp::create(b, c(x), c(y), c(1), c(threads), c(1), c(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&op.getBody().front());
  body(op.getBlockIds().x, op.getBlockIds().y, op.getThreadIds().x);
  gpu::TerminatorOp::create(b);
}

/// The subgroup's lane, its size, its index and the workgroup's count.
struct Subgroup {
  Value lane, size, id, count;
  explicit Subgroup(ImplicitLocOpBuilder &b)
      : lane(gpu::LaneIdOp::create(b, nullptr)),
        size(gpu::SubgroupSizeOp::create(b, nullptr)),
        id(gpu::SubgroupIdOp::create(b, nullptr)),
        count(gpu::NumSubgroupsOp::create(b, nullptr)) {}
};

/// Copies rows [r0, r0 + rows) of `src[bi, head, :, :]` (zero past `extent`)
/// into the tile `dst` (rows x width), invocation t taking elements t, t+W.
void stageRows(GpuBuilder &g, Value src, Value bi, Value head, Value r0,
               int64_t rows, int64_t width, int64_t extent, Value dst,
               Value tid, int64_t W) {
  g.loop(tid, g.idx(rows * width), g.idx(W), [&](Value e) {
    Value r = g.divu(e, g.idx(width)), c = g.remu(e, g.idx(width));
    Value row = g.add(r0, r);
    Value inside = g.ult(row, g.idx(extent));
    Value safe = g.minu(row, g.idx(extent - 1));
    Value v = g.load(src, {bi, head, safe, c});
    memref::StoreOp::create(g.b, g.select(inside, v, g.cst(0.0f)), dst,
                            ValueRange{r, c});
  });
}

} // namespace

bool canLowerToFlashGpu(attn::AttentionOp op) { return true; }

bool canLowerToFlashGpu(attn::AttentionGradOp op) {
  // Float captures' per-key partial gradients must fit in 64 MiB.
  int64_t keys = shapeOf(op.getKey())[0] * shapeOf(op.getKey())[1] *
                 shapeOf(op.getKey())[2];
  for (Value capture : op.getScoreCaptures())
    if (isFloatTensor(capture) &&
        keys * cast<ShapedType>(capture.getType()).getNumElements() * 4 >
            (int64_t(64) << 20))
      return false;
  return true;
}

LogicalResult lowerToFlashGpu(RewriterBase &rewriter, attn::AttentionOp op,
                              attn::GpuPlanAttr plan) {
  if (!canLowerToFlashGpu(op))
    return failure();
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(op);
  FlashShape<attn::AttentionOp> s(op, plan);
  GpuBuilder g(b);
  Value q = bufferOf(b, op.getQuery()), k = bufferOf(b, op.getKey()),
        v = bufferOf(b, op.getValue()), lengths = bufferOf(b, op.getLengths());
  Value out = allocLike(b, op.getOutput().getType());
  Value lse = allocLike(b, op.getLse().getType());
  int64_t Bq = s.Bq, Bk = s.Bk, D = s.D, Dv = s.Dv, W = s.W;

  launch(
      b, (s.Sq + Bq - 1) / Bq, s.B * s.H, W,
      [&](Value qb, Value bh, Value tid) {
        Subgroup sg(b);
        Value bi = g.divu(bh, g.idx(s.H)), h = g.remu(bh, g.idx(s.H));
        Value kvh = g.divu(h, g.idx(s.H / s.Hkv));
        Value i0 = g.mul(qb, g.idx(Bq));
        Value limit = s.masks.keyLimit(b, lengths, bi);
        Value qs = g.shared({Bq, D}), ks = g.shared({Bk, D}),
              vs = g.shared({Bk, Dv}), ps = g.shared({Bq, Bk}),
              os = g.shared({Bq, Dv}), stats = g.shared({3, Bq});
        Value rowMax = g.idx(0), rowSum = g.idx(1), rescale = g.idx(2);
        stageRows(g, q, bi, h, i0, Bq, D, s.Sq, qs, tid, W);
        g.loop(tid, g.idx(Bq * Dv), g.idx(W), [&](Value e) {
          memref::StoreOp::create(
              b, g.cst(0.0f), os,
              ValueRange{g.divu(e, g.idx(Dv)), g.remu(e, g.idx(Dv))});
        });
        g.loop(tid, g.idx(Bq), g.idx(W), [&](Value r) {
          memref::StoreOp::create(b, g.negInf(), stats, ValueRange{rowMax, r});
          memref::StoreOp::create(b, g.cst(0.0f), stats, ValueRange{rowSum, r});
        });
        g.barrier();

        // Key blocks no row of this query block sees are never visited.
        auto keys = s.masks.keysSeenBy(b, limit, i0, Bq, Bk);
        g.loop(keys.start, keys.end, g.idx(Bk), [&](Value j0) {
          Value whole = s.masks.isWhole(b, limit, i0, Bq, j0, Bk,
                                        /*existsOnly=*/true);
          stageRows(g, k, bi, kvh, j0, Bk, D, s.Skv, ks, tid, W);
          stageRows(g, v, bi, kvh, j0, Bk, Dv, s.Skv, vs, tid, W);
          g.barrier();
          // Scores and the online softmax: a subgroup per row.
          g.loop(sg.id, g.idx(Bq), sg.count, [&](Value r) {
            Value i = g.add(i0, r);
            Value localMax = g.reduce(
                sg.lane, g.idx(Bk), sg.size, g.negInf(),
                [&](Value jj, Value m) {
                  Value j = g.add(j0, jj);
                  Value score = maskedScore(g, s, g.dot(qs, r, ks, jj, D), bi,
                                            h, i, j, limit, whole);
                  memref::StoreOp::create(b, score, ps, ValueRange{r, jj});
                  return Value(arith::MaximumFOp::create(b, m, score));
                });
            Value blockMax = g.subgroupMax(localMax);
            Value oldMax =
                memref::LoadOp::create(b, stats, ValueRange{rowMax, r});
            Value newMax = arith::MaximumFOp::create(b, oldMax, blockMax);
            Value localSum = g.reduce(
                sg.lane, g.idx(Bk), sg.size, g.cst(0.0f),
                [&](Value jj, Value l) {
                  Value p = g.expShifted(
                      memref::LoadOp::create(b, ps, ValueRange{r, jj}), newMax);
                  memref::StoreOp::create(b, p, ps, ValueRange{r, jj});
                  return g.add(l, p);
                });
            Value blockSum = g.subgroupSum(localSum);
            Value alpha = g.expShifted(oldMax, newMax);
            g.ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, sg.lane,
                                           g.idx(0)),
                     [&] {
                       Value oldSum = memref::LoadOp::create(
                           b, stats, ValueRange{rowSum, r});
                       memref::StoreOp::create(b, newMax, stats,
                                               ValueRange{rowMax, r});
                       memref::StoreOp::create(
                           b, g.add(g.mul(oldSum, alpha), blockSum), stats,
                           ValueRange{rowSum, r});
                       memref::StoreOp::create(b, alpha, stats,
                                               ValueRange{rescale, r});
                     });
          });
          g.barrier();
          // O = O * alpha + P V: an invocation per element.
          g.loop(tid, g.idx(Bq * Dv), g.idx(W), [&](Value e) {
            Value r = g.divu(e, g.idx(Dv)), c = g.remu(e, g.idx(Dv));
            Value alpha =
                memref::LoadOp::create(b, stats, ValueRange{rescale, r});
            Value init =
                g.mul(memref::LoadOp::create(b, os, ValueRange{r, c}), alpha);
            Value acc = g.reduce(
                g.idx(0), g.idx(Bk), g.idx(1), init, [&](Value jj, Value a) {
                  return g.add(a,
                               g.mul(g.load(ps, {r, jj}), g.load(vs, {jj, c})));
                });
            memref::StoreOp::create(b, acc, os, ValueRange{r, c});
          });
          g.barrier();
        });

        // O / l and LSE = m + log l (0 and -inf for rows that saw no key).
        g.loop(tid, g.idx(Bq * Dv), g.idx(W), [&](Value e) {
          Value r = g.divu(e, g.idx(Dv)), c = g.remu(e, g.idx(Dv));
          Value i = g.add(i0, r);
          g.ifThen(g.ult(i, g.idx(s.Sq)), [&] {
            Value l = memref::LoadOp::create(b, stats, ValueRange{rowSum, r});
            Value o = memref::LoadOp::create(b, os, ValueRange{r, c});
            Value seen = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, l,
                                               g.cst(0.0f));
            Value safe = g.select(seen, l, g.cst(1.0f));
            g.store(
                g.select(seen, arith::DivFOp::create(b, o, safe), g.cst(0.0f)),
                out, {bi, h, i, c});
          });
        });
        g.loop(tid, g.idx(Bq), g.idx(W), [&](Value r) {
          Value i = g.add(i0, r);
          g.ifThen(g.ult(i, g.idx(s.Sq)), [&] {
            Value l = memref::LoadOp::create(b, stats, ValueRange{rowSum, r});
            Value m = memref::LoadOp::create(b, stats, ValueRange{rowMax, r});
            Value seen = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, l,
                                               g.cst(0.0f));
            Value safe = g.select(seen, l, g.cst(1.0f));
            Value value = g.add(m, math::LogOp::create(b, safe));
            memref::StoreOp::create(b, g.select(seen, value, g.negInf()), lse,
                                    ValueRange{bi, h, i});
          });
        });
      });

  rewriter.replaceOp(op, {tensorOf(b, out, op.getOutput().getType()),
                          tensorOf(b, lse, op.getLse().getType())});
  return success();
}

LogicalResult lowerToFlashGpu(RewriterBase &rewriter, attn::AttentionGradOp op,
                              attn::GpuPlanAttr plan) {
  if (!canLowerToFlashGpu(op))
    return failure();
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(op);
  FlashShape<attn::AttentionGradOp> s(op, plan);
  GpuBuilder g(b);
  Value q = bufferOf(b, op.getQuery()), k = bufferOf(b, op.getKey()),
        v = bufferOf(b, op.getValue()), lse = bufferOf(b, op.getLse()),
        dO = bufferOf(b, op.getOutputGrad()),
        dLse = bufferOf(b, op.getLseGrad()),
        lengths = bufferOf(b, op.getLengths());
  Value dq = allocLike(b, op.getQueryGrad().getType());
  Value dk = allocLike(b, op.getKeyGrad().getType());
  Value dv = allocLike(b, op.getValueGrad().getType());
  Value delta = memref::AllocOp::create(
      b, MemRefType::get({s.B, s.H, s.Sq}, b.getF32Type()));
  // dK and dV accumulate in f32 whatever their element type.
  Value dkAcc = memref::AllocOp::create(
      b, MemRefType::get({s.B, s.Hkv, s.Skv, s.D}, b.getF32Type()));
  Value dvAcc = memref::AllocOp::create(
      b, MemRefType::get({s.B, s.Hkv, s.Skv, s.Dv}, b.getF32Type()));
  int64_t Bq = s.Bq, Bk = s.Bk, D = s.D, Dv = s.Dv, W = s.W;
  // Float score captures: per-key partial gradients (an invocation owns
  // one key), summed in key order by a kernel of their own.
  int64_t keysTotal = s.B * s.Hkv * s.Skv;
  SmallVector<Value> partials(op.getScoreCaptures().size());
  for (auto [c, capture] : llvm::enumerate(op.getScoreCaptures()))
    if (isFloatTensor(capture))
      partials[c] = memref::AllocOp::create(
          b, MemRefType::get(
                 {keysTotal,
                  shapeOf(capture).empty()
                      ? 1
                      : cast<ShapedType>(capture.getType()).getNumElements()},
                 b.getF32Type()));
  auto flatIndex = [&](Value capture, ArrayRef<Value> indices) {
    Value flat = g.idx(0);
    for (auto [d, extent] : llvm::enumerate(shapeOf(capture)))
      flat = g.add(g.mul(flat, g.idx(extent)), indices[d]);
    return flat;
  };

  // dS of (b, h, i, j) from the raw product and dP: P (S' - LSE recomputed),
  // times dP - Delta + dLSE, times dS'/dS of the score_mod.
  auto gradScore = [&](Value dot, Value dp, Value bi, Value h, Value i, Value j,
                       Value limit, Value rowLse, Value rowDelta, Value rowDLse,
                       Value *probOut,
                       SmallVector<CaptureAdjoint> *captureAdjoints) {
    Value score = maskedScore(g, s, dot, bi, h, i, j, limit, nullptr);
    Value p = g.expShifted(score, rowLse);
    *probOut = p;
    Value ds = g.mul(p, g.add(g.sub(dp, rowDelta), rowDLse));
    if (s.op.getScoreMod().empty())
      return ds;
    // The score_mod's reverse sweep at the unmodified score, seeded with
    // dS': dS and the captures' adjoints.
    Value raw = g.mul(dot, g.cst(float(s.scale)));
    SmallVector<Value> args = {raw, bi, h, g.minu(i, g.idx(s.Sq - 1)),
                               g.minu(j, g.idx(s.Skv - 1))};
    llvm::append_range(args, s.op.getScoreCaptures());
    ScoreModAdjoints adjoints =
        buildScoreModAdjoints(b, b.getLoc(), s.op.getScoreMod(), args, ds);
    if (captureAdjoints)
      *captureAdjoints = std::move(adjoints.captures);
    return adjoints.scoreAdjoint;
  };
  auto rowStats = [&](Value bi, Value h, Value i) {
    Value ic = g.minu(i, g.idx(s.Sq - 1));
    Value rowLse = memref::LoadOp::create(b, lse, ValueRange{bi, h, ic});
    Value rowDLse =
        dLse ? Value(memref::LoadOp::create(b, dLse, ValueRange{bi, h, ic}))
             : g.cst(0.0f);
    return std::pair(rowLse, rowDLse);
  };

  // dQ, with Delta_i = sum_j P_ij dP_ij first (exact also when O is
  // narrow): a workgroup per (batch, head, query block).
  launch(b, (s.Sq + Bq - 1) / Bq, s.B * s.H, W,
         [&](Value qb, Value bh, Value tid) {
           Subgroup sg(b);
           Value bi = g.divu(bh, g.idx(s.H)), h = g.remu(bh, g.idx(s.H));
           Value kvh = g.divu(h, g.idx(s.H / s.Hkv));
           Value i0 = g.mul(qb, g.idx(Bq));
           Value limit = s.masks.keyLimit(b, lengths, bi);
           Value qs = g.shared({Bq, D}), dos = g.shared({Bq, Dv}),
                 ks = g.shared({Bk, D}), vs = g.shared({Bk, Dv}),
                 dss = g.shared({Bq, Bk}), dqs = g.shared({Bq, D}),
                 deltas = g.shared({Bq});
           stageRows(g, q, bi, h, i0, Bq, D, s.Sq, qs, tid, W);
           stageRows(g, dO, bi, h, i0, Bq, Dv, s.Sq, dos, tid, W);
           g.loop(tid, g.idx(Bq * D), g.idx(W), [&](Value e) {
             memref::StoreOp::create(
                 b, g.cst(0.0f), dqs,
                 ValueRange{g.divu(e, g.idx(D)), g.remu(e, g.idx(D))});
           });
           g.loop(tid, g.idx(Bq), g.idx(W), [&](Value r) {
             memref::StoreOp::create(b, g.cst(0.0f), deltas, ValueRange{r});
           });
           g.barrier();
           auto keys = s.masks.keysSeenBy(b, limit, i0, Bq, Bk);
           auto stageKeys = [&](Value j0) {
             stageRows(g, k, bi, kvh, j0, Bk, D, s.Skv, ks, tid, W);
             stageRows(g, v, bi, kvh, j0, Bk, Dv, s.Skv, vs, tid, W);
             g.barrier();
           };
           // Pass 1: Delta.
           g.loop(keys.start, keys.end, g.idx(Bk), [&](Value j0) {
             stageKeys(j0);
             g.loop(sg.id, g.idx(Bq), sg.count, [&](Value r) {
               Value i = g.add(i0, r);
               auto [rowLse, rowDLse] = rowStats(bi, h, i);
               (void)rowDLse;
               Value local = g.reduce(
                   sg.lane, g.idx(Bk), sg.size, g.cst(0.0f),
                   [&](Value jj, Value a) {
                     Value j = g.add(j0, jj);
                     Value score = maskedScore(g, s, g.dot(qs, r, ks, jj, D),
                                               bi, h, i, j, limit, nullptr);
                     Value p = g.expShifted(score, rowLse);
                     return g.add(a, g.mul(p, g.dot(dos, r, vs, jj, Dv)));
                   });
               Value sum = g.subgroupSum(local);
               g.ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq,
                                              sg.lane, g.idx(0)),
                        [&] {
                          Value old =
                              memref::LoadOp::create(b, deltas, ValueRange{r});
                          memref::StoreOp::create(b, g.add(old, sum), deltas,
                                                  ValueRange{r});
                        });
             });
             g.barrier();
           });
           g.loop(tid, g.idx(Bq), g.idx(W), [&](Value r) {
             Value i = g.add(i0, r);
             g.ifThen(g.ult(i, g.idx(s.Sq)), [&] {
               memref::StoreOp::create(
                   b, memref::LoadOp::create(b, deltas, ValueRange{r}), delta,
                   ValueRange{bi, h, i});
             });
           });
           // Pass 2: dS, then dQ += dS K.
           g.loop(keys.start, keys.end, g.idx(Bk), [&](Value j0) {
             stageKeys(j0);
             g.loop(sg.id, g.idx(Bq), sg.count, [&](Value r) {
               Value i = g.add(i0, r);
               auto [rowLse, rowDLse] = rowStats(bi, h, i);
               Value rowDelta =
                   memref::LoadOp::create(b, deltas, ValueRange{r});
               g.loop(sg.lane, g.idx(Bk), sg.size, [&](Value jj) {
                 Value j = g.add(j0, jj);
                 Value p;
                 Value ds = gradScore(
                     g.dot(qs, r, ks, jj, D), g.dot(dos, r, vs, jj, Dv), bi, h,
                     i, j, limit, rowLse, rowDelta, rowDLse, &p, nullptr);
                 memref::StoreOp::create(b, ds, dss, ValueRange{r, jj});
               });
             });
             g.barrier();
             g.loop(tid, g.idx(Bq * D), g.idx(W), [&](Value e) {
               Value r = g.divu(e, g.idx(D)), c = g.remu(e, g.idx(D));
               Value init = memref::LoadOp::create(b, dqs, ValueRange{r, c});
               Value acc = g.reduce(
                   g.idx(0), g.idx(Bk), g.idx(1), init, [&](Value jj, Value a) {
                     return g.add(
                         a, g.mul(g.load(dss, {r, jj}), g.load(ks, {jj, c})));
                   });
               memref::StoreOp::create(b, acc, dqs, ValueRange{r, c});
             });
             g.barrier();
           });
           g.loop(tid, g.idx(Bq * D), g.idx(W), [&](Value e) {
             Value r = g.divu(e, g.idx(D)), c = g.remu(e, g.idx(D));
             Value i = g.add(i0, r);
             g.ifThen(g.ult(i, g.idx(s.Sq)), [&] {
               g.store(g.mul(memref::LoadOp::create(b, dqs, ValueRange{r, c}),
                             g.cst(float(s.scale))),
                       dq, {bi, h, i, c});
             });
           });
         });

  // dK and dV: a workgroup per (batch, KV head, key block), an invocation
  // per key; query rows staged a block at a time for every head of the
  // group.
  int64_t group = s.H / s.Hkv;
  launch(b, (s.Skv + Bk - 1) / Bk, s.B * s.Hkv, Bk,
         [&](Value kb, Value bg, Value tid) {
           Value bi = g.divu(bg, g.idx(s.Hkv)), kvh = g.remu(bg, g.idx(s.Hkv));
           Value j0 = g.mul(kb, g.idx(Bk));
           Value j = g.add(j0, tid);
           Value limit = s.masks.keyLimit(b, lengths, bi);
           Value ks = g.shared({Bk, D}), vs = g.shared({Bk, Dv}),
                 qs = g.shared({Bq, D}), dos = g.shared({Bq, Dv});
           stageRows(g, k, bi, kvh, j0, Bk, D, s.Skv, ks, tid, Bk);
           stageRows(g, v, bi, kvh, j0, Bk, Dv, s.Skv, vs, tid, Bk);
           Value exists = g.ult(j, g.idx(s.Skv));
           Value jc = g.minu(j, g.idx(s.Skv - 1));
           Value key = g.add(g.mul(bg, g.idx(s.Skv)), jc);
           g.ifThen(exists, [&] {
             for (Value partial : partials)
               if (partial)
                 g.loop(0, cast<MemRefType>(partial.getType()).getDimSize(1),
                        [&](Value e) {
                          memref::StoreOp::create(b, g.cst(0.0f), partial,
                                                  ValueRange{key, e});
                        });
           });
           // This key's dK and dV rows accumulate in place.
           g.ifThen(exists, [&] {
             g.loop(0, D, [&](Value c) {
               g.store(g.cst(0.0f), dkAcc, {bi, kvh, j, c});
             });
             g.loop(0, Dv, [&](Value c) {
               g.store(g.cst(0.0f), dvAcc, {bi, kvh, j, c});
             });
           });
           g.barrier();
           auto [first, end] = s.masks.rowsSeeing(b, j0, Bk, Bq);
           end = g.minu(end, g.idx(s.Sq));
           g.loop(0, group, [&](Value hh) {
             Value h = g.add(g.mul(kvh, g.idx(group)), hh);
             g.loop(first, end, g.idx(Bq), [&](Value i0) {
               stageRows(g, q, bi, h, i0, Bq, D, s.Sq, qs, tid, Bk);
               stageRows(g, dO, bi, h, i0, Bq, Dv, s.Sq, dos, tid, Bk);
               g.barrier();
               g.ifThen(exists, [&] {
                 g.loop(0, Bq, [&](Value r) {
                   Value i = g.add(i0, r);
                   auto [rowLse, rowDLse] = rowStats(bi, h, i);
                   Value rowDelta = memref::LoadOp::create(
                       b, delta, ValueRange{bi, h, g.minu(i, g.idx(s.Sq - 1))});
                   Value p;
                   SmallVector<CaptureAdjoint> adjoints;
                   Value ds =
                       gradScore(g.dot(qs, r, ks, tid, D),
                                 g.dot(dos, r, vs, tid, Dv), bi, h, i, j, limit,
                                 rowLse, rowDelta, rowDLse, &p, &adjoints);
                   for (CaptureAdjoint &adjoint : adjoints) {
                     Value partial = partials[adjoint.capture];
                     if (!partial)
                       continue;
                     Value flat =
                         flatIndex(op.getScoreCaptures()[adjoint.capture],
                                   adjoint.indices);
                     Value old = memref::LoadOp::create(b, partial,
                                                        ValueRange{key, flat});
                     memref::StoreOp::create(b, g.add(old, adjoint.adjoint),
                                             partial, ValueRange{key, flat});
                   }
                   ds = g.mul(ds, g.cst(float(s.scale)));
                   g.loop(0, Dv, [&](Value c) {
                     Value old = g.load(dvAcc, {bi, kvh, jc, c});
                     g.store(g.add(old, g.mul(p, g.load(dos, {r, c}))), dvAcc,
                             {bi, kvh, jc, c});
                   });
                   g.loop(0, D, [&](Value c) {
                     Value old = g.load(dkAcc, {bi, kvh, jc, c});
                     g.store(g.add(old, g.mul(ds, g.load(qs, {r, c}))), dkAcc,
                             {bi, kvh, jc, c});
                   });
                 });
               });
               g.barrier();
             });
           });
           g.ifThen(exists, [&] {
             g.loop(0, D, [&](Value c) {
               g.store(g.load(dkAcc, {bi, kvh, j, c}), dk, {bi, kvh, j, c});
             });
             g.loop(0, Dv, [&](Value c) {
               g.store(g.load(dvAcc, {bi, kvh, j, c}), dv, {bi, kvh, j, c});
             });
           });
         });

  SmallVector<Value> results = {tensorOf(b, dq, op.getQueryGrad().getType()),
                                tensorOf(b, dk, op.getKeyGrad().getType()),
                                tensorOf(b, dv, op.getValueGrad().getType())};
  // Float captures: the per-key partials summed in key order; integer
  // ones have zero gradients.
  for (auto [c, grad] : llvm::enumerate(op.getScoreCapturesGrad())) {
    Value out = allocLike(b, grad.getType());
    auto type = cast<MemRefType>(out.getType());
    int64_t n = type.getNumElements();
    Value flat = memref::CollapseShapeOp::create(
        b, out,
        SmallVector<ReassociationIndices>{
            llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()))});
    Value partial = partials[c];
    launch(b, (n + W - 1) / W, 1, W, [&](Value blk, Value, Value tid) {
      Value e = g.add(g.mul(blk, g.idx(W)), tid);
      g.ifThen(g.ult(e, g.idx(n)), [&] {
        if (!partial) {
          memref::StoreOp::create(
              b,
              arith::ConstantOp::create(b, type.getElementType(),
                                        b.getZeroAttr(type.getElementType())),
              flat, ValueRange{e});
          return;
        }
        Value sum =
            g.reduce(g.idx(0), g.idx(keysTotal), g.idx(1), g.cst(0.0f),
                     [&](Value t, Value acc) {
                       return g.add(acc, memref::LoadOp::create(
                                             b, partial, ValueRange{t, e}));
                     });
        g.store(sum, flat, {e});
      });
    });
    results.push_back(tensorOf(b, out, grad.getType()));
  }
  rewriter.replaceOp(op, results);
  return success();
}

} // namespace attnc
