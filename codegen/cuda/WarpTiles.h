// What the NVIDIA tensor-core kernels (FlashMma.cpp: mma.sync; FlashWgmma.cpp:
// wgmma) build with: a warp's accumulator tiles and fragments, shared-memory
// tiles, cp.async copies, the per-element score rule and the forward's
// online softmax over accumulator registers.
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
// without moving data between lanes. wgmma's accumulators (m64nN, f32) and
// register A operand give each warp of the warpgroup 16 rows in the same
// layout, n tile by n tile.
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
// mma.sync's shared tiles are padded by 8 elements a row (16 bytes), so
// that the 8 rows of each matrix ldmatrix reads start in 8 different
// 16-byte bank groups; wgmma's are swizzled instead (Copier::swizzle).
#ifndef ATTNC_CODEGEN_CUDA_WARPTILES_H
#define ATTNC_CODEGEN_CUDA_WARPTILES_H

#include "codegen/gpu/GpuKernelBuilder.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/MathExtras.h"

#include <array>

namespace attnc {
namespace cuda_kernels {

using namespace mlir;
using namespace gpu_kernels;

inline constexpr int64_t kPad = 8;
inline constexpr int64_t kWarp = 32;
/// The most dynamic shared memory a kernel may ask for: 99 KiB, what
/// sm_86 and sm_89 grant a workgroup (the sm_80 PTX also runs there;
/// sm_80 grants 163 KiB, sm_90 227 KiB). The plans stay below it (85 KiB
/// at most); a kernel over it is not built.
inline constexpr int64_t kMaxSharedBytes = 99 * 1024;
/// Elements of one cp.async of 16 bytes.
inline constexpr int64_t kChunk = 8;

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
  /// The A fragment of rows [m0, m0 + 16) and columns [k0, k0 + 16) of
  /// A^T, a row-major k x m tile (dS from the dK/dV kernel's dS^T).
  AFragment loadATransposed(Value tile, Value m0, int64_t k0) {
    return ldmatrix(tile, {g.add(g.idx(k0), bRow), g.add(m0, bCol)},
                    /*trans=*/true);
  }
  /// B fragments of two n tiles (n0 and n0 + 8) over k [k0, k0 + 16): from
  /// an n-major tile (rows n, columns k; Q K^T's K), or with `kMajor` from
  /// a row-major k x n tile (P V's V).
  std::array<Value, 4> loadB(Value tile, Value stage, int64_t n0, int64_t k0,
                             bool kMajor) {
    if (kMajor)
      return ldmatrix(
          tile, indices(stage, g.add(g.idx(k0), aRow), g.add(g.idx(n0), aCol)),
          /*trans=*/true);
    return ldmatrix(
        tile, indices(stage, g.add(g.idx(n0), bRow), g.add(g.idx(k0), bCol)),
        /*trans=*/false);
  }

