// The Hopper (sm_90a) forward flash kernel on warpgroup MMA (see
// FlashMma.h): a workgroup is one warpgroup of 4 warps owning 64 query
// rows. S = Q K^T is one chain of wgmma.mma_async per key block with Q and
// K read from shared memory through matrix descriptors; P V takes P from
// the registers the softmax left it in (wgmma's register A operand, the
// same fragment layout as mma.sync's) and V through a descriptor of its
// rows (MN-major, transposed by the instruction). Q, K and V are staged by
// cp.async into the 128-byte swizzled layout the descriptors name
// (Copier::swizzle), K and V two key blocks deep; the online softmax,
// the rule and the stores are the mma.sync forward's (WarpTiles.h).
//
// Descriptors (PTX ISA, "Matrix Descriptor Format"; the layouts are
// CUTLASS's canonical GMMA ones): start address >> 4 in bits 0-13, the
// leading byte offset >> 4 in 16-29, the stride byte offset >> 4 in
// 32-45, 128-byte swizzle in 62-63. A tile is stored in atoms of 64
// columns (128 bytes a row), rows 128 bytes apart, 8-row groups 1024
// bytes apart:
//   K-major (Q for A, K for B of Q K^T): stride offset 1024 (the next 8
//     rows); the k step's 32 bytes within an atom move the start address;
//     the leading offset is unused;
//   MN-major (V for B of P V): leading offset = one atom (the next 64
//     columns of N), stride offset 1024 (the next 8 keys of K).
#include "codegen/cuda/FlashMma.h"

#include "codegen/TensorBuffers.h"
#include "codegen/cuda/WarpTiles.h"

using namespace mlir;

namespace attnc {

using namespace cuda_kernels;

namespace {

constexpr int64_t kAtom = 64;       // columns of a swizzle atom
constexpr int64_t kAtomRow = 128;   // bytes of an atom's row
constexpr int64_t kRowGroup = 1024; // bytes of 8 rows of an atom

/// Warpgroup MMA steps of a warpgroup's 64 rows.
class Warpgroup {
public:
  explicit Warpgroup(Warp &w) : w(w), g(w.g), b(w.g.b) {}

  /// A 128-byte-swizzled matrix descriptor of the tile at shared address
  /// `address` (index) plus `offset` bytes.
  Value descriptor(Value address, int64_t offset, int64_t leading,
                   int64_t stride) {
    Type i64 = b.getI64Type();
    auto c = [&](int64_t v) {
      return Value(arith::ConstantIntOp::create(b, i64, v));
    };
    Value start =
        arith::IndexCastUIOp::create(b, i64, g.add(address, g.idx(offset)));
    start = arith::ShRUIOp::create(
        b, arith::AndIOp::create(b, start, c(0x3FFFF)), c(4));
    int64_t fields =
        ((leading >> 4) << 16) | ((stride >> 4) << 32) | (int64_t(1) << 62);
    return arith::OrIOp::create(b, start, c(fields));
  }

  /// The accumulator struct of `tiles` (n tile by n tile, 4 registers
  /// each: wgmma's order) and back.
  Value structOf(const Tiles &tiles) {
    Value s = LLVM::UndefOp::create(b, structType(tiles.size() * 4));
    int64_t i = 0;
    for (const Tile &t : tiles)
      for (Value v : t)
        s = LLVM::InsertValueOp::create(b, s, v, i++);
    return s;
  }
  Tiles tilesOf(Value s, int64_t n) {
    Tiles tiles(n / 8);
    for (int64_t i = 0; i < n / 2; ++i)
      tiles[i / 4][i % 4] = LLVM::ExtractValueOp::create(b, s, i);
    return tiles;
  }

  /// acc (64 x n) = A B (+ acc when `accumulate`) over one k step, A and B
  /// K-major in shared memory.
  Value multiplyShared(Value acc, Value a, Value bDesc, int64_t n,
                       bool accumulate) {
    NVVM::WGMMATypes type = wgmmaType();
    return NVVM::WgmmaMmaAsyncOp::create(
        b, acc.getType(), acc, a, bDesc,
        NVVM::MMAShapeAttr::get(b.getContext(), 64, n, 16), type, type,
        NVVM::WGMMATypes::f32,
        accumulate ? NVVM::WGMMAScaleOut::one : NVVM::WGMMAScaleOut::zero,
        NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one, NVVM::MMALayout::row,
        NVVM::MMALayout::col, nullptr);
  }

