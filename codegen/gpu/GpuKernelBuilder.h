// What the GPU flash kernels of every GPU target build with: a builder of
// loops, tiles and per-element regions inside gpu.launch ops, the shapes of
// a fused op with the score rule its kernels share (scale, score_mod,
// named masks, mask_mod), and the launch itself. The portable kernels
// (FlashGpu.cpp) and the NVIDIA tensor-core kernels (cuda/FlashMma.cpp)
// compute each score with the same code.
#ifndef ATTNC_CODEGEN_GPU_GPUKERNELBUILDER_H
#define ATTNC_CODEGEN_GPU_GPUKERNELBUILDER_H

#include "codegen/MaskTiles.h"
#include "codegen/TensorBuffers.h"
#include "passes/ScalarGradients.h"
#include "dialect/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <limits>

namespace attnc {
namespace gpu_kernels {

using namespace mlir;

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

/// Shapes, blocks and regions of a fused op, and the per-element score
/// rule its kernels share: `Bq` query rows and `Bk` keys per block, `W`
/// invocations per workgroup.
template <typename OpTy> struct FlashShape {
  /// (`b` builds the buffer of varlen's offsets, which the masks read.)
  FlashShape(ImplicitLocOpBuilder &b, OpTy op, int64_t Bq, int64_t Bk,
             int64_t W)
      : op(op), masks(op), Bq(Bq), Bk(Bk), W(W) {
    masks.offsets = bufferOf(b, attn::varlenOf(op));
    auto q = shapeOf(op.getQuery()), k = shapeOf(op.getKey());
    B = q[0], H = q[1], Sq = q[2], D = q[3];
    Hkv = k[1], Skv = attn::keyCountOf(op), Dv = valueDimOf(op);
    scale = op.getEffectiveScale();
  }

  /// V's head dimension; 0 for the statistics and distillations (no V).
  template <typename T> static int64_t valueDimOf(T op) {
    return shapeOf(op.getValue())[3];
  }
  static int64_t valueDimOf(attn::AttentionStatsOp) { return 0; }
  static int64_t valueDimOf(attn::AttentionStatsGradOp) { return 0; }
  static int64_t valueDimOf(attn::DistillOp) { return 0; }
  static int64_t valueDimOf(attn::DistillGradOp) { return 0; }

  /// The score_mod's arguments for (b, h, i, j) and the scaled product
  /// `raw`: i and j clamped into range, so that capture reads stay inside.
  SmallVector<Value> scoreModArgs(GpuBuilder &g, Value raw, Value bi, Value h,
                                  Value i, Value j) {
    SmallVector<Value> args = {raw, bi, h, g.minu(i, g.idx(Sq - 1)),
                               g.minu(j, g.idx(Skv - 1))};
    llvm::append_range(args, op.getScoreCaptures());
    return args;
  }
  Value scaled(GpuBuilder &g, Value dot) {
    return g.mul(dot, g.cst(float(scale)));
  }
  /// Whether key j is visible to row i: false for keys past the batch's
  /// `limit`, rows past Sq and masked pairs; `whole` (i1 or null) skips the
  /// named masks.
  Value visible(GpuBuilder &g, Value bi, Value h, Value i, Value j, Value limit,
                Value whole) {
    ImplicitLocOpBuilder &b = g.b;
    auto range = masks.rowRange(b, limit, i, /*existsOnly=*/true);
    Value visible = MaskTiles::inRange(b, j, range.lo, range.hi);
    if (whole)
      visible = arith::OrIOp::create(b, whole, visible);
    visible = arith::AndIOp::create(
        b, visible,
        arith::AndIOp::create(b, g.ult(i, g.idx(Sq)), g.ult(j, limit)));
    if (Value mod = maskMod(g, bi, h, i, j))
      visible = arith::AndIOp::create(b, visible, mod);
    return visible;
  }
  /// The mask_mod region's value at (b, h, i, j), null without one: all
  /// that masks a pair in a tile MaskTiles calls whole.
  Value maskMod(GpuBuilder &g, Value bi, Value h, Value i, Value j) {
    if (op.getMaskMod().empty())
      return nullptr;
    SmallVector<Value> args = {bi, h, g.minu(i, g.idx(Sq - 1)),
                               g.minu(j, g.idx(Skv - 1))};
    llvm::append_range(args, op.getMaskCaptures());
    return g.inlineRegion(op.getMaskMod(), args);
  }
  /// The modified score of (b, h, i, j) from the raw product: scaled, then
  /// through the score_mod; unmasked.
  Value modifiedScore(GpuBuilder &g, Value dot, Value bi, Value h, Value i,
                      Value j) {
    Value score = scaled(g, dot);
    if (!op.getScoreMod().empty())
      score =
          g.inlineRegion(op.getScoreMod(), scoreModArgs(g, score, bi, h, i, j));
    return score;
  }
  /// The backward's view of the modified score of (b, h, i, j): its value,
  /// d score / d (scaled product) (null without a score_mod) and the
  /// score_mod's capture adjoints, from one reverse sweep of the region
  /// seeded with 1 (the adjoints are linear in the seed); unmasked.
  ScoreModAdjoints modifiedScoreAdjoints(GpuBuilder &g, Value dot, Value bi,
                                         Value h, Value i, Value j) {
    Value score = scaled(g, dot);
    if (op.getScoreMod().empty())
      return {score, nullptr, {}};
    return buildScoreModAdjoints(g.b, g.b.getLoc(), op.getScoreMod(),
                                 scoreModArgs(g, score, bi, h, i, j),
                                 g.cst(1.0f));
  }
  /// The modified, masked score of (b, h, i, j) from the raw product.
  Value maskedScore(GpuBuilder &g, Value dot, Value bi, Value h, Value i,
                    Value j, Value limit, Value whole) {
    return g.select(visible(g, bi, h, i, j, limit, whole),
                    modifiedScore(g, dot, bi, h, i, j), g.negInf());
  }

  OpTy op;
  MaskTiles masks;
  int64_t Bq, Bk, W;
  int64_t B, H, Sq, D, Hkv, Skv, Dv;
  double scale;
};

/// A workgroup's query block, from its block ids (query block, b * H + h).
struct QueryBlock {
  Value bi, h, kvh, i0, limit;
  template <typename OpTy>
  QueryBlock(GpuBuilder &g, FlashShape<OpTy> &s, Value qb, Value bh,
             Value lengths) {
    bi = g.divu(bh, g.idx(s.H));
    h = g.remu(bh, g.idx(s.H));
    kvh = g.divu(h, g.idx(s.H / s.Hkv));
    i0 = g.mul(qb, g.idx(s.Bq));
    limit = s.masks.keyLimit(g.b, lengths, bi);
  }
};

/// body(j0, whole) for each block of Bk keys from j0 that some of the
/// `rows` query rows from i0 see (a batch of `limit` keys), in key order;
/// `whole`: every row sees all of the block (no mask to evaluate there).
template <typename OpTy>
void forEachSeenKeyBlock(GpuBuilder &g, FlashShape<OpTy> &s, Value limit,
                         Value i0, int64_t rows, int64_t Bk,
                         function_ref<void(Value, Value)> body) {
  auto keys = s.masks.keysSeenBy(g.b, limit, i0, rows, Bk);
  g.loop(keys.start, keys.end, g.idx(Bk), [&](Value j0) {
    body(j0, s.masks.isWhole(g.b, limit, i0, rows, j0, Bk,
                             /*existsOnly=*/true));
  });
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

/// The tile-level steps every kernel shares, for a workgroup of `W`
/// invocations of which this one is `tid`.
struct Workgroup {
  GpuBuilder &g;
  Value tid;
  int64_t W;

  /// body(r, c) for the elements of a rows x cols tile this invocation
  /// owns: e = tid, tid + W, ... in row-major order.
  void forEachElement(int64_t rows, int64_t cols,
                      function_ref<void(Value, Value)> body) {
    g.loop(tid, g.idx(rows * cols), g.idx(W), [&](Value e) {
      body(g.divu(e, g.idx(cols)), g.remu(e, g.idx(cols)));
    });
  }
  void fill(Value tile, int64_t rows, int64_t cols, Value value) {
    forEachElement(rows, cols, [&](Value r, Value c) {
      memref::StoreOp::create(g.b, value, tile, ValueRange{r, c});
    });
  }
  /// Copies rows [r0, r0 + rows) of `src[bi, head, :, :]` (zero past
  /// `extent`) into the tile `dst` (rows x width), in f32.
  void stageRows(Value src, Value bi, Value head, Value r0, int64_t rows,
                 int64_t width, int64_t extent, Value dst) {
    forEachElement(rows, width, [&](Value r, Value c) {
      Value row = g.add(r0, r);
      Value v = g.load(src, {bi, head, g.minu(row, g.idx(extent - 1)), c});
      memref::StoreOp::create(
          g.b, g.select(g.ult(row, g.idx(extent)), v, g.cst(0.0f)), dst,
          ValueRange{r, c});
    });
  }
  /// dst[r][c] = key row r0 + r of K or V (src) for (bi, head), zeros from
  /// `limit` on (a cache's rows past a batch's length may hold anything,
  /// NaN included, and P V multiplies them by p = 0): src is [B, Hkv,
  /// extent, width], or with a block table `table` [B, M] a pool of pages
  /// [N, Hkv, P, width] whose row j of batch bi is row j % P of page
  /// table[bi, j / P] (an entry outside [0, N) reads page 0).
  void stageKeys(Value src, Value table, Value bi, Value head, Value r0,
                 int64_t rows, int64_t width, int64_t extent, Value limit,
                 Value dst) {
    ArrayRef<int64_t> shape = cast<MemRefType>(src.getType()).getShape();
    forEachElement(rows, width, [&](Value r, Value c) {
      Value row = g.add(r0, r);
      Value at = g.minu(row, g.idx(extent - 1));
      SmallVector<Value> index = {bi, head, at, c};
      if (table) {
        Value entry = memref::LoadOp::create(
            g.b, table, ValueRange{bi, g.divu(at, g.idx(shape[2]))});
        Value page = arith::IndexCastOp::create(g.b, g.b.getIndexType(), entry);
        page = g.select(g.ult(page, g.idx(shape[0])), page, g.idx(0));
        index = {page, head, g.remu(at, g.idx(shape[2])), c};
      }
      Value v = g.load(src, index);
      memref::StoreOp::create(g.b, g.select(g.ult(row, limit), v, g.cst(0.0f)),
                              dst, ValueRange{r, c});
    });
  }
  /// Writes map(tile[r][c], r) to dst[bi, head, r0 + r, c] for the rows
  /// before `extent`, in dst's element type.
  void storeRows(Value tile, int64_t rows, int64_t cols, Value dst, Value bi,
                 Value head, Value r0, int64_t extent,
                 function_ref<Value(Value, Value)> map) {
    forEachElement(rows, cols, [&](Value r, Value c) {
      Value row = g.add(r0, r);
      g.ifThen(g.ult(row, g.idx(extent)), [&] {
        Value v = memref::LoadOp::create(g.b, tile, ValueRange{r, c});
        g.store(map(v, r), dst, {bi, head, row, c});
      });
    });
  }
  /// acc = acc * rowScale(r) (when given) + x y, for the tiles acc (rows x
  /// cols), x (rows x inner) and y (inner x cols): the kernels' block
  /// product (P V, dS K), an invocation per element of acc. The one place a
  /// target would put its matrix instructions.
  void multiplyAccumulate(Value acc, Value x, Value y, int64_t rows,
                          int64_t inner, int64_t cols,
                          function_ref<Value(Value)> rowScale = nullptr) {
    forEachElement(rows, cols, [&](Value r, Value c) {
      Value init = memref::LoadOp::create(g.b, acc, ValueRange{r, c});
      if (rowScale)
        init = g.mul(init, rowScale(r));
      Value sum = g.reduce(
          g.idx(0), g.idx(inner), g.idx(1), init, [&](Value k, Value a) {
            return g.add(a, g.mul(g.load(x, {r, k}), g.load(y, {k, c})));
          });
      memref::StoreOp::create(g.b, sum, acc, ValueRange{r, c});
    });
  }
};

/// body() on lane 0 of the subgroup only (it records a row's statistics).
inline void onLaneZero(GpuBuilder &g, const Subgroup &sg,
                       function_ref<void()> body) {
  g.ifThen(
      arith::CmpIOp::create(g.b, arith::CmpIPredicate::eq, sg.lane, g.idx(0)),
      body);
}

/// LSE[bi, h, i] of a [B, H, Sq] buffer (i clamped into range), +inf
/// where it is -inf: P = exp(S' - LSE) recomputed from it is then 0 on a row
/// that sees no key, not exp(-inf + inf) = NaN.
inline Value rowLseOrInf(GpuBuilder &g, int64_t Sq, Value lse, Value bi,
                         Value h, Value i) {
  Value l = g.load(lse, {bi, h, g.minu(i, g.idx(Sq - 1))});
  return g.select(g.isNegInf(l), g.cst(std::numeric_limits<float>::infinity()),
                  l);
}

inline Value allocLike(ImplicitLocOpBuilder &b, Type tensorType) {
  auto type = cast<RankedTensorType>(tensorType);
  return memref::AllocOp::create(
      b, MemRefType::get(type.getShape(), type.getElementType()));
}

/// A gpu.launch of grid (x, y) and `threads` invocations with
/// `sharedBytes` of dynamic shared memory; `body` builds inside it with the
/// block ids and the thread id.
inline void launch(ImplicitLocOpBuilder &b, int64_t x, int64_t y,
                   int64_t threads,
                   function_ref<void(Value, Value, Value)> body,
                   int64_t sharedBytes = 0) {
  auto c = [&](int64_t v) { return arith::ConstantIndexOp::create(b, v); };
  Value shared = sharedBytes
                     ? Value(arith::ConstantIntOp::create(b, sharedBytes, 32))
                     : Value();
  auto op = gpu::LaunchOp::create(b, c(x), c(y), c(1), c(threads), c(1), c(1),
                                  shared);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&op.getBody().front());
  body(op.getBlockIds().x, op.getBlockIds().y, op.getThreadIds().x);
  gpu::TerminatorOp::create(b);
}

/// The per-key partial gradients of a backward's float score captures
/// ([keys, elements] each; none for integer captures): the dK kernel gives
/// each key one owner invocation, which adds its pairs' capture adjoints in
/// row order, and `gradients` then sums them over the keys in order. No
/// atomics: deterministic.
struct CapturePartials {
  /// Whether the partials of `captures` fit in 64 MiB for `keys` keys.
  static bool fit(ValueRange captures, int64_t keys) {
    for (Value capture : captures)
      if (isFloatTensor(capture) &&
          keys * cast<ShapedType>(capture.getType()).getNumElements() * 4 >
              (int64_t(64) << 20))
        return false;
    return true;
  }
  CapturePartials(ImplicitLocOpBuilder &b, ValueRange captures, int64_t keys)
      : captures(captures), keys(keys) {
    for (Value capture : captures)
      partials.push_back(
          isFloatTensor(capture)
              ? Value(memref::AllocOp::create(
                    b,
                    MemRefType::get(
                        {keys,
                         cast<ShapedType>(capture.getType()).getNumElements()},
                        b.getF32Type())))
              : Value());
  }
  bool any() const {
    return llvm::any_of(partials, [](Value p) { return bool(p); });
  }
  /// Zeros key `key`'s partials (by its owner).
  void zero(GpuBuilder &g, Value key) {
    for (Value partial : partials)
      if (partial)
        g.loop(0, cast<MemRefType>(partial.getType()).getDimSize(1),
               [&](Value e) {
                 memref::StoreOp::create(g.b, g.cst(0.0f), partial,
                                         ValueRange{key, e});
               });
  }
  /// partial[key, element] += the adjoint (by the key's owner).
  void add(GpuBuilder &g, Value key, const CaptureAdjoint &adjoint) {
    Value partial = partials[adjoint.capture];
    if (!partial)
      return;
    Value flat = g.idx(0);
    for (auto [d, extent] : llvm::enumerate(shapeOf(captures[adjoint.capture])))
      flat = g.add(g.mul(flat, g.idx(extent)), adjoint.indices[d]);
    g.store(g.add(g.load(partial, {key, flat}), adjoint.adjoint), partial,
            {key, flat});
  }
  /// The captures' gradients, of `gradTypes`: the partials summed in key
  /// order, an invocation per element (zeros for integer captures).
  SmallVector<Value> gradients(GpuBuilder &g, int64_t W, TypeRange gradTypes) {
    ImplicitLocOpBuilder &b = g.b;
    SmallVector<Value> grads;
    for (auto [c, gradType] : llvm::enumerate(gradTypes)) {
      Value out = allocLike(b, gradType);
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
              g.reduce(g.idx(0), g.idx(keys), g.idx(1), g.cst(0.0f),
                       [&](Value t, Value acc) {
                         return g.add(acc, memref::LoadOp::create(
                                               b, partial, ValueRange{t, e}));
                       });
          g.store(sum, flat, {e});
        });
      });
      grads.push_back(tensorOf(b, out, gradType));
    }
    return grads;
  }

  /// Replaces a gradient op, whose results are the buffers `grads` (as
  /// tensors) and then one per score capture, with them and the captures'
  /// gradients.
  void replaceGradientOp(RewriterBase &rewriter, Operation *op, GpuBuilder &g,
                         int64_t W, ArrayRef<Value> grads) {
    SmallVector<Value> results;
    for (auto [buffer, type] : llvm::zip(grads, op->getResultTypes()))
      results.push_back(tensorOf(g.b, buffer, type));
    llvm::append_range(
        results,
        gradients(g, W,
                  TypeRange(op->getResultTypes()).drop_front(grads.size())));
    rewriter.replaceOp(op, results);
  }

  ValueRange captures;
  int64_t keys;
  SmallVector<Value> partials;
};

} // namespace gpu_kernels
} // namespace attnc

#endif // ATTNC_CODEGEN_GPU_GPUKERNELBUILDER_H
