// The NVIDIA tensor-core flash kernels (see FlashMma.h).
//
// Fragments of mma.sync.m16n8k16 (PTX ISA, "Matrix fragments for
// mma.m16n8k16"), for lane l = 4 g + t of a warp, each register two 16-bit
// elements (pairs of consecutive columns or k):
//   A (16 x 16, m x k):  0: (g, 2t)  1: (g + 8, 2t)  2: (g, 2t + 8)
//                        3: (g + 8, 2t + 8)
//   B (16 x 8, k x n):   0: (2t, g)  1: (2t + 8, g)
//   C, D (16 x 8, f32):  0, 1: (g, 2t + {0, 1})  2, 3: (g + 8, 2t + {0, 1})
// So the C tiles of columns 16c .. 16c + 15, rounded to pairs, are the A
// fragment of a product over those columns (P V, dS K, P^T dO, dS^T Q)
// without moving data between lanes.
//
// ldmatrix.x4 gives lane l, in register m, the elements (l / 4, 2 (l % 4))
// and the next of the 8 x 8 matrix whose 8 rows lanes 8m .. 8m + 7 address
// (.trans: (2 (l % 4), l / 4) and the one below). Hence the per-lane row
// and column offsets below:
//   A of a row-major tile, and B of a k-major tile (.trans):
//     row l % 16, column 8 (l / 16);
//   B of an n-major tile (K rows for Q K^T): row l % 8 + 8 (l / 16),
//     column 8 ((l / 8) % 2): registers 0, 1 are B of the first 8 n,
//     2, 3 of the next 8.
// Shared tiles are padded by 8 elements a row (16 bytes), so that the 8
// rows of each matrix ldmatrix reads start in 8 different 16-byte bank
// groups.
#include "codegen/cuda/FlashMma.h"

#include "codegen/TensorBuffers.h"
#include "codegen/gpu/GpuKernelBuilder.h"
#include "passes/ScalarGradients.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <array>

using namespace mlir;

namespace attnc {

using namespace gpu_kernels;

namespace {

constexpr int64_t kPad = 8;
constexpr int64_t kWarp = 32;
/// Elements of one cp.async of 16 bytes.
constexpr int64_t kChunk = 8;

/// A warp's 16 x 8 accumulator tile: four f32 registers.
using Tile = std::array<Value, 4>;
/// Tiles of 16 rows by 8 n columns each, in column order.
using Tiles = SmallVector<Tile>;
/// An A fragment: four registers of element pairs (vector<2xT>).
using AFragment = std::array<Value, 4>;

/// A warp's matrix steps, for elements of type `element` (f16 or bf16).
class Warp {
public:
  Warp(GpuBuilder &g, Type element, Value tid)
      : g(g), b(g.b), element(element) {
    Value lane = g.remu(tid, g.idx(kWarp));
    warp = g.divu(tid, g.idx(kWarp));
    group = g.divu(lane, g.idx(4));
    quad = g.remu(lane, g.idx(4));
    aRow = g.remu(lane, g.idx(16));
    aCol = g.mul(g.divu(lane, g.idx(16)), g.idx(8));
    bRow = g.add(g.remu(lane, g.idx(8)), aCol);
    bCol = g.mul(g.remu(g.divu(lane, g.idx(8)), g.idx(2)), g.idx(8));
    pair = VectorType::get({2}, element);
  }

  /// The four registers ldmatrix.x4 loads from `tile` at the lane's
  /// `indices` (the leading ones select a stage).
  std::array<Value, 4> ldmatrix(Value tile, ValueRange indices, bool trans) {
    Value m = nvgpu::LdMatrixOp::create(b, VectorType::get({4, 2}, element),
                                        tile, indices, trans, 4);
    std::array<Value, 4> regs;
    for (int64_t i = 0; i < 4; ++i)
      regs[i] = vector::ExtractOp::create(b, m, i);
    return regs;
  }
  /// The A fragment of rows [r0, r0 + 16) and columns [c0, c0 + 16) of a
  /// row-major tile (stage `stage` of a staged one, when given).
  AFragment loadA(Value tile, Value stage, Value r0, int64_t c0) {
    return ldmatrix(tile,
                    indices(stage, g.add(r0, aRow), g.add(g.idx(c0), aCol)),
                    /*trans=*/false);
  }
  /// B fragments of two n tiles (n0 and n0 + 8) over k [k0, k0 + 16): from
  /// an n-major tile (rows n, columns k; Q K^T's K), or with `kMajor` from
  /// a row-major k x n tile (P V's V).
  std::array<Value, 4> loadB(Value tile, Value stage, int64_t n0, int64_t k0,
                             bool kMajor) {
    if (kMajor)
      return ldmatrix(tile,
                      indices(stage, g.add(g.idx(k0), aRow),
                              g.add(g.idx(n0), aCol)),
                      /*trans=*/true);
    return ldmatrix(
        tile, indices(stage, g.add(g.idx(n0), bRow), g.add(g.idx(k0), bCol)),
        /*trans=*/false);
  }

  /// c + a b over one m16n8k16 step.
  Tile mma(const AFragment &a, Value b0, Value b1, const Tile &c) {
    Type f32 = b.getF32Type();
    Type result = LLVM::LLVMStructType::getLiteral(b.getContext(),
                                                   {f32, f32, f32, f32});
    NVVM::MMATypes type =
        element.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
    SmallVector<Value> as = llvm::map_to_vector(a, [&](Value v) {
      return operand(v);
    });
    Value d = NVVM::MmaOp::create(
        b, result, as, ValueRange{operand(b0), operand(b1)}, ValueRange(c),
        ArrayRef<int64_t>{16, 8, 16}, std::nullopt, std::nullopt,
        std::array<NVVM::MMATypes, 2>{type, type},
        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                       NVVM::MMALayout::col});
    Tile out;
    for (int64_t i = 0; i < 4; ++i)
      out[i] = LLVM::ExtractValueOp::create(b, d, i);
    return out;
  }

