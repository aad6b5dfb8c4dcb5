// Projections and merges as tiled GEMMs (see Gemm.h).
#include "codegen/cpu/Gemm.h"

#include "codegen/cpu/KernelBuilder.h"
#include "dialect/AttnOps.h"
#include "dialect/ShapeUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace attnc {
namespace {

class GemmBuilder : public KernelBuilder {
public:
  GemmBuilder(ImplicitLocOpBuilder &b, Operation *op, int64_t rows)
      : KernelBuilder(b, rows),
        parent(op->getParentOfType<func::FuncOp>()) {}

  /// Index functions: A(m, k) and B(k, n) load a scalar (any element type)
  /// from their buffer; C(m, n) stores an f32 scalar (converted) into it.
  using Load = function_ref<Value(Value, Value)>;
  using Store = function_ref<void(Value, Value, Value)>;

  /// A copy of `elements` elements: from kParallelCopy elements, body(t)
  /// for the tasks t in [0, tasks) on the thread pool, outlined (the
  /// caller's `buffers`, which body's ops use through the Load and Store
  /// functions, become the outlined function's arguments); else body(null),
  /// the whole copy, here. (A layer at S=2048, E=512 ran its forward 10%
  /// and forward+backward 15% faster on 2 threads with parallel copies;
  /// the small examples' would take more JIT work than they save:
  /// mha_causal's 1.72 G instructions became 2.11 G with every copy
  /// outlined.)
  static constexpr int64_t kParallelCopy = 1 << 16;
  void copyTasks(StringRef name, ArrayRef<Value> buffers, int64_t tasks,
                 int64_t elements, function_ref<void(Value)> body) {
    if (elements < kParallelCopy) {
      body(Value());
      return;
    }
    parallelTasks(
        parent, name, buffers, tasks,
        [](ArrayRef<Value>) { return SmallVector<Value>(); },
        [&](ArrayRef<Value> args, ArrayRef<Value>, Value t) {
          body(t);
          Region &region = *Value(args.front()).getParentRegion();
          for (auto [outer, arg] : llvm::zip(buffers, args))
            replaceAllUsesInRegionWith(outer, arg, region);
        });
  }

  /// Rows [64 t, 64 t + 64) of M for copyTasks' task t, or all of them.
  void forRowBlock(Value t, int64_t M, function_ref<void(Value)> body) {
    if (!t) {
      loop(0, M, body);
      return;
    }
    Value m0 = arith::MulIOp::create(b, t, idx(kCopyRows));
    Value end = arith::MinUIOp::create(
        b, arith::AddIOp::create(b, m0, idx(kCopyRows)), idx(M));
    loop(m0, end, 1, body);
  }
  static constexpr int64_t kCopyRows = 64;

  /// C = A B for A [M, K], B [K, N]: A copied to [1, 1, M, K] f32, B to
  /// 32-wide panels [1, 1, P, K, 32] (zero past N), the product per 8-row
  /// block of A on the thread pool into [M, 32 P], then stored through C;
  /// large copies are on the pool too (blocks of 64 rows, panels). loadA,
  /// loadB and storeC read aSource and bSource and write cDest. `aView`
  /// and `cView`, when given, are A and C already in those layouts (an
  /// f32 operand whose rows are A's, a result whose rows are C's): they
  /// skip the copy in and out.
  void product(int64_t M, int64_t N, int64_t K, Value aSource, Load loadA,
               Value bSource, Load loadB, Value cDest, Store storeC,
               Value aView = Value(), Value cView = Value()) {
    int64_t panels = (N + kCols - 1) / kCols;
    int64_t copyBlocks = (M + kCopyRows - 1) / kCopyRows;
    Value a = aView ? aView : alloc({1, 1, M, K}),
          bp = alloc({1, 1, panels, K, kCols}),
          c = cView ? cView : alloc({M, panels * kCols});
    if (!aView)
      copyTasks("__attnc_gemm_copy_a", {aSource, a}, copyBlocks, M * K,
                [&](Value t) {
                  forRowBlock(t, M, [&](Value m) {
                    copyLoop(0, K, [&](Value k) {
                      memref::StoreOp::create(b, toF32(loadA(m, k)), a,
                                              ValueRange{idx(0), idx(0), m, k});
                    });
                  });
                });
    copyTasks("__attnc_gemm_pack_b", {bSource, bp}, panels, K * N,
              [&](Value t) {
                // (A null t: every panel.)
                packPanels(bp, {idx(0), idx(0)}, N, loadB, t);
              });
    int64_t blocks = (M + rows - 1) / rows;
    // Products of one shape share one function (a layer's projections).
    std::string name = "__attnc_gemm_" + std::to_string(M) + "x" +
                       std::to_string(N) + "x" + std::to_string(K);
    sharedParallelTasks(
        parent, name, {a, bp, c}, blocks,
        [&](ArrayRef<Value>) {
          return SmallVector<Value>{scratchBuffer({K, rows})};
        },
        [&](ArrayRef<Value> args, ArrayRef<Value> scratch, Value t) {
          Value m0 = arith::MulIOp::create(b, t, idx(rows));
          Value zero = idx(0);
          packRows(args[0], zero, zero, m0, M - 1, scratch[0]);
          loop(0, panels, [&](Value panel) {
            SmallVector<Value> acc =
                tileProduct(scratch[0], {}, args[1], zero, zero, panel);
            Value n0 = arith::MulIOp::create(b, panel, idx(kCols));
            // Rows past M repeat row M - 1: they store its own values.
            for (int64_t r = 0; r < rows; ++r) {
              Value m = arith::MinUIOp::create(
                  b, arith::AddIOp::create(b, m0, idx(r)), idx(M - 1));
              for (int64_t w = 0; w < 2; ++w)
                vector::StoreOp::create(
                    b, acc[2 * r + w], args[2],
                    ValueRange{m, arith::AddIOp::create(b, n0,
                                                        idx(w * kLanes))});
            }
          });
        });
    if (!cView)
      copyTasks(
          "__attnc_gemm_store_c", {c, cDest}, copyBlocks, M * N, [&](Value t) {
            forRowBlock(t, M, [&](Value m) {
              copyLoop(0, N, [&](Value n) {
                storeC(m, n, memref::LoadOp::create(b, c, ValueRange{m, n}));
              });
            });
          });
  }

