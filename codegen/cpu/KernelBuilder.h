// Building blocks shared by the flash-attention CPU kernels (forward and
// backward): scf loops, 16-lane f32 vectors, key tiles transposed into
// contiguous blocks, the broadcast-FMA tile product, and outlined task
// loops for the runtime's thread pool.
#ifndef ATTNC_CODEGEN_CPU_KERNELBUILDER_H
#define ATTNC_CODEGEN_CPU_KERNELBUILDER_H

#include "codegen/cpu/Lanes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <optional>

namespace attnc {

/// K or V as a kernel reads them: [B, Hkv, Skv, width] where the caller put
/// them, or a paged KV cache's pool of pages [N, Hkv, P, width] with its
/// block table [B, M] (i32 or i64), key j of batch b then being row j % P
/// of page table[b, j / P] (attn.attention's `pages`). Converts from the
/// memref of the first. With `limit` (an index: a batch's length), the
/// packs read the keys from it on as zeros: a cache's rows past a batch's
/// length, which no row sees, may hold anything (NaN: unwritten memory),
/// and the products multiply whole tiles, where 0 times NaN is NaN.
struct KeySource {
  KeySource(mlir::Value memref) : memref(memref) {}
  KeySource(mlir::Value memref, mlir::Value table, mlir::Value limit = {})
      : memref(memref), table(table), limit(limit) {}

  /// The keys there are: Skv, or M P.
  int64_t keys() const;
  /// The indices of key `key` (< keys()) of batch bi's KV head g in
  /// memref, its column left out. A table entry outside [0, N) reads page
  /// 0 (the entry point checks the entries the lengths use: only keys no
  /// row sees can get there).
  llvm::SmallVector<mlir::Value> rowAt(mlir::ImplicitLocOpBuilder &b,
                                       mlir::Value bi, mlir::Value g,
                                       mlir::Value key) const;
  /// rowAt as an offset into memref's elements (its start at column 0).
  mlir::Value offsetOf(mlir::ImplicitLocOpBuilder &b, mlir::Value bi,
                       mlir::Value g, mlir::Value key) const;

  /// Whether key `key` exists: below keys() and `limit`.
  mlir::Value exists(mlir::ImplicitLocOpBuilder &b, mlir::Value key) const;

  mlir::Value memref, table, limit;
};

class KernelBuilder {
public:
  static constexpr int64_t kCols = 2 * kLanes; // keys per tile: two vectors

  KernelBuilder(mlir::ImplicitLocOpBuilder &b, int64_t rows);

  mlir::Value idx(int64_t v);
  /// A kernel's operand tensor as a read-only buffer, and a buffer back as
  /// the result tensor (before bufferization; see FlashAttention.h).
  mlir::Value bufferOf(mlir::Value tensor);
  mlir::Value tensorOf(mlir::Value memref, mlir::Type type);
  /// 64-byte aligned heap buffers, f32 unless `element` is given: alloc's
  /// live until bufferization's deallocation, scratchBuffer's (a task
  /// function's scratch, see outlineTasks) until the function returns.
  mlir::Value alloc(llvm::ArrayRef<int64_t> shape,
                    mlir::Type element = nullptr);
  mlir::Value scratchBuffer(llvm::ArrayRef<int64_t> shape,
                            mlir::Type element = nullptr);
  mlir::Value f(float v);
  /// Broadcasts a scalar to 16 lanes.
  mlir::Value splat(mlir::Value scalar);
  /// The larger of a and c (scalars or vectors), and the largest lane of a
  /// vector, as compare-and-select steps (see KernelBuilder.cpp).
  mlir::Value maxOf(mlir::Value a, mlir::Value c);
  mlir::Value maxOfLanes(mlir::Value v);
  /// Loads from f32, f16 or bf16 memrefs as f32 (one scalar or 16 lanes),
  /// and stores f32 values into them: inputs and outputs keep the spec's
  /// element type, all arithmetic is f32.
  mlir::Value loadF32(mlir::Value memref, mlir::ValueRange indices);
  mlir::Value loadVectorF32(mlir::Value memref, mlir::ValueRange indices);
  void storeVector(mlir::Value value, mlir::Value memref,
                   mlir::ValueRange indices);
  void storeScalar(mlir::Value value, mlir::Value memref,
                   mlir::ValueRange indices);