  /// acc += A B over k [0, K) for 16 rows: `a(kk)` gives the A fragment of
  /// k step kk, `bTile` (stage `stage`) holds B n-major or k-major.
  void multiply(Tiles &acc, int64_t K, function_ref<AFragment(int64_t)> a,
                Value bTile, Value stage, bool kMajor) {
    for (int64_t kk = 0; kk < K / 16; ++kk) {
      AFragment fragment = a(kk);
      for (int64_t np = 0; np < int64_t(acc.size()) / 2; ++np) {
        auto regs = loadB(bTile, stage, np * 16, kk * 16, kMajor);
        // ldmatrix's registers: (n0, k lo), (n0, k hi) n-major, (k lo, n0),
        // (k hi, n0) k-major: the same B registers either way.
        acc[2 * np] = mma(fragment, regs[0], regs[1], acc[2 * np]);
        acc[2 * np + 1] = mma(fragment, regs[2], regs[3], acc[2 * np + 1]);
      }
    }
  }

  /// Two f32 as a pair of elements.
  Value pack(Value x, Value y) {
    Value v = vector::FromElementsOp::create(
        b, VectorType::get({2}, b.getF32Type()), ValueRange{x, y});
    return arith::TruncFOp::create(b, pair, v);
  }
  /// The A fragment of k step kk (columns 16 kk ..) of accumulator tiles.
  AFragment fragmentOf(const Tiles &tiles, int64_t kk) {
    const Tile &lo = tiles[2 * kk], &hi = tiles[2 * kk + 1];
    return {pack(lo[0], lo[1]), pack(lo[2], lo[3]), pack(hi[0], hi[1]),
            pack(hi[2], hi[3])};
  }

  /// v reduced over the 4 lanes of a quad (one row of a C tile).
  Value quadReduce(Value v, bool max) {
    for (int32_t offset : {1, 2}) {
      Value other = gpu::ShuffleOp::create(b, v, offset, kWarp,
                                           gpu::ShuffleMode::XOR)
                        .getShuffleResult();
      v = max ? Value(arith::MaximumFOp::create(b, v, other))
              : Value(arith::AddFOp::create(b, v, other));
    }
    return v;
  }

  Tiles zeros(int64_t columns) {
    Value zero = g.cst(0.0f);
    return Tiles(columns / 8, Tile{zero, zero, zero, zero});
  }

  /// The row of register c of a C tile within the warp's 16 (0 or 8 + g).
  Value rowOf(int64_t c) { return g.add(group, g.idx(c >= 2 ? 8 : 0)); }
  /// The column of register c of C tile n.
  Value columnOf(int64_t n, int64_t c) {
    return g.add(g.mul(quad, g.idx(2)), g.idx(n * 8 + (c & 1)));
  }

  GpuBuilder &g;
  ImplicitLocOpBuilder &b;
  Type element;
  VectorType pair;
  Value warp, group, quad, aRow, aCol, bRow, bCol;

private:
  Value operand(Value v) {
    // bf16 operands are typed i32 (mma.sync's bf16 form in NVVM).
    if (!element.isBF16())
      return v;
    Value word = vector::BitCastOp::create(
        b, VectorType::get({1}, b.getI32Type()), v);
    return vector::ExtractOp::create(b, word, 0);
  }
  SmallVector<Value> indices(Value stage, Value row, Value col) {
    if (stage)
      return {stage, row, col};
    return {row, col};
  }
};

/// Dynamic shared memory carved into tiles, each aligned to 16 bytes.
class SharedTiles {
public:
  explicit SharedTiles(MLIRContext *context)
      : space(gpu::AddressSpaceAttr::get(context,
                                         gpu::AddressSpace::Workgroup)) {}
  /// Reserves a tile of `shape` elements of `type` (the next view).
  void reserve(ArrayRef<int64_t> shape, Type type) {
    int64_t offset = bytes;
    int64_t size = type.getIntOrFloatBitWidth() / 8;
    for (int64_t d : shape)
      size *= d;
    bytes += (size + 15) / 16 * 16;
    tiles.push_back({offset, llvm::to_vector(shape), type});
  }
  /// The views of every reserved tile, inside the kernel.
  SmallVector<Value> views(ImplicitLocOpBuilder &b) {
    Value base = gpu::DynamicSharedMemoryOp::create(
        b, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                           MemRefLayoutAttrInterface(), space));
    SmallVector<Value> out;
    for (const Entry &e : tiles)
      out.push_back(memref::ViewOp::create(
          b, MemRefType::get(e.shape, e.type, MemRefLayoutAttrInterface(), space),
          base, arith::ConstantIndexOp::create(b, e.offset), ValueRange{}));
    return out;
  }
  int64_t bytes = 0;

private:
  struct Entry {
    int64_t offset;
    SmallVector<int64_t> shape;
    Type type;
  };
  Attribute space;
  SmallVector<Entry> tiles;
};

/// cp.async copies of a workgroup's `threads` invocations.
struct Copier {
  GpuBuilder &g;
  Value tid;
  int64_t threads;
  SmallVector<Value> tokens;