  /// acc (64 x n) += A B over one k step, A the warp's fragment in
  /// registers, B MN-major in shared memory. NVVM's wgmma op takes A from
  /// shared memory only, hence inline PTX, in the form of the PTX that op
  /// produces.
  Value multiplyRegisters(Value acc, const AFragment &a, Value bDesc,
                          int64_t n) {
    int64_t count = n / 2;
    std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, $" +
                       std::to_string(2 * count + 5) + ", 0;\n" +
                       "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) +
                       "k16.f32." + elementName() + "." + elementName() + " {";
    std::string constraints;
    for (int64_t i = 0; i < count; ++i) {
      text += (i ? ", $" : "$") + std::to_string(i);
      constraints += (i ? ",=f" : "=f");
    }
    for (int64_t i = 0; i < count; ++i)
      constraints += "," + std::to_string(i);
    int64_t first = 2 * count;
    text += "}, {$" + std::to_string(first) + ", $" +
            std::to_string(first + 1) + ", $" + std::to_string(first + 2) +
            ", $" + std::to_string(first + 3) + "}, $" +
            std::to_string(first + 4) + ", p, $" + std::to_string(first + 6) +
            ", $" + std::to_string(first + 7) + ", $" +
            std::to_string(first + 8) + ";\n}\n";
    constraints += ",r,r,r,r,l,n,n,n,n";
    SmallVector<Value> operands;
    for (int64_t i = 0; i < count; ++i)
      operands.push_back(LLVM::ExtractValueOp::create(b, acc, i));
    for (Value v : a)
      operands.push_back(word(v));
    operands.push_back(bDesc);
    auto i32 = [&](int64_t v) {
      return Value(arith::ConstantIntOp::create(b, v, 32));
    };
    // scale-d 1 (accumulate), scale-a 1, scale-b 1, trans-b 1 (MN-major).
    operands.append({i32(1), i32(1), i32(1), i32(1)});
    return LLVM::InlineAsmOp::create(
               b, acc.getType(), operands, text, constraints,
               /*has_side_effects=*/true, /*is_align_stack=*/false,
               LLVM::tailcallkind::TailCallKind::None,
               LLVM::AsmDialectAttr::get(b.getContext(),
                                         LLVM::AsmDialect::AD_ATT),
               ArrayAttr())
        .getRes();
  }

  void fence() { NVVM::WgmmaFenceAlignedOp::create(b); }
  /// Commits the wgmma ops issued so far and waits for all of them.
  void commitAndWait() {
    NVVM::WgmmaGroupSyncAlignedOp::create(b);
    NVVM::WgmmaWaitGroupSyncOp::create(b, uint64_t(0));
  }

private:
  Type structType(int64_t registers) {
    return LLVM::LLVMStructType::getLiteral(
        b.getContext(), SmallVector<Type>(registers, b.getF32Type()));
  }
  NVVM::WGMMATypes wgmmaType() {
    return w.element.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  }
  std::string elementName() { return w.element.isBF16() ? "bf16" : "f16"; }
  /// A register pair as the 32-bit word PTX takes.
  Value word(Value pair) {
    Value v = vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()),
                                        pair);
    return vector::ExtractOp::create(b, v, 0);
  }

  Warp &w;
  GpuBuilder &g;
  ImplicitLocOpBuilder &b;
};

} // namespace