  /// for (i = lo; i < hi; i += step) body(i), no loop-carried values.
  void loop(int64_t lo, int64_t hi, llvm::function_ref<void(mlir::Value)> body);
  mlir::scf::ForOp loop(mlir::Value lo, mlir::Value hi, int64_t step,
                        llvm::function_ref<void(mlir::Value)> body);
  /// if (cond) body(), no results.
  void ifThen(mlir::Value cond, llvm::function_ref<void()> body);
  /// A loop of scalar copies that LLVM's loop vectorizer leaves alone (loop
  /// metadata): for the strided copies of transposes and packing it made
  /// gathers and scatters, 4 times the code and 11% of the JIT's work, and
  /// the kernels ran no faster (interleaved A/B within noise).
  void copyLoop(int64_t lo, int64_t hi,
                llvm::function_ref<void(mlir::Value)> body);

  /// Unrolls `loop` by `factor` with upstream's loopUnrollByFactor (the
  /// LLVM pipeline does not unroll: see Target.cpp) and returns the final
  /// values of its iter_args (the epilogue's, when there is one).
  llvm::SmallVector<mlir::Value> unroll(mlir::scf::ForOp loop,
                                        unsigned factor);

  /// dst[prefix..., n / 32, k, n % 32] = load(k, n) as f32 for n < length,
  /// 0 in the padding up to dst's multiple of 32: a matrix in 32-wide
  /// column panels, each one contiguous block (the tile products' B). With
  /// `panel`, only that panel.
  void
  packPanels(mlir::Value dst, mlir::ValueRange prefix, int64_t length,
             llvm::function_ref<mlir::Value(mlir::Value, mlir::Value)> load,
             mlir::Value panel = mlir::Value());

  /// dst[bi, g, j / 32, d, j % 32] = src[bi, g, j, d] in f32, 0 past the
  /// keys: K or V of one (batch, head) in key tiles, gathered 16 keys at a
  /// time (row-major X^T would stride by S and alias in L1).
  /// With `tile`, only the key tiles from `tile` that dst holds ([1, 1, n,
  /// d, 32]: the backward's per-task K^T and V^T).
  void transposeTiles(const KeySource &src, mlir::Value dst, mlir::Value bi,
                      mlir::Value g, mlir::Value tile = mlir::Value());

  /// The 16 columns of the 16 x 16 matrix whose rows are `rows` (16-lane
  /// f32 vectors), by shuffles.
  llvm::SmallVector<mlir::Value> transpose16(mlir::ArrayRef<mlir::Value> rows);

  /// The vector whose lane l is the sum of the lanes of vs[l] (16 16-lane
  /// f32 vectors), by 4 stages of halving shuffles and adds (15 adds).
  mlir::Value laneSums16(mlir::ArrayRef<mlir::Value> vs);

  /// packed[d, r] = a[b, h, min(i0 + r, lastRow), d] in packed's type
  /// (f32 or bf16; times `scale` when given): the rows of a tile side by
  /// side, so that the tile product broadcasts them from one stream.
  void packRows(mlir::Value a, mlir::Value bi, mlir::Value h, mlir::Value i0,
                int64_t lastRow, mlir::Value packed,
                std::optional<float> scale = std::nullopt);

  /// dst[bi, h, t, d, r] = a[bi, h, min(rows t + r, S - 1), d] in dst's type
  /// (times `scale` when given): every query tile of one (batch, head)
  /// packed (packRows for all of them, once).
  void packTiles(mlir::Value a, mlir::Value dst, mlir::Value bi, mlir::Value h,
                 std::optional<float> scale = std::nullopt);

  /// Prefetches (read, into all cache levels) the vectors memref[at...,
  /// 16 w] for w < vectors.
  void prefetchVectors(mlir::Value memref, mlir::ValueRange at,
                       int64_t vectors);