  /// Rows [r0, r0 + rows) of src[bi, head, :, :] (`width` elements) into
  /// dst[stage][r][:] (dst[r][:] without a stage), in 16-byte copies;
  /// rows from `limit` on are zero-filled (their reads clamped to row
  /// extent - 1, and read as nothing).
  void rows(Value src, Value bi, Value head, Value r0, int64_t rows,
            int64_t width, int64_t extent, Value limit, Value dst,
            Value stage) {
    int64_t perRow = width / kChunk, total = rows * perRow;
    for (int64_t k = 0; k * threads < total; ++k) {
      // Past the last copy, invocations repeat it (the same bytes to the
      // same place): copies stay unconditional, so their tokens can be
      // grouped.
      Value e = g.minu(g.add(tid, g.idx(k * threads)), g.idx(total - 1));
      Value r = g.divu(e, g.idx(perRow));
      Value c = g.mul(g.remu(e, g.idx(perRow)), g.idx(kChunk));
      Value row = g.add(r0, r);
      Value valid = g.ult(row, limit);
      Value srcRow = g.minu(row, g.idx(extent - 1));
      SmallVector<Value> at = {r, c};
      if (stage)
        at.insert(at.begin(), stage);
      tokens.push_back(nvgpu::DeviceAsyncCopyOp::create(
          g.b, nvgpu::DeviceAsyncTokenType::get(g.b.getContext()), dst, at,
          src, ValueRange{bi, head, srcRow, c}, g.b.getIndexAttr(kChunk),
          g.select(valid, g.idx(kChunk), g.idx(0)), g.b.getUnitAttr()));
    }
  }
  /// Entries [i0, i0 + rows) of src[bi, h, :] (f32) into dst[stage][:], 4
  /// bytes a copy (any alignment); entries from `extent` on read as 0.
  void vector(Value src, Value bi, Value h, Value i0, int64_t rows,
              int64_t extent, Value dst, Value stage) {
    for (int64_t k = 0; k * threads < rows; ++k) {
      Value r = g.minu(g.add(tid, g.idx(k * threads)), g.idx(rows - 1));
      Value i = g.add(i0, r);
      tokens.push_back(nvgpu::DeviceAsyncCopyOp::create(
          g.b, nvgpu::DeviceAsyncTokenType::get(g.b.getContext()), dst,
          ValueRange{stage, r}, src,
          ValueRange{bi, h, g.minu(i, g.idx(extent - 1))},
          g.b.getIndexAttr(1),
          g.select(g.ult(i, g.idx(extent)), g.idx(1), g.idx(0)), nullptr));
    }
  }
  /// Commits the copies queued so far as one group.
  Value commit() {
    Value group = nvgpu::DeviceAsyncCreateGroupOp::create(
        g.b, nvgpu::DeviceAsyncTokenType::get(g.b.getContext()), tokens);
    tokens.clear();
    return group;
  }
  /// Waits until at most `pending` committed groups are in flight.
  void wait(Value group, int32_t pending) {
    nvgpu::DeviceAsyncWaitOp::create(g.b, group,
                                     g.b.getI32IntegerAttr(pending));
  }
};

constexpr float kLog2e = llvm::numbers::log2ef;
constexpr float kLn2 = llvm::numbers::ln2f;

/// A loop from lo to hi by step carrying `init`: body(iv, values) returns
/// the next values.
SmallVector<Value>
carry(ImplicitLocOpBuilder &b, Value lo, Value hi, Value step,
      ValueRange init,
      function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto loop = scf::ForOp::create(b, lo, hi, step, init);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  scf::YieldOp::create(b, body(loop.getInductionVar(),
                               loop.getRegionIterArgs()));
  return SmallVector<Value>(loop.getResults());
}

/// Accumulator tiles flattened into loop values and back.
void flatten(const Tiles &tiles, SmallVector<Value> &out) {
  for (const Tile &t : tiles)
    out.append(t.begin(), t.end());
}
Tiles unflatten(ValueRange values, int64_t count) {
  Tiles tiles(count);
  for (int64_t n = 0; n < count; ++n)
    for (int64_t c = 0; c < 4; ++c)
      tiles[n][c] = values[n * 4 + c];
  return tiles;
}

/// Stores 16-row accumulator tiles of the warp (rows from `row0`) into
/// dst[bi, head, row, :] in dst's element type, times `scale` (per row
/// r in {0, 1}: rows g and g + 8), for rows before `extent`.
void storeTiles(Warp &w, const Tiles &tiles, Value dst, Value bi, Value head,
                Value row0, int64_t extent,
                function_ref<Value(int64_t)> rowScale) {
  GpuBuilder &g = w.g;
  for (int64_t r = 0; r < 2; ++r) {
    Value row = g.add(row0, w.rowOf(2 * r));
    Value factor = rowScale(r);
    g.ifThen(g.ult(row, g.idx(extent)), [&] {
      for (int64_t n = 0; n < int64_t(tiles.size()); ++n) {
        Value v = w.pack(g.mul(tiles[n][2 * r], factor),
                         g.mul(tiles[n][2 * r + 1], factor));
        auto store = vector::StoreOp::create(
            g.b, v, dst, ValueRange{bi, head, row, w.columnOf(n, 0)});
        store.setAlignment(4);
      }
    });
  }
}