LogicalResult lowerToFlashWgmma(RewriterBase &rewriter, attn::AttentionOp op,
                                attn::MmaPlanAttr plan) {
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(op);
  int64_t Bq = 64, Bk = plan.getKeyBlock(), threads = 4 * kWarp;
  FlashShape<attn::AttentionOp> s(b, op, Bq, Bk, threads);
  int64_t D = s.D, Dv = s.Dv;
  if (D % kAtom || Dv % kAtom || plan.getWarps() != 4 ||
      plan.getQueryBlock() != Bq)
    return failure();
  GpuBuilder g(b);
  Type element = elementTypeOf(op.getQuery());
  Value q = bufferOf(b, op.getQuery()), k = bufferOf(b, op.getKey()),
        v = bufferOf(b, op.getValue()), lengths = bufferOf(b, op.getLengths());
  Value out = allocLike(b, op.getOutput().getType());
  Value lse = allocLike(b, op.getLse().getType());

  // Tiles in atoms of 64 columns: [atom][row][64], K and V in two stages.
  SharedTiles shared(b.getContext(), kRowGroup);
  shared.reserve({D / kAtom, Bq, kAtom}, element);
  shared.reserve({2, D / kAtom, Bk, kAtom}, element);
  shared.reserve({2, Dv / kAtom, Bk, kAtom}, element);
  if (shared.bytes > kMaxSharedBytes)
    return failure();
  int64_t kAtomBytes = Bk * kAtomRow, kStage = D / kAtom * kAtomBytes,
          vStage = Dv / kAtom * kAtomBytes;

  launch(
      b, (s.Sq + Bq - 1) / Bq, s.B * s.H, threads,
      [&](Value qb, Value bh, Value tid) {
        Warp w(g, element, tid);
        Warpgroup wg(w);
        QueryBlock blk(g, s, qb, bh, lengths);
        SmallVector<Value> at;
        SmallVector<Value> tiles = shared.views(b, &at);
        Value qs = tiles[0], ks = tiles[1], vs = tiles[2];
        Copier copy{g, tid, threads, {}, /*swizzle=*/true};
        auto keys = s.masks.keysSeenBy(b, blk.limit, blk.i0, Bq, Bk);
        auto stageKeys = [&](Value j0, Value stage) {
          copy.rows(k, blk.bi, blk.kvh, j0, Bk, D, s.Skv, blk.limit, ks, stage);
          copy.rows(v, blk.bi, blk.kvh, j0, Bk, Dv, s.Skv, blk.limit, vs,
                    stage);
        };
        // What cp.async wrote (the generic proxy) the tensor cores read
        // through the async proxy: each thread fences its copies before
        // the barrier.
        auto landed = [&](Value group, int32_t pending) {
          copy.wait(group, pending);
          NVVM::FenceProxyOp::create(
              b, NVVM::ProxyKind::async_shared,
              NVVM::SharedSpaceAttr::get(b.getContext(),
                                         NVVM::SharedSpace::shared_cta));
          g.barrier();
        };
        copy.rows(q, blk.bi, blk.h, blk.i0, Bq, D, s.Sq, g.idx(s.Sq), qs,
                  nullptr);
        stageKeys(keys.start, g.idx(0));
        Value first = copy.commit();
        landed(first, 0);
        SmallVector<Value> qDesc;
        for (int64_t kk = 0; kk < D / 16; ++kk)
          qDesc.push_back(wg.descriptor(
              at[0], kk / 4 * Bq * kAtomRow + kk % 4 * 32, 16, kRowGroup));
        Value row0 = g.add(blk.i0, g.mul(w.warp, g.idx(16)));
        SmallVector<Value, 2> rows = w.rowsFrom(row0);
        SoftmaxState st = forwardLoop(
            w, s, blk, keys, rows,
            [&](Value j0, Value stage) {
              stageKeys(g.add(j0, g.idx(Bk)),
                        arith::SubIOp::create(b, g.idx(1), stage));
              landed(copy.commit(), 1);
              // S = Q K^T (the first product ignores the accumulator).
              Value kBase = g.add(at[1], g.mul(stage, g.idx(kStage)));
              wg.fence();
              Value acc = wg.structOf(w.zeros(Bk));
              for (int64_t kk = 0; kk < D / 16; ++kk)
                acc = wg.multiplyShared(
                    acc, qDesc[kk],
                    wg.descriptor(kBase, kk / 4 * kAtomBytes + kk % 4 * 32, 16,
                                  kRowGroup),
                    Bk, /*accumulate=*/kk > 0);
              wg.commitAndWait();
              return wg.tilesOf(acc, Bk);
            },
            [&](const Tiles &sc, Value stage, SoftmaxState &st) {
              // O += P V, P rounded to pairs before the fence (the chain's
              // registers are written before it).
              Value vBase = g.add(at[2], g.mul(stage, g.idx(vStage)));
              SmallVector<AFragment> p;
              for (int64_t kk = 0; kk < Bk / 16; ++kk)
                p.push_back(w.fragmentOf(sc, kk));
              Value o = wg.structOf(st.o);
              wg.fence();
              for (int64_t kk = 0; kk < Bk / 16; ++kk)
                o = wg.multiplyRegisters(o, p[kk],
                                         wg.descriptor(vBase,
                                                       kk * 2 * kRowGroup,
                                                       kAtomBytes, kRowGroup),
                                         Dv);
              wg.commitAndWait();
              st.o = wg.tilesOf(o, Dv);
              // Every warp is done with this stage before it is refilled.
              g.barrier();
            });
        copy.wait(first, 0);
        storeForward(w, st, out, lse, blk.bi, blk.h, row0, rows, s.Sq);
      },
      shared.bytes);

  rewriter.replaceOp(op, {tensorOf(b, out, op.getOutput().getType()),
                          tensorOf(b, lse, op.getLse().getType())});
  return success();
}

} // namespace attnc