  /// An f32 buffer with identity layout as `shape` (same elements in the
  /// same order), else null: product's aView/cView.
  Value reshaped(Value memref, ArrayRef<int64_t> shape) {
    auto type = cast<MemRefType>(memref.getType());
    if (!type.getElementType().isF32() || !type.getLayout().isIdentity())
      return Value();
    ReassociationIndices all;
    for (int64_t d = 0; d < type.getRank(); ++d)
      all.push_back(d);
    Value flat = type.getRank() == 1
                     ? memref
                     : memref::CollapseShapeOp::create(
                           b, memref, ArrayRef<ReassociationIndices>{all});
    ReassociationIndices into;
    for (int64_t d = 0; d < int64_t(shape.size()); ++d)
      into.push_back(d);
    return memref::ExpandShapeOp::create(b, shape, flat,
                                         ArrayRef<ReassociationIndices>{into});
  }

  /// cView for C [M, N] stored as `memref`: its rows are C's when N is a
  /// whole number of panels.
  Value resultView(Value memref, int64_t M, int64_t N) {
    return N % kCols ? Value() : reshaped(memref, {M, N});
  }

  Value toF32(Value x) {
    return x.getType().isF32() ? x : arith::ExtFOp::create(b, f32, x);
  }
  Value load(Value memref, ValueRange indices) {
    return memref::LoadOp::create(b, memref, indices);
  }
  /// (b, s) of a row m of the B*S rows, and (h, d) of a column of H*D.
  std::pair<Value, Value> split(Value i, int64_t inner) {
    return {arith::DivUIOp::create(b, i, idx(inner)),
            arith::RemUIOp::create(b, i, idx(inner))};
  }
  /// Where element (row, col) of a [B*S, N] matrix lies in [B, S, N].
  SmallVector<Value> rowsAt(Value row, Value col, int64_t S) {
    auto [bi, s] = split(row, S);
    return {bi, s, col};
  }
  /// Where element (row, col) of a [B*S, H*D] matrix lies in [B, H, S, D].
  SmallVector<Value> headsAt(Value row, Value col, int64_t S, int64_t D) {
    auto [bi, s] = split(row, S);
    auto [h, d] = split(col, D);
    return {bi, h, s, d};
  }

  SmallVector<Value> build(attn::ProjectionOp op) {
    // Y[b,h,s,d] = sum_e X[b,s,e] W[e, h*D + d]: M = B*S, N = H*D, K = E.
    Value x = bufferOf(op.getInput()), w = bufferOf(op.getWeight());
    ArrayRef<int64_t> y = shapeOf(op.getResult());
    int64_t B = y[0], H = y[1], S = y[2], D = y[3], E = shapeOf(x)[2];
    Value out = alloc(y, elementTypeOf(op.getResult()));
    product(
        B * S, H * D, E, x,
        [&](Value m, Value k) { return load(x, rowsAt(m, k, S)); }, w,
        [&](Value k, Value n) {
          return load(w, {k, n});
        },
        out,
        [&](Value m, Value n, Value v) {
          storeScalar(v, out, headsAt(m, n, S, D));
        },
        reshaped(x, {1, 1, B * S, E}));
    return {tensorOf(out, op.getResult().getType())};
  }

  SmallVector<Value> build(attn::MergeOp op) {
    // Y[b,s,e] = sum_{h,d} O[b,h,s,d] Wo[h*D + d, e]: M = B*S, N = E,
    // K = H*D.
    Value o = bufferOf(op.getInput()), w = bufferOf(op.getWeight());
    ArrayRef<int64_t> os = shapeOf(o);
    int64_t B = os[0], H = os[1], S = os[2], D = os[3], E = shapeOf(w)[1];
    Value out = alloc(shapeOf(op.getResult()), elementTypeOf(op.getResult()));
    product(
        B * S, E, H * D, o,
        [&](Value m, Value k) { return load(o, headsAt(m, k, S, D)); }, w,
        [&](Value k, Value n) {
          return load(w, {k, n});
        },
        out,
        [&](Value m, Value n, Value v) {
          storeScalar(v, out, rowsAt(m, n, S));
        },
        Value(), resultView(out, B * S, E));
    return {tensorOf(out, op.getResult().getType())};
  }

