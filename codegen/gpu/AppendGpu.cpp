// attn.append on the GPU targets (see FlashGpu.h): an invocation per element
// of the new rows copies it into the cache where the caller's buffer holds
// it. The cache is updated in place: the op's result is the buffer of its
// cache operand (a function argument attn-lower-to-linalg leaves writable),
// so nothing of the cache is copied, whatever its capacity.
#include "codegen/gpu/FlashGpu.h"
#include "codegen/gpu/GpuKernelBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace attnc {

using namespace gpu_kernels;

LogicalResult lowerToFlashGpu(RewriterBase &rewriter, attn::AppendOp op) {
  ImplicitLocOpBuilder b(op.getLoc(), rewriter);
  b.setInsertionPoint(op);
  GpuBuilder g(b);
  ArrayRef<int64_t> r = shapeOf(op.getRows()), c = shapeOf(op.getCache());
  Value rows = bufferOf(b, op.getRows()),
        lengths = bufferOf(b, op.getLengths()),
        table = bufferOf(b, op.getPages());
  // The cache argument stays writable when attn-lower-to-linalg marks
  // the others read-only (the op that tells it so is gone by then).
  if (auto arg = dyn_cast<BlockArgument>(op.getCache()))
    if (auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()))
      func.setArgAttr(arg.getArgNumber(),
                      bufferization::BufferizationDialect::kWritableAttrName,
                      b.getBoolAttr(true));
  auto cacheType = cast<RankedTensorType>(op.getCache().getType());
  Value cache = bufferization::ToBufferOp::create(
      b, MemRefType::get(cacheType.getShape(), cacheType.getElementType()),
      op.getCache(), /*read_only=*/false);
  // A page of P rows (the whole cache without a table).
  int64_t pageRows = c[2];
  int64_t capacity = table ? shapeOf(table)[1] * pageRows : c[2];
  int64_t n = r[0] * r[1] * r[2] * r[3];
  constexpr int64_t kThreads = 256;
  auto toIndex = [&](Value x) {
    return arith::IndexCastOp::create(b, b.getIndexType(), x).getResult();
  };
  launch(
      b, (n + kThreads - 1) / kThreads, 1, kThreads,
      [&](Value blk, Value, Value tid) {
        Value e = g.add(g.mul(blk, g.idx(kThreads)), tid);
        g.ifThen(g.ult(e, g.idx(n)), [&] {
          // Element e of the rows [B, Hkv, T, D].
          Value d = g.remu(e, g.idx(r[3]));
          Value rest = g.divu(e, g.idx(r[3]));
          Value t = g.remu(rest, g.idx(r[2]));
          rest = g.divu(rest, g.idx(r[2]));
          Value kvh = g.remu(rest, g.idx(r[1]));
          Value bi = g.divu(rest, g.idx(r[1]));
          // Row t goes to position len - T + t; rows outside [0,
          // capacity) are not written (the CPU entry points refuse
          // such lengths with ATTNC_STATUS_BAD_SIZE; here the caller's
          // lengths are on the device).
          // (A negative position is past `capacity` unsigned.)
          Value pos =
              g.add(arith::SubIOp::create(
                        b, toIndex(memref::LoadOp::create(b, lengths, bi)),
                        g.idx(r[2])),
                    t);
          g.ifThen(g.ult(pos, g.idx(capacity)), [&] {
            Value x =
                memref::LoadOp::create(b, rows, ValueRange{bi, kvh, t, d});
            if (!table) {
              memref::StoreOp::create(b, x, cache, ValueRange{bi, kvh, pos, d});
              return;
            }
            // Position p: row p mod P of page table[b, p / P]; an
            // entry outside the pool writes nothing.
            Value page = toIndex(memref::LoadOp::create(
                b, table, ValueRange{bi, g.divu(pos, g.idx(pageRows))}));
            g.ifThen(g.ult(page, g.idx(c[0])), [&] {
              memref::StoreOp::create(
                  b, x, cache,
                  ValueRange{page, kvh, g.remu(pos, g.idx(pageRows)), d});
            });
          });
        });
      });
  // The result through a value that is not the to_buffer itself: upstream's
  // canonicalization turns a memref.load of a to_buffer into a
  // tensor.extract of its tensor, which would have the attention read the
  // cache as it was before this write (and one-shot bufferization then
  // copy it). An alignment of the element's size holds for any buffer.
  Value written = memref::AssumeAlignmentOp::create(
      b, cache, cacheType.getElementType().getIntOrFloatBitWidth() / 8);
  rewriter.replaceOp(op, tensorOf(b, written, op.getResult().getType()));
  return success();
}

} // namespace attnc