/// The `arity` values `body(n, c, isWhole)` gives for register c of each
/// of `count` accumulator tiles, built twice: for a block MaskTiles calls
/// whole (`whole` true at run time) and for the others. Flattened: value
/// v of (n, c) at (4 n + c) arity + v.
SmallVector<Value>
perElement(GpuBuilder &g, int64_t count, int64_t arity, Value whole,
           function_ref<SmallVector<Value>(int64_t, int64_t, bool)> body) {
  SmallVector<Type> types(count * 4 * arity, g.f32);
  auto ifOp = scf::IfOp::create(g.b, types, whole, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(g.b);
  for (bool isWhole : {true, false}) {
    g.b.setInsertionPointToStart(isWhole ? ifOp.thenBlock()
                                         : ifOp.elseBlock());
    SmallVector<Value> values;
    for (int64_t n = 0; n < count; ++n)
      for (int64_t c = 0; c < 4; ++c)
        llvm::append_range(values, body(n, c, isWhole));
    scf::YieldOp::create(g.b, values);
  }
  return SmallVector<Value>(ifOp.getResults());
}

/// What masks (b, h, i, j): in a whole block the mask_mod alone (null
/// without one), else the whole rule.
template <typename Shape>
Value maskAt(GpuBuilder &g, Shape &s, Value bi, Value h, Value i, Value j,
             Value limit, bool isWhole) {
  return isWhole ? s.maskMod(g, bi, h, i, j)
                 : s.visible(g, bi, h, i, j, limit, nullptr);
}

} // namespace

LogicalResult lowerToFlashMma(RewriterBase &rewriter, attn::AttentionOp op,
                              attn::MmaPlanAttr plan) {
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(op);
  int64_t warps = plan.getWarps(), Bq = 16 * warps, Bk = plan.getKeyBlock();
  int64_t threads = kWarp * warps;
  FlashShape<attn::AttentionOp> s(op, Bq, Bk, threads);
  GpuBuilder g(b);
  Type element = elementTypeOf(op.getQuery());
  Value q = bufferOf(b, op.getQuery()), k = bufferOf(b, op.getKey()),
        v = bufferOf(b, op.getValue()), lengths = bufferOf(b, op.getLengths());
  Value out = allocLike(b, op.getOutput().getType());
  Value lse = allocLike(b, op.getLse().getType());
  int64_t D = s.D, Dv = s.Dv;

  SharedTiles shared(b.getContext());
  shared.reserve({Bq, D + kPad}, element);
  shared.reserve({2, Bk, D + kPad}, element);
  shared.reserve({2, Bk, Dv + kPad}, element);

  launch(
      b, (s.Sq + Bq - 1) / Bq, s.B * s.H, threads,
      [&](Value qb, Value bh, Value tid) {
        Warp w(g, element, tid);
        QueryBlock blk(g, s, qb, bh, lengths);
        SmallVector<Value> tiles = shared.views(b);
        Value qs = tiles[0], ks = tiles[1], vs = tiles[2];
        Copier copy{g, tid, threads, {}};
        auto keys = s.masks.keysSeenBy(b, blk.limit, blk.i0, Bq, Bk);
        auto stageKeys = [&](Value j0, Value stage) {
          copy.rows(k, blk.bi, blk.kvh, j0, Bk, D, s.Skv, blk.limit, ks,
                    stage);
          copy.rows(v, blk.bi, blk.kvh, j0, Bk, Dv, s.Skv, blk.limit, vs,
                    stage);
        };
        copy.rows(q, blk.bi, blk.h, blk.i0, Bq, D, s.Sq, g.idx(s.Sq), qs,
                  nullptr);
        stageKeys(keys.start, g.idx(0));
        Value first = copy.commit();
        copy.wait(first, 0);
        g.barrier();
        Value warpRow = g.mul(w.warp, g.idx(16));
        SmallVector<AFragment> qf;
        for (int64_t kk = 0; kk < D / 16; ++kk)
          qf.push_back(w.loadA(qs, nullptr, warpRow, kk * 16));
        // Rows i0 + 16 warp + g and + 8: maxima (log2 units) and the
        // lane's part of the sums.
        Value rows[2] = {g.add(blk.i0, g.add(warpRow, w.rowOf(0))),
                         g.add(blk.i0, g.add(warpRow, w.rowOf(2)))};
        SmallVector<Value> init;
        flatten(w.zeros(Dv), init);
        init.append({g.negInf(), g.negInf(), g.cst(0.0f), g.cst(0.0f)});
        int64_t nO = Dv / 8;
        SmallVector<Value> result = carry(
            b, keys.start, keys.end, g.idx(Bk), init,
            [&](Value j0, ValueRange values) {
              Tiles o = unflatten(values, nO);
              Value m[2] = {values[nO * 4], values[nO * 4 + 1]};
              Value l[2] = {values[nO * 4 + 2], values[nO * 4 + 3]};
              Value step = g.divu(arith::SubIOp::create(b, j0, keys.start),
                                  g.idx(Bk));
              Value stage = g.remu(step, g.idx(2));
              Value next = arith::SubIOp::create(b, g.idx(1), stage);
              // The next block's K and V (past the end: rows past the
              // limit, zero-filled, or never used).
              stageKeys(g.add(j0, g.idx(Bk)), next);
              Value group = copy.commit();
              copy.wait(group, 1);
              g.barrier();
              // S = Q K^T.
              Tiles sc = w.zeros(Bk);
              w.multiply(
                  sc, D, [&](int64_t kk) { return qf[kk]; }, ks, stage,
                  /*kMajor=*/false);
              // The rule, in log2 units.
              Value whole = s.masks.isWhole(b, blk.limit, blk.i0, Bq, j0, Bk,
                                            /*existsOnly=*/true);
              sc = unflatten(
                  perElement(
                      g, sc.size(), 1, whole,
                      [&](int64_t n, int64_t c, bool isWhole) {
                        Value i = rows[c / 2];
                        Value j = g.add(j0, w.columnOf(n, c));
                        Value score = s.modifiedScore(g, sc[n][c], blk.bi,
                                                      blk.h, i, j);
                        if (Value mask = maskAt(g, s, blk.bi, blk.h, i, j,
                                                blk.limit, isWhole))
                          score = g.select(mask, score, g.negInf());
                        return SmallVector<Value>{
                            g.mul(score, g.cst(kLog2e))};
                      }),
                  sc.size());
              // The online softmax.
              Value alpha[2], shift[2];
              for (int64_t r = 0; r < 2; ++r) {
                Value rowMax = g.negInf();
                for (const Tile &t : sc)
                  for (int64_t c = 2 * r; c < 2 * r + 2; ++c)
                    rowMax = arith::MaximumFOp::create(b, rowMax, t[c]);
                rowMax = w.quadReduce(rowMax, /*max=*/true);
                Value newMax = arith::MaximumFOp::create(b, m[r], rowMax);
                // A row that saw only -inf subtracts 0 (exp2(-inf) = 0).
                shift[r] = g.select(g.isNegInf(newMax), g.cst(0.0f), newMax);
                alpha[r] = math::Exp2Op::create(b, g.sub(m[r], shift[r]));
                m[r] = newMax;
              }
              Value sum[2] = {g.cst(0.0f), g.cst(0.0f)};
              for (Tile &t : sc)
                for (int64_t c = 0; c < 4; ++c) {
                  t[c] = math::Exp2Op::create(b, g.sub(t[c], shift[c / 2]));
                  sum[c / 2] = g.add(sum[c / 2], t[c]);
                }
              for (int64_t r = 0; r < 2; ++r)
                l[r] = g.add(g.mul(l[r], alpha[r]), sum[r]);
              for (Tile &t : o)
                for (int64_t c = 0; c < 4; ++c)
                  t[c] = g.mul(t[c], alpha[c / 2]);
              // O += P V.
              w.multiply(
                  o, Bk, [&](int64_t kk) { return w.fragmentOf(sc, kk); }, vs,
                  stage, /*kMajor=*/true);
              // Every warp is done with this stage before it is refilled.
              g.barrier();
              SmallVector<Value> next2;
              flatten(o, next2);
              next2.append({m[0], m[1], l[0], l[1]});
              return next2;
            });
        // No copy may land in shared memory after the workgroup ends.
        copy.wait(first, 0);
        Tiles o = unflatten(result, nO);
        Value inv[2], logSum[2];
        for (int64_t r = 0; r < 2; ++r) {
          Value m = result[nO * 4 + r];
          Value l = w.quadReduce(result[nO * 4 + 2 + r], /*max=*/false);
          // Rows that saw no key: O = 0, LSE = -inf; NaN stays NaN.
          Value seen =
              arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, l,
                                    g.cst(0.0f));
          inv[r] = g.select(seen, arith::DivFOp::create(b, g.cst(1.0f), l),
                            g.cst(0.0f));
          logSum[r] = g.select(
              seen,
              g.mul(g.add(m, math::Log2Op::create(b, l)), g.cst(kLn2)),
              g.negInf());
        }
        storeTiles(w, o, out, blk.bi, blk.h, g.add(blk.i0, warpRow), s.Sq,
                   [&](int64_t r) { return inv[r]; });
        g.ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, w.quad,
                                       g.idx(0)),
                 [&] {
                   for (int64_t r = 0; r < 2; ++r)
                     g.ifThen(g.ult(rows[r], g.idx(s.Sq)), [&] {
                       memref::StoreOp::create(
                           b, logSum[r], lse,
                           ValueRange{blk.bi, blk.h, rows[r]});
                     });
                 });
      },
      shared.bytes);

  rewriter.replaceOp(op, {tensorOf(b, out, op.getOutput().getType()),
                          tensorOf(b, lse, op.getLse().getType())});
  return success();
}