  SmallVector<Value> build(attn::ProjectionGradOp op) {
    // dX[b,s,e] = sum_{h,d} dY[b,h,s,d] W[e, h*D + d] (M = B*S, N = E,
    // K = H*D); dW[e, h*D + d] = sum_{b,s} X[b,s,e] dY[b,h,s,d] (M = E,
    // N = H*D, K = B*S).
    Value x = bufferOf(op.getInput()), w = bufferOf(op.getWeight()),
          dy = bufferOf(op.getGrad());
    ArrayRef<int64_t> ys = shapeOf(dy);
    int64_t B = ys[0], H = ys[1], S = ys[2], D = ys[3], E = shapeOf(x)[2];
    Value dx = alloc(shapeOf(x), elementTypeOf(op.getInputGrad())),
          dw = alloc(shapeOf(w), elementTypeOf(op.getWeightGrad()));
    auto loadDy = [&](Value m, Value n) {
      return load(dy, headsAt(m, n, S, D));
    };
    product(
        B * S, E, H * D, dy, loadDy, w,
        [&](Value k, Value n) {
          return load(w, {n, k});
        },
        dx,
        [&](Value m, Value n, Value v) { storeScalar(v, dx, rowsAt(m, n, S)); },
        Value(), resultView(dx, B * S, E));
    product(
        E, H * D, B * S, x,
        [&](Value m, Value k) { return load(x, rowsAt(k, m, S)); }, dy, loadDy,
        dw,
        [&](Value m, Value n, Value v) {
          storeScalar(v, dw, {m, n});
        },
        Value(), resultView(dw, E, H * D));
    return {tensorOf(dx, op.getInputGrad().getType()),
            tensorOf(dw, op.getWeightGrad().getType())};
  }

  SmallVector<Value> build(attn::MergeGradOp op) {
    // dO[b,h,s,d] = sum_e dY[b,s,e] Wo[h*D + d, e] (M = B*S, N = H*D,
    // K = E); dWo[h*D + d, e] = sum_{b,s} O[b,h,s,d] dY[b,s,e] (M = H*D,
    // N = E, K = B*S).
    Value o = bufferOf(op.getInput()), w = bufferOf(op.getWeight()),
          dy = bufferOf(op.getGrad());
    ArrayRef<int64_t> os = shapeOf(o);
    int64_t B = os[0], H = os[1], S = os[2], D = os[3], E = shapeOf(w)[1];
    Value dO = alloc(os, elementTypeOf(op.getInputGrad())),
          dw = alloc(shapeOf(w), elementTypeOf(op.getWeightGrad()));
    product(
        B * S, H * D, E, dy,
        [&](Value m, Value k) { return load(dy, rowsAt(m, k, S)); }, w,
        [&](Value k, Value n) {
          return load(w, {n, k});
        },
        dO,
        [&](Value m, Value n, Value v) {
          storeScalar(v, dO, headsAt(m, n, S, D));
        },
        reshaped(dy, {1, 1, B * S, E}));
    product(
        H * D, E, B * S, o,
        [&](Value m, Value k) { return load(o, headsAt(k, m, S, D)); }, dy,
        [&](Value k, Value n) { return load(dy, rowsAt(k, n, S)); }, dw,
        [&](Value m, Value n, Value v) {
          storeScalar(v, dw, {m, n});
        },
        Value(), resultView(dw, H * D, E));
    return {tensorOf(dO, op.getInputGrad().getType()),
            tensorOf(dw, op.getWeightGrad().getType())};
  }

private:
  func::FuncOp parent;
};

} // namespace

bool canLowerToGemmCpu(Operation *op) {
  if (!isa<attn::ProjectionOp, attn::MergeOp, attn::ProjectionGradOp,
           attn::MergeGradOp>(op))
    return false;
  return llvm::all_of(op->getOperandTypes(), [](Type t) {
    return isa<FloatType>(cast<ShapedType>(t).getElementType());
  });
}

FailureOr<SmallVector<Value>>
lowerToGemmCpu(RewriterBase &rewriter, Operation *op, attn::CpuPlanAttr plan) {
  if (!canLowerToGemmCpu(op))
    return rewriter.notifyMatchFailure(op, "not a float projection or merge");
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(op->getLoc(), rewriter);
  GemmBuilder gemm(b, op, plan.getRows());
  SmallVector<Value> results =
      llvm::TypeSwitch<Operation *, SmallVector<Value>>(op)
          .Case<attn::ProjectionOp, attn::MergeOp, attn::ProjectionGradOp,
                attn::MergeGradOp>(
              [&](auto typed) { return gemm.build(typed); });
  rewriter.replaceOp(op, results);
  return results;
}

} // namespace attnc