  /// Prefetches the rows of src's `count` keys from `first` (each clamped
  /// to its last key), a cache line at a time.
  void prefetchKeyRows(const KeySource &src, mlir::Value bi, mlir::Value g,
                       mlir::Value first, int64_t count);

  /// The rows x 32 tile sum_d packed[prefix..., d, r] * Xt[b, g, tile, d,
  /// 0:32] as 2 * rows vectors (row r: lanes 0-15 then 16-31). With
  /// `prefetchAhead`, each step also prefetches the row of Xt that many
  /// rows ahead (on into the next tiles, which follow in memory: Xt then
  /// has that many rows after its last tile's).
  llvm::SmallVector<mlir::Value> tileProduct(mlir::Value packed,
                                             mlir::ValueRange prefix,
                                             mlir::Value xt, mlir::Value bi,
                                             mlir::Value g, mlir::Value tile,
                                             int64_t prefetchAhead = 0);

  /// zt[d, 0:32] += sum_r packed[prefix..., tile0 + r / rows, d, r % rows]
  /// * c[row0 + r, 0:32] over the rows r < tiles * rows of `tiles`
  /// consecutive packed tiles, for every d: the transposed product (dK^T
  /// += Q^T dS, dV^T += dO^T P). `rows` d's at a time keep their 2 * rows
  /// sums in registers over all the rows, as tileProduct does. zt and c
  /// are [blocks, ..., 32]: both are read at block `block`.
  void accumulateTransposed(mlir::Value zt, mlir::Value c, mlir::Value packed,
                            mlir::ValueRange prefix, mlir::Value tile0,
                            mlir::Value tiles, mlir::Value block,
                            mlir::Value row0);

  /// A private function `name` of `types` next to `parent` (renamed if the
  /// name is taken) whose body `body(arguments)` builds; returns nothing.
  mlir::func::FuncOp
  outline(mlir::func::FuncOp parent, llvm::StringRef name,
          mlir::TypeRange types,
          llvm::function_ref<void(llvm::ArrayRef<mlir::Value>)> body);

  /// Outlines tasks [0, tasks) into a private function of `captured`
  /// (memrefs), begin and end, marked for attn-lower-parallel-calls, and
  /// calls it here. In the function, `scratch(args)` runs once (per-thread
  /// buffers) and `body(args, scratchValues, task)` once per task; `args`
  /// are the block arguments standing for `captured`.
  using ScratchFn = llvm::function_ref<llvm::SmallVector<mlir::Value>(
      llvm::ArrayRef<mlir::Value>)>;
  using TaskFn = llvm::function_ref<void(
      llvm::ArrayRef<mlir::Value>, llvm::ArrayRef<mlir::Value>, mlir::Value)>;
  void parallelTasks(mlir::func::FuncOp parent, llvm::StringRef name,
                     llvm::ArrayRef<mlir::Value> captured, int64_t tasks,
                     ScratchFn scratch, TaskFn body);
  /// parallelTasks for a body that depends on nothing but what `name`
  /// says (the shapes): the module's first call outlines the function
  /// under exactly that name, later ones call it (a layer's projections
  /// share one GEMM, the backward's K and V one transpose).
  void sharedParallelTasks(mlir::func::FuncOp parent, llvm::StringRef name,
                           llvm::ArrayRef<mlir::Value> captured, int64_t tasks,
                           ScratchFn scratch, TaskFn body);

protected:
  /// parallelTasks in two steps: the outlined function (for `captured`'s
  /// types), and a call of it on tasks [0, tasks).
  mlir::func::FuncOp outlineTasks(mlir::func::FuncOp parent,
                                  llvm::StringRef name,
                                  mlir::TypeRange captured, ScratchFn scratch,
                                  TaskFn body);
  void callTasks(mlir::func::FuncOp fn, llvm::ArrayRef<mlir::Value> captured,
                 int64_t tasks);

  mlir::ImplicitLocOpBuilder &b;
  int64_t rows;
  mlir::Type f32;
  mlir::VectorType vec;
};

} // namespace attnc

#endif // ATTNC_CODEGEN_CPU_KERNELBUILDER_H