namespace {

/// What the backward kernels need of one score: P (recomputed from the
/// LSE, in log2 units) and dS = P (dP - Delta) dscore_mod/dS.
struct ScoreGrad {
  Value p, ds;
};

template <typename Shape>
ScoreGrad scoreGrad(GpuBuilder &g, Shape &s, Value dot, Value dp, Value bi,
                    Value h, Value i, Value j, Value mask, Value lse2,
                    Value delta) {
  ImplicitLocOpBuilder &b = g.b;
  Value score = s.scaled(g, dot), dScore;
  if (!s.op.getScoreMod().empty()) {
    ScoreModAdjoints sweep = buildScoreModAdjoints(
        b, b.getLoc(), s.op.getScoreMod(), s.scoreModArgs(g, score, bi, h, i, j),
        g.cst(1.0f));
    score = sweep.result;
    dScore = sweep.scoreAdjoint;
  }
  if (mask)
    score = g.select(mask, score, g.negInf());
  Value p = math::Exp2Op::create(b, g.sub(g.mul(score, g.cst(kLog2e)), lse2));
  Value ds = g.mul(p, g.sub(dp, delta));
  return {p, dScore ? g.mul(ds, dScore) : ds};
}

/// A row's LSE in log2 units, +inf for a row that saw no key (so that
/// every P of it is exp2(-inf) = 0).
Value lseLog2(GpuBuilder &g, Value lse) {
  Value inf = g.cst(std::numeric_limits<float>::infinity());
  return g.select(g.isNegInf(lse), inf, g.mul(lse, g.cst(kLog2e)));
}

} // namespace