  /// c + a b over one m16n8k16 step.
  Tile mma(const AFragment &a, Value b0, Value b1, const Tile &c) {
    Type f32 = b.getF32Type();
    Type result =
        LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
    NVVM::MMATypes type =
        element.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
    SmallVector<Value> as =
        llvm::map_to_vector(a, [&](Value v) { return operand(v); });
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
  /// k step kk, `bTile` (stage `stage`) holds B n-major or k-major, acc's
  /// columns from n0.
  void multiply(Tiles &acc, int64_t K, function_ref<AFragment(int64_t)> a,
                Value bTile, Value stage, bool kMajor, int64_t n0 = 0) {
    for (int64_t kk = 0; kk < K / 16; ++kk) {
      AFragment fragment = a(kk);
      for (int64_t np = 0; np < int64_t(acc.size()) / 2; ++np) {
        auto regs = loadB(bTile, stage, n0 + np * 16, kk * 16, kMajor);
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
      Value other =
          gpu::ShuffleOp::create(b, v, offset, kWarp, gpu::ShuffleMode::XOR)
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
  /// The lane's two rows of a tile whose warp's 16 rows start at row0.
  SmallVector<Value, 2> rowsFrom(Value row0) {
    return {g.add(row0, rowOf(0)), g.add(row0, rowOf(2))};
  }
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
    Value word =
        vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()), v);
    return vector::ExtractOp::create(b, word, 0);
  }
  SmallVector<Value> indices(Value stage, Value row, Value col) {
    if (stage)
      return {stage, row, col};
    return {row, col};
  }
};

/// Dynamic shared memory carved into tiles, each aligned to `alignment`
/// bytes (16, or 1024 for wgmma's 128-byte swizzle: the dynamic shared
/// memory itself is only 16-byte aligned, so the tiles start at a shift
/// computed at run time, within `alignment` bytes reserved for it).
class SharedTiles {
public:
  explicit SharedTiles(MLIRContext *context, int64_t alignment = 16)
      : alignment(alignment), space(gpu::AddressSpaceAttr::get(
                                  context, gpu::AddressSpace::Workgroup)) {
    if (alignment > 16)
      bytes = alignment;
  }
  /// Reserves a tile of `shape` elements of `type` (the next view).
  void reserve(ArrayRef<int64_t> shape, Type type) {
    int64_t offset = bytes - (alignment > 16 ? alignment : 0);
    int64_t size = type.getIntOrFloatBitWidth() / 8;
    for (int64_t d : shape)
      size *= d;
    bytes += (size + alignment - 1) / alignment * alignment;
    tiles.push_back({offset, llvm::to_vector(shape), type});
  }
  /// The views of every reserved tile, inside the kernel; `addresses`
  /// (when given) gets each tile's shared-memory address (index).
  SmallVector<Value> views(ImplicitLocOpBuilder &b,
                           SmallVector<Value> *addresses = nullptr) {
    Value base = gpu::DynamicSharedMemoryOp::create(
        b, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                           MemRefLayoutAttrInterface(), space));
    auto idx = [&](int64_t v) { return arith::ConstantIndexOp::create(b, v); };
    Value at = memref::ExtractAlignedPointerAsIndexOp::create(b, base);
    Value shift = idx(0);
    if (alignment > 16)
      shift = arith::RemUIOp::create(
          b,
          arith::SubIOp::create(b, idx(alignment),
                                arith::RemUIOp::create(b, at, idx(alignment))),
          idx(alignment));
    SmallVector<Value> out;
    for (const Entry &e : tiles) {
      Value offset = arith::AddIOp::create(b, shift, idx(e.offset));
      out.push_back(memref::ViewOp::create(
          b,
          MemRefType::get(e.shape, e.type, MemRefLayoutAttrInterface(), space),
          base, offset, ValueRange{}));
      if (addresses)
        addresses->push_back(arith::AddIOp::create(b, at, offset));
    }
    return out;
  }
  int64_t bytes = 0;

private:
  struct Entry {
    int64_t offset;
    SmallVector<int64_t> shape;
    Type type;
  };
  int64_t alignment;
  Attribute space;
  SmallVector<Entry> tiles;
};

/// cp.async copies of a workgroup's `threads` invocations.
struct Copier {
  GpuBuilder &g;
  Value tid;
  int64_t threads;
  SmallVector<Value> tokens;
  /// rows() writes wgmma's 128-byte swizzled layout: dst[stage][a][r][:]
  /// holds columns 64 a .. 64 a + 63 of row r, its 16-byte chunk c at
  /// chunk c ^ (r % 8) (the tile 1024-byte aligned).
  bool swizzle = false;

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
      if (swizzle) {
        Value chunk = g.remu(g.divu(c, g.idx(kChunk)), g.idx(8));
        Value swizzled = arith::XOrIOp::create(g.b, chunk, g.remu(r, g.idx(8)));
        at = {g.divu(c, g.idx(64)), r, g.mul(swizzled, g.idx(kChunk))};
      }
      if (stage)
        at.insert(at.begin(), stage);
      tokens.push_back(nvgpu::DeviceAsyncCopyOp::create(
          g.b, nvgpu::DeviceAsyncTokenType::get(g.b.getContext()), dst, at, src,
          ValueRange{bi, head, srcRow, c}, g.b.getIndexAttr(kChunk),
          g.select(valid, g.idx(kChunk), g.idx(0)), g.b.getUnitAttr()));
    }
  }
  /// Entries [i0, i0 + rows) of src[bi, h, :] (f32) into dst[stage][:], 4
  /// bytes a copy (any alignment); entries from `extent` on read as 0.
  void entries(Value src, Value bi, Value h, Value i0, int64_t rows,
               int64_t extent, Value dst, Value stage) {
    for (int64_t k = 0; k * threads < rows; ++k) {
      Value r = g.minu(g.add(tid, g.idx(k * threads)), g.idx(rows - 1));
      Value i = g.add(i0, r);
      tokens.push_back(nvgpu::DeviceAsyncCopyOp::create(
          g.b, nvgpu::DeviceAsyncTokenType::get(g.b.getContext()), dst,
          ValueRange{stage, r}, src,
          ValueRange{bi, h, g.minu(i, g.idx(extent - 1))}, g.b.getIndexAttr(1),
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

inline constexpr float kLog2e = llvm::numbers::log2ef;
inline constexpr float kLn2 = llvm::numbers::ln2f;

/// A loop from lo to hi by step carrying `init`: body(iv, values) returns
/// the next values.
inline SmallVector<Value>
carry(ImplicitLocOpBuilder &b, Value lo, Value hi, Value step, ValueRange init,
      function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto loop = scf::ForOp::create(b, lo, hi, step, init);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  scf::YieldOp::create(b,
                       body(loop.getInductionVar(), loop.getRegionIterArgs()));
  return SmallVector<Value>(loop.getResults());
}

/// Accumulator tiles flattened into loop values and back.
inline void flatten(const Tiles &tiles, SmallVector<Value> &out) {
  for (const Tile &t : tiles)
    out.append(t.begin(), t.end());
}
inline Tiles unflatten(ValueRange values, int64_t count) {
  Tiles tiles(count);
  for (int64_t n = 0; n < count; ++n)
    for (int64_t c = 0; c < 4; ++c)
      tiles[n][c] = values[n * 4 + c];
  return tiles;
}

/// Stores 16-row accumulator tiles of the warp (rows from `row0`) into
/// dst[bi, head, row, :] in dst's element type, times `scale` (per row
/// r in {0, 1}: rows g and g + 8), for rows before `extent`.
inline void storeTiles(Warp &w, const Tiles &tiles, Value dst, Value bi,
                       Value head, Value row0, int64_t extent,
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
inline SmallVector<Value>
perElement(GpuBuilder &g, int64_t count, int64_t arity, Value whole,
           function_ref<SmallVector<Value>(int64_t, int64_t, bool)> body) {
  SmallVector<Type> types(count * 4 * arity, g.f32);
  auto ifOp = scf::IfOp::create(g.b, types, whole, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(g.b);
  for (bool isWhole : {true, false}) {
    g.b.setInsertionPointToStart(isWhole ? ifOp.thenBlock() : ifOp.elseBlock());
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

/// The forward's running state of a warp's 16 rows: O tiles, the row
/// maxima (log2 units) and the lane's part of the row sums, for rows g
/// and g + 8.
struct SoftmaxState {
  Tiles o;
  Value m[2], l[2];

  /// As loop values and back.
  SmallVector<Value> values() const {
    SmallVector<Value> out;
    flatten(o, out);
    out.append({m[0], m[1], l[0], l[1]});
    return out;
  }
  static SoftmaxState of(ValueRange values, int64_t tiles) {
    SoftmaxState s;
    s.o = unflatten(values, tiles);
    for (int64_t r = 0; r < 2; ++r) {
      s.m[r] = values[tiles * 4 + r];
      s.l[r] = values[tiles * 4 + 2 + r];
    }
    return s;
  }
};

/// The score tiles `sc` of keys from j0 for rows `rows` (g and g + 8 of
/// the warp) with the rule applied, in log2 units: scale, score_mod, and
/// on blocks that are not whole the masks (the mask_mod on all).
template <typename Shape>
void applyRule(Warp &w, Shape &s, Tiles &sc, Value bi, Value h,
               ArrayRef<Value> rows, Value j0, Value limit, Value whole) {
  GpuBuilder &g = w.g;
  Tiles in = sc;
  sc = unflatten(
      perElement(g, in.size(), 1, whole,
                 [&](int64_t n, int64_t c, bool isWhole) {
                   Value i = rows[c / 2];
                   Value j = g.add(j0, w.columnOf(n, c));
                   Value score = s.modifiedScore(g, in[n][c], bi, h, i, j);
                   if (Value mask = maskAt(g, s, bi, h, i, j, limit, isWhole))
                     score = g.select(mask, score, g.negInf());
                   return SmallVector<Value>{g.mul(score, g.cst(kLog2e))};
                 }),
      in.size());
}

/// One online-softmax step: `sc` (scores in log2 units) becomes P, the
/// state's maxima and sums advance and O is rescaled.
inline void softmaxStep(Warp &w, Tiles &sc, SoftmaxState &st) {
  GpuBuilder &g = w.g;
  ImplicitLocOpBuilder &b = g.b;
  Value alpha[2], shift[2];
  for (int64_t r = 0; r < 2; ++r) {
    Value rowMax = g.negInf();
    for (const Tile &t : sc)
      for (int64_t c = 2 * r; c < 2 * r + 2; ++c)
        rowMax = arith::MaximumFOp::create(b, rowMax, t[c]);
    rowMax = w.quadReduce(rowMax, /*max=*/true);
    Value newMax = arith::MaximumFOp::create(b, st.m[r], rowMax);
    // A row that saw only -inf subtracts 0 (exp2(-inf) = 0).
    shift[r] = g.select(g.isNegInf(newMax), g.cst(0.0f), newMax);
    alpha[r] = math::Exp2Op::create(b, g.sub(st.m[r], shift[r]));
    st.m[r] = newMax;
  }
  Value sum[2] = {g.cst(0.0f), g.cst(0.0f)};
  for (Tile &t : sc)
    for (int64_t c = 0; c < 4; ++c) {
      t[c] = math::Exp2Op::create(b, g.sub(t[c], shift[c / 2]));
      sum[c / 2] = g.add(sum[c / 2], t[c]);
    }
  for (int64_t r = 0; r < 2; ++r)
    st.l[r] = g.add(g.mul(st.l[r], alpha[r]), sum[r]);
  for (Tile &t : st.o)
    for (int64_t c = 0; c < 4; ++c)
      t[c] = g.mul(t[c], alpha[c / 2]);
}

/// The forward's loop over the key blocks of a workgroup's query block
/// `blk` (`s.Bk` keys each, in shared-memory stages 0, 1, 0, ... from
/// keys.start): `products(j0, stage)` gives the block's raw score tiles
/// for the lane's rows `rows`; the rule and the online softmax turn them
/// into P, and `accumulate(P, stage, state)` adds P V into the state's O.
/// Returns the state after the last block.
template <typename Shape>
SoftmaxState forwardLoop(
    Warp &w, Shape &s, const QueryBlock &blk, const MaskTiles::KeyRange &keys,
    ArrayRef<Value> rows, function_ref<Tiles(Value, Value)> products,
    function_ref<void(const Tiles &, Value, SoftmaxState &)> accumulate) {
  GpuBuilder &g = w.g;
  ImplicitLocOpBuilder &b = g.b;
  SoftmaxState init{
      w.zeros(s.Dv), {g.negInf(), g.negInf()}, {g.cst(0.0f), g.cst(0.0f)}};
  int64_t tiles = s.Dv / 8;
  SmallVector<Value> result =
      carry(b, keys.start, keys.end, g.idx(s.Bk), init.values(),
            [&](Value j0, ValueRange values) {
              SoftmaxState st = SoftmaxState::of(values, tiles);
              Value stage = g.remu(
                  g.divu(arith::SubIOp::create(b, j0, keys.start), g.idx(s.Bk)),
                  g.idx(2));
              Tiles sc = products(j0, stage);
              Value whole =
                  s.masks.isWhole(b, blk.limit, blk.i0, s.Bq, j0, s.Bk,
                                  /*existsOnly=*/true);
              applyRule(w, s, sc, blk.bi, blk.h, rows, j0, blk.limit, whole);
              softmaxStep(w, sc, st);
              accumulate(sc, stage, st);
              return st.values();
            });
  return SoftmaxState::of(result, tiles);
}

/// Stores O / l and the LSE of the warp's 16 rows from `row0` (rows g and
/// g + 8: `rows`): rows that saw no key get O = 0 and LSE = -inf, NaN
/// stays NaN.
inline void storeForward(Warp &w, const SoftmaxState &st, Value out, Value lse,
                         Value bi, Value h, Value row0, ArrayRef<Value> rows,
                         int64_t Sq) {
  GpuBuilder &g = w.g;
  ImplicitLocOpBuilder &b = g.b;
  Value inv[2], logSum[2];
  for (int64_t r = 0; r < 2; ++r) {
    Value l = w.quadReduce(st.l[r], /*max=*/false);
    Value seen =
        arith::CmpFOp::create(b, arith::CmpFPredicate::UNE, l, g.cst(0.0f));
    inv[r] =
        g.select(seen, arith::DivFOp::create(b, g.cst(1.0f), l), g.cst(0.0f));
    logSum[r] = g.select(
        seen, g.mul(g.add(st.m[r], math::Log2Op::create(b, l)), g.cst(kLn2)),
        g.negInf());
  }
  storeTiles(w, st.o, out, bi, h, row0, Sq, [&](int64_t r) { return inv[r]; });
  g.ifThen(arith::CmpIOp::create(b, arith::CmpIPredicate::eq, w.quad, g.idx(0)),
           [&] {
             for (int64_t r = 0; r < 2; ++r)
               g.ifThen(g.ult(rows[r], g.idx(Sq)), [&] {
                 memref::StoreOp::create(b, logSum[r], lse,
                                         ValueRange{bi, h, rows[r]});
               });
           });
}

} // namespace cuda_kernels
} // namespace attnc

#endif // ATTNC_CODEGEN_CUDA_WARPTILES_H