LogicalResult lowerToFlashMma(RewriterBase &rewriter, attn::AttentionGradOp op,
                              attn::MmaPlanAttr plan) {
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(op);
  int64_t warps = plan.getWarps(), R = 16 * warps, threads = kWarp * warps;
  // dQ: R rows a workgroup, key_block keys a step; dK/dV: R keys a
  // workgroup, query_block rows a step.
  int64_t Bk = plan.getKeyBlock(), Bq = plan.getQueryBlock();
  FlashShape<attn::AttentionGradOp> sq(op, R, Bk, threads);
  FlashShape<attn::AttentionGradOp> skv(op, Bq, R, threads);
  GpuBuilder g(b);
  Type element = elementTypeOf(op.getQuery());
  Value q = bufferOf(b, op.getQuery()), k = bufferOf(b, op.getKey()),
        v = bufferOf(b, op.getValue()), o = bufferOf(b, op.getOutput()),
        lse = bufferOf(b, op.getLse()), dO = bufferOf(b, op.getOutputGrad()),
        dLse = bufferOf(b, op.getLseGrad()),
        lengths = bufferOf(b, op.getLengths());
  Value dq = allocLike(b, op.getQueryGrad().getType());
  Value dk = allocLike(b, op.getKeyGrad().getType());
  Value dv = allocLike(b, op.getValueGrad().getType());
  int64_t B = sq.B, H = sq.H, Hkv = sq.Hkv, Sq = sq.Sq, Skv = sq.Skv,
          D = sq.D, Dv = sq.Dv;
  Value delta = memref::AllocOp::create(
      b, MemRefType::get({B, H, Sq}, b.getF32Type()));

  // Delta = rowsum(dO * O) - dLSE: a warp per row, lanes over columns.
  int64_t rowsTotal = B * H * Sq;
  launch(b, (rowsTotal + warps - 1) / warps, 1, threads,
         [&](Value blk, Value, Value tid) {
           Value lane = g.remu(tid, g.idx(kWarp));
           Value row = g.add(g.mul(blk, g.idx(warps)),
                             g.divu(tid, g.idx(kWarp)));
           g.ifThen(g.ult(row, g.idx(rowsTotal)), [&] {
             Value i = g.remu(row, g.idx(Sq));
             Value bh = g.divu(row, g.idx(Sq));
             Value bi = g.divu(bh, g.idx(H)), h = g.remu(bh, g.idx(H));
             Value sum = g.reduce(
                 lane, g.idx(Dv), g.idx(kWarp), g.cst(0.0f),
                 [&](Value c, Value acc) {
                   return Value(math::FmaOp::create(
                       b, g.load(dO, {bi, h, i, c}), g.load(o, {bi, h, i, c}),
                       acc));
                 });
             for (int32_t offset : {16, 8, 4, 2, 1})
               sum = g.add(sum, gpu::ShuffleOp::create(b, sum, offset, kWarp,
                                                       gpu::ShuffleMode::XOR)
                                    .getShuffleResult());
             if (dLse)
               sum = g.sub(sum, g.load(dLse, {bi, h, i}));
             g.ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane,
                                            g.idx(0)),
                      [&] {
                        memref::StoreOp::create(b, sum, delta,
                                                ValueRange{bi, h, i});
                      });
           });
         });

  // dQ: R rows of (b, h) a workgroup; Q and dO fragments in registers.
  {
    SharedTiles shared(b.getContext());
    shared.reserve({R, D + kPad}, element);
    shared.reserve({R, Dv + kPad}, element);
    shared.reserve({2, Bk, D + kPad}, element);
    shared.reserve({2, Bk, Dv + kPad}, element);
    auto &s = sq;
    launch(
        b, (Sq + R - 1) / R, B * H, threads,
        [&](Value qb, Value bh, Value tid) {
          Warp w(g, element, tid);
          QueryBlock blk(g, s, qb, bh, lengths);
          SmallVector<Value> tiles = shared.views(b);
          Value qs = tiles[0], dos = tiles[1], ks = tiles[2], vs = tiles[3];
          Copier copy{g, tid, threads, {}};
          auto keys = s.masks.keysSeenBy(b, blk.limit, blk.i0, R, Bk);
          auto stageKeys = [&](Value j0, Value stage) {
            copy.rows(k, blk.bi, blk.kvh, j0, Bk, D, Skv, blk.limit, ks,
                      stage);
            copy.rows(v, blk.bi, blk.kvh, j0, Bk, Dv, Skv, blk.limit, vs,
                      stage);
          };
          copy.rows(q, blk.bi, blk.h, blk.i0, R, D, Sq, g.idx(Sq), qs,
                    nullptr);
          copy.rows(dO, blk.bi, blk.h, blk.i0, R, Dv, Sq, g.idx(Sq), dos,
                    nullptr);
          stageKeys(keys.start, g.idx(0));
          Value first = copy.commit();
          copy.wait(first, 0);
          g.barrier();
          Value warpRow = g.mul(w.warp, g.idx(16));
          SmallVector<AFragment> qf, dof;
          for (int64_t kk = 0; kk < D / 16; ++kk)
            qf.push_back(w.loadA(qs, nullptr, warpRow, kk * 16));
          for (int64_t kk = 0; kk < Dv / 16; ++kk)
            dof.push_back(w.loadA(dos, nullptr, warpRow, kk * 16));
          Value rows[2], lse2[2], rowDelta[2];
          for (int64_t r = 0; r < 2; ++r) {
            rows[r] = g.add(blk.i0, g.add(warpRow, w.rowOf(2 * r)));
            Value at = g.minu(rows[r], g.idx(Sq - 1));
            lse2[r] = lseLog2(
                g, memref::LoadOp::create(b, lse, ValueRange{blk.bi, blk.h, at}));
            rowDelta[r] =
                memref::LoadOp::create(b, delta, ValueRange{blk.bi, blk.h, at});
          }
          SmallVector<Value> init;
          flatten(w.zeros(D), init);
          int64_t nQ = D / 8;
          SmallVector<Value> result = carry(
              b, keys.start, keys.end, g.idx(Bk), init,
              [&](Value j0, ValueRange values) {
                Tiles acc = unflatten(values, nQ);
                Value step = g.divu(arith::SubIOp::create(b, j0, keys.start),
                                    g.idx(Bk));
                Value stage = g.remu(step, g.idx(2));
                stageKeys(g.add(j0, g.idx(Bk)),
                          arith::SubIOp::create(b, g.idx(1), stage));
                Value group = copy.commit();
                copy.wait(group, 1);
                g.barrier();
                Tiles sc = w.zeros(Bk), dp = w.zeros(Bk);
                w.multiply(
                    sc, D, [&](int64_t kk) { return qf[kk]; }, ks, stage,
                    /*kMajor=*/false);
                w.multiply(
                    dp, Dv, [&](int64_t kk) { return dof[kk]; }, vs, stage,
                    /*kMajor=*/false);
                Value whole = s.masks.isWhole(b, blk.limit, blk.i0, R, j0, Bk,
                                              /*existsOnly=*/true);
                // dS in place of S.
                sc = unflatten(
                    perElement(
                        g, sc.size(), 1, whole,
                        [&](int64_t n, int64_t c, bool isWhole) {
                          Value i = rows[c / 2];
                          Value j = g.add(j0, w.columnOf(n, c));
                          Value mask = maskAt(g, s, blk.bi, blk.h, i, j,
                                              blk.limit, isWhole);
                          return SmallVector<Value>{
                              scoreGrad(g, s, sc[n][c], dp[n][c], blk.bi,
                                        blk.h, i, j, mask, lse2[c / 2],
                                        rowDelta[c / 2])
                                  .ds};
                        }),
                    sc.size());
                // dQ += dS K.
                w.multiply(
                    acc, Bk, [&](int64_t kk) { return w.fragmentOf(sc, kk); },
                    ks, stage, /*kMajor=*/true);
                g.barrier();
                SmallVector<Value> next;
                flatten(acc, next);
                return next;
              });
          copy.wait(first, 0);
          Value scale = g.cst(float(s.scale));
          storeTiles(w, unflatten(result, nQ), dq, blk.bi, blk.h,
                     g.add(blk.i0, warpRow), Sq,
                     [&](int64_t) { return scale; });
        },
        shared.bytes);
  }

  // dK and dV: R keys of (b, KV head) a workgroup, over every head of the
  // group and every block of Bq query rows that sees them.
  {
    SharedTiles shared(b.getContext());
    shared.reserve({R, D + kPad}, element);
    shared.reserve({R, Dv + kPad}, element);
    shared.reserve({2, Bq, D + kPad}, element);
    shared.reserve({2, Bq, Dv + kPad}, element);
    shared.reserve({2, Bq}, b.getF32Type());
    shared.reserve({2, Bq}, b.getF32Type());
    auto &s = skv;
    int64_t group = H / Hkv;
    launch(
        b, (Skv + R - 1) / R, B * Hkv, threads,
        [&](Value kb, Value bg, Value tid) {
          Warp w(g, element, tid);
          Value bi = g.divu(bg, g.idx(Hkv)), kvh = g.remu(bg, g.idx(Hkv));
          Value j0 = g.mul(kb, g.idx(R));
          Value limit = s.masks.keyLimit(b, lengths, bi);
          SmallVector<Value> tiles = shared.views(b);
          Value ks = tiles[0], vs = tiles[1], qs = tiles[2], dos = tiles[3],
                ls = tiles[4], ds = tiles[5];
          Copier copy{g, tid, threads, {}};
          auto seeing = s.masks.rowsSeeing(b, limit, j0, R, Bq);
          Value first = seeing.first, end = g.minu(seeing.second, g.idx(Sq));
          // Blocks of rows per head (0 when the keys are past the limit).
          Value span = arith::SubIOp::create(
              b, arith::MaxSIOp::create(b, end, first), first);
          Value blocks = g.select(
              g.ult(j0, limit),
              g.divu(g.add(span, g.idx(Bq - 1)), g.idx(Bq)), g.idx(0));
          Value steps = g.mul(blocks, g.idx(group));
          Value perHead = arith::MaxUIOp::create(b, blocks, g.idx(1));
          // Step t: head kvh * group + t / blocks, rows from first + Bq
          // (t % blocks).
          auto headOf = [&](Value t) {
            return g.add(g.mul(kvh, g.idx(group)), g.divu(t, perHead));
          };
          auto rowsOf = [&](Value t) {
            return g.add(first, g.mul(g.remu(t, perHead), g.idx(Bq)));
          };
          auto stageRows = [&](Value t, Value stage) {
            Value h = headOf(t), i0 = rowsOf(t);
            copy.rows(q, bi, h, i0, Bq, D, Sq, g.idx(Sq), qs, stage);
            copy.rows(dO, bi, h, i0, Bq, Dv, Sq, g.idx(Sq), dos, stage);
            copy.vector(lse, bi, h, i0, Bq, Sq, ls, stage);
            copy.vector(delta, bi, h, i0, Bq, Sq, ds, stage);
          };
          copy.rows(k, bi, kvh, j0, R, D, Skv, limit, ks, nullptr);
          copy.rows(v, bi, kvh, j0, R, Dv, Skv, limit, vs, nullptr);
          stageRows(g.idx(0), g.idx(0));
          Value firstGroup = copy.commit();
          copy.wait(firstGroup, 0);
          g.barrier();
          Value warpRow = g.mul(w.warp, g.idx(16));
          Value keyOf[2] = {g.add(j0, g.add(warpRow, w.rowOf(0))),
                            g.add(j0, g.add(warpRow, w.rowOf(2)))};
          SmallVector<Value> init;
          flatten(w.zeros(D), init);
          flatten(w.zeros(Dv), init);
          int64_t nK = D / 8, nV = Dv / 8;
          SmallVector<Value> result = carry(
              b, g.idx(0), steps, g.idx(1), init,
              [&](Value t, ValueRange values) {
                Tiles dkAcc = unflatten(values.take_front(nK * 4), nK);
                Tiles dvAcc = unflatten(values.drop_front(nK * 4), nV);
                Value stage = g.remu(t, g.idx(2));
                Value nextStep = g.minu(g.add(t, g.idx(1)),
                                        arith::SubIOp::create(b, steps,
                                                              g.idx(1)));
                stageRows(nextStep, arith::SubIOp::create(b, g.idx(1), stage));
                Value grp = copy.commit();
                copy.wait(grp, 1);
                g.barrier();
                Value h = headOf(t), i0 = rowsOf(t);
                // S^T = K Q^T and dP^T = V dO^T: keys by rows.
                Tiles st = w.zeros(Bq), dpt = w.zeros(Bq);
                w.multiply(
                    st, D,
                    [&](int64_t kk) {
                      return w.loadA(ks, nullptr, warpRow, kk * 16);
                    },
                    qs, stage, /*kMajor=*/false);
                w.multiply(
                    dpt, Dv,
                    [&](int64_t kk) {
                      return w.loadA(vs, nullptr, warpRow, kk * 16);
                    },
                    dos, stage, /*kMajor=*/false);
                Value whole = s.masks.isWhole(b, limit, i0, Bq, j0, R,
                                              /*existsOnly=*/true);
                // The rows' LSE and Delta (the columns of this lane).
                SmallVector<Value> rowLse, rowDelta;
                for (int64_t n = 0; n < int64_t(st.size()); ++n)
                  for (int64_t c = 0; c < 2; ++c) {
                    Value col = w.columnOf(n, c);
                    rowLse.push_back(lseLog2(
                        g, memref::LoadOp::create(b, ls,
                                                  ValueRange{stage, col})));
                    rowDelta.push_back(
                        memref::LoadOp::create(b, ds, ValueRange{stage, col}));
                  }
                SmallVector<Value> grads = perElement(
                    g, st.size(), 2, whole,
                    [&](int64_t n, int64_t c, bool isWhole) {
                      Value i = g.add(i0, w.columnOf(n, c));
                      Value j = keyOf[c / 2];
                      Value mask =
                          maskAt(g, s, bi, h, i, j, limit, isWhole);
                      ScoreGrad sg = scoreGrad(
                          g, s, st[n][c], dpt[n][c], bi, h, i, j, mask,
                          rowLse[2 * n + c % 2], rowDelta[2 * n + c % 2]);
                      return SmallVector<Value>{sg.p, sg.ds};
                    });
                for (int64_t n = 0; n < int64_t(st.size()); ++n)
                  for (int64_t c = 0; c < 4; ++c) {
                    st[n][c] = grads[(4 * n + c) * 2];
                    dpt[n][c] = grads[(4 * n + c) * 2 + 1];
                  }
                // dV += P^T dO, dK += dS^T Q.
                w.multiply(
                    dvAcc, Bq, [&](int64_t kk) { return w.fragmentOf(st, kk); },
                    dos, stage, /*kMajor=*/true);
                w.multiply(
                    dkAcc, Bq,
                    [&](int64_t kk) { return w.fragmentOf(dpt, kk); }, qs,
                    stage, /*kMajor=*/true);
                g.barrier();
                SmallVector<Value> next;
                flatten(dkAcc, next);
                flatten(dvAcc, next);
                return next;
              });
          copy.wait(firstGroup, 0);
          Value scale = g.cst(float(s.scale)), one = g.cst(1.0f);
          storeTiles(w, unflatten(ArrayRef(result).take_front(nK * 4), nK), dk,
                     bi, kvh, g.add(j0, warpRow), Skv,
                     [&](int64_t) { return scale; });
          storeTiles(w, unflatten(ArrayRef(result).drop_front(nK * 4), nV), dv,
                     bi, kvh, g.add(j0, warpRow), Skv,
                     [&](int64_t) { return one; });
        },
        shared.bytes);
  }

  SmallVector<Value> results = {tensorOf(b, dq, op.getQueryGrad().getType()),
                                tensorOf(b, dk, op.getKeyGrad().getType()),
                                tensorOf(b, dv, op.getValueGrad().getType())};
  // Integer score captures (the plan covers no float ones): zero
  // gradients.
  for (Value grad : op.getScoreCapturesGrad()) {
    Value zeros = allocLike(b, grad.getType());
    auto type = cast<MemRefType>(zeros.getType());
    int64_t n = type.getNumElements();
    Value flat = memref::CollapseShapeOp::create(
        b, zeros,
        SmallVector<ReassociationIndices>{
            llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()))});
    launch(b, (n + threads - 1) / threads, 1, threads,
           [&](Value blk, Value, Value tid) {
             Value e = g.add(g.mul(blk, g.idx(threads)), tid);
             g.ifThen(g.ult(e, g.idx(n)), [&] {
               memref::StoreOp::create(
                   b,
                   arith::ConstantOp::create(
                       b, type.getElementType(),
                       b.getZeroAttr(type.getElementType())),
                   flat, ValueRange{e});
             });
           });
    results.push_back(tensorOf(b, zeros, grad.getType()));
  }
  rewriter.replaceOp(op, results);
  return success();
}

} // namespace attnc
