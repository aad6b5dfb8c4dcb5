// attn-batch-entries: the entry points of a spec's dynamic batch loop over
// its entries, in the LLVM dialect.
//
// By hand, and in the LLVM dialect, because the entry points take plain
// pointers (the bare-pointer convention of statically shaped buffers): a
// batch entry's slice of a buffer is the buffer's pointer plus an offset,
// which no memref op of an identity layout can express.
#include "codegen/Passes.h"
#include "dialect/AttnDialect.h"

#include "attnc/runtime.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNBATCHENTRIES
#include "codegen/Passes.h.inc"
} // namespace attnc

using namespace mlir;

namespace {

/// Entries per thread from which they run on threads of their own; with
/// work that differs between entries (attn.batch_uneven), from
/// kUnevenEntriesPerThread.
constexpr int64_t kEntriesPerThread = 2, kUnevenEntriesPerThread = 4;

struct AttnBatchEntriesPass
    : attnc::impl::AttnBatchEntriesBase<AttnBatchEntriesPass> {
  using Base::Base;

  void runOnOperation() override {
    StringRef name =
        attnc::attn::AttnDialect::BatchSlicesAttrHelper::getNameStr();
    SmallVector<LLVM::LLVMFuncOp> entries;
    for (auto fn : getOperation().getOps<LLVM::LLVMFuncOp>())
      if (fn->hasAttr(name))
        entries.push_back(fn);
    for (LLVM::LLVMFuncOp fn : entries)
      if (failed(loopOverBatch(fn, name)))
        return signalPassFailure();
  }

private:
  /// What building one entry point's loops needs.
  struct Builder {
    OpBuilder &b;
    Location loc;
    ArrayRef<int64_t> slices;

    Value constant(Type type, int64_t value) {
      return LLVM::ConstantOp::create(b, loc, type,
                                      b.getIntegerAttr(type, value));
    }
    /// The slices of entry `index` of `ptrs`: ptr + index * bytes.
    SmallVector<Value> slicesOf(ValueRange ptrs, Value index) {
      SmallVector<Value> args;
      for (auto [arg, bytes] : llvm::zip(ptrs, slices)) {
        if (!bytes) {
          args.push_back(arg);
          continue;
        }
        Value offset = LLVM::MulOp::create(b, loc, index,
                                           constant(index.getType(), bytes));
        args.push_back(LLVM::GEPOp::create(b, loc, arg.getType(), b.getI8Type(),
                                           arg, ValueRange{offset}));
      }
      return args;
    }
    /// In `region`, from `from`: for (i = begin; i < end; ++i) { status =
    /// callee(slices of i of ptrs, as `adjust` changes them); if (status)
    /// onFailure(status, next); afterEach(); }, where onFailure ends its
    /// block (it may branch to `next`, the rest of the iteration); returns
    /// the loop's exit.
    Block *
    forEachEntry(Region &region, Block *from, Value begin, Value end,
                 ValueRange ptrs, LLVM::LLVMFuncOp callee,
                 function_ref<void(Value, Block *)> onFailure,
                 function_ref<void(SmallVectorImpl<Value> &)> adjust = {},
                 function_ref<void()> afterEach = {}) {
      Type i64 = begin.getType();
      Block *head = b.createBlock(&region, {}, {i64}, {loc});
      Block *body = b.createBlock(&region);
      Block *failed = b.createBlock(&region);
      Block *latch = b.createBlock(&region);
      Block *exit = b.createBlock(&region);
      b.setInsertionPointToEnd(from);
      LLVM::BrOp::create(b, loc, ValueRange{begin}, head);
      b.setInsertionPointToEnd(head);
      Value index = head->getArgument(0);
      LLVM::CondBrOp::create(
          b, loc,
          LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::slt, index, end),
          body, exit);
      b.setInsertionPointToEnd(body);
      SmallVector<Value> args = slicesOf(ptrs, index);
      if (adjust)
        adjust(args);
      Value status = LLVM::CallOp::create(b, loc, callee, args).getResult();
      LLVM::CondBrOp::create(
          b, loc,
          LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, status,
                               constant(status.getType(), 0)),
          failed, latch);
      b.setInsertionPointToEnd(failed);
      onFailure(status, latch);
      b.setInsertionPointToEnd(latch);
      if (afterEach)
        afterEach();
      LLVM::BrOp::create(
          b, loc,
          ValueRange{LLVM::AddOp::create(b, loc, index, constant(i64, 1))},
          head);
      return exit;
    }
  };

  /// @__attnc_entries_f(ptr..., ptr status, i64 begin, i64 end): a task
  /// loop (attn-lower-parallel-calls) that computes entries [begin, end),
  /// each on one thread, and keeps the largest status that is not OK in
  /// *status (the same whatever the threads' order).
  LLVM::LLVMFuncOp buildEntryTasks(Builder &bb, LLVM::LLVMFuncOp slice,
                                   StringRef entryName) {
    OpBuilder &b = bb.b;
    MLIRContext *ctx = &getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i64 = IntegerType::get(ctx, 64);
    LLVM::LLVMFunctionType type = slice.getFunctionType();
    SmallVector<Type> params(type.getParams());
    params.append({ptr, i64, i64});
    auto tasks = LLVM::LLVMFuncOp::create(
        b, bb.loc, ("__attnc_entries_" + entryName).str(),
        LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), params),
        LLVM::Linkage::Internal);
    tasks->setAttr(
        attnc::attn::AttnDialect::ParallelTasksAttrHelper::getNameStr(),
        UnitAttr::get(ctx));
    OpBuilder::InsertionGuard guard(b);
    Block *start = tasks.addEntryBlock(b);
    unsigned n = type.getNumParams();
    Value status = start->getArgument(n);
    Block *exit = bb.forEachEntry(
        tasks.getBody(), start, start->getArgument(n + 1),
        start->getArgument(n + 2), start->getArguments().take_front(n), slice,
        [&](Value code, Block *next) {
          LLVM::AtomicRMWOp::create(b, bb.loc, LLVM::AtomicBinOp::umax, status,
                                    code, LLVM::AtomicOrdering::monotonic);
          LLVM::BrOp::create(b, bb.loc, ValueRange(), next);
        });
    b.setInsertionPointToEnd(exit);
    LLVM::ReturnOp::create(b, bb.loc, ValueRange());
    return tasks;
  }

  LogicalResult loopOverBatch(LLVM::LLVMFuncOp slice, StringRef name) {
    MLIRContext *ctx = &getContext();
    Location loc = slice.getLoc();
    auto slices = slice->getAttrOfType<DenseI64ArrayAttr>(name);
    slice->removeAttr(name);
    bool uneven = bool(slice->removeAttr(
        attnc::attn::AttnDialect::BatchUnevenAttrHelper::getNameStr()));
    auto sums = dyn_cast_or_null<DenseI64ArrayAttr>(slice->removeAttr(
        attnc::attn::AttnDialect::BatchSumsAttrHelper::getNameStr()));
    if (sums && (!slices || sums.size() != slices.size()))
      return slice.emitError() << "'attn.batch_sums' needs one size per "
                                  "pointer";
    // (Sums are taken in entry order.)
    bool inTurnOnly = bool(sums);
    std::string entryName = slice.getSymName().str();
    auto check = getOperation().lookupSymbol<LLVM::LLVMFuncOp>(
        "__attnc_check_" + entryName);
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
    LLVM::LLVMFunctionType type = slice.getFunctionType();
    if (!slices || !check || check.getFunctionType() != type ||
        type.getReturnType() != i32 || type.getNumParams() != slices.size() ||
        !llvm::all_of(type.getParams(), [&](Type t) { return t == ptr; }))
      return slice.emitError()
             << "'" << name
             << "' needs an entry point (ptr...) -> i32 with one size per "
                "pointer, and its @__attnc_check_"
             << entryName;

    slice.setSymName("__attnc_slice_" + entryName);
    slice.setLinkage(LLVM::Linkage::Internal);
    OpBuilder b(ctx);
    b.setInsertionPointAfter(slice);
    Builder bb{b, loc, slices.asArrayRef()};
    LLVM::LLVMFuncOp tasks, numThreads;
    if (!inTurnOnly) {
      tasks = buildEntryTasks(bb, slice, entryName);
      numThreads =
          getOperation().lookupSymbol<LLVM::LLVMFuncOp>("attnc_num_threads");
      if (!numThreads) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(getOperation().getBody());
        numThreads = LLVM::LLVMFuncOp::create(
            b, loc, "attnc_num_threads", LLVM::LLVMFunctionType::get(i32, {}));
      }
      b.setInsertionPointAfter(tasks);
    }

    SmallVector<Type> params(type.getParams());
    params.push_back(i64);
    auto entry = LLVM::LLVMFuncOp::create(
        b, loc, entryName, LLVM::LLVMFunctionType::get(i32, params));
    for (unsigned i = 0, e = type.getNumParams(); i < e; ++i)
      entry.setArgAttrs(i, slice.getArgAttrDict(i));
    Region &region = entry.getBody();
    Block *start = entry.addEntryBlock(b);
    ValueRange ptrs = start->getArguments().drop_back();
    Value batch = start->getArguments().back();
    // Returns the status it is branched to with.
    Block *done = b.createBlock(&region, {}, {i32}, {loc});
    LLVM::ReturnOp::create(b, loc, done->getArgument(0));
    auto returnStatus = [&](Value status, Block *) {
      LLVM::BrOp::create(b, loc, ValueRange{status}, done);
    };

    Block *checks = b.createBlock(&region);
    b.setInsertionPointToEnd(start);
    Value zero = bb.constant(i64, 0);
    LLVM::CondBrOp::create(
        b, loc,
        LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::slt, batch, zero),
        done, ValueRange{bb.constant(i32, ATTNC_STATUS_BAD_SIZE)}, checks,
        ValueRange{});
    Block *checked =
        bb.forEachEntry(region, checks, zero, batch, ptrs, check, returnStatus);
    // Entries on threads of their own where there are enough of them to
    // share out (each entry's kernel then runs its loops in its thread;
    // entries of uneven work need more of them to even out), else one
    // after the other, each on every thread.
    Block *inTurn = b.createBlock(&region);
    b.setInsertionPointToEnd(checked);
    if (inTurnOnly) {
      LLVM::BrOp::create(b, loc, ValueRange(), inTurn);
    } else {
      Block *parallel = b.createBlock(&region);
      b.setInsertionPointToEnd(checked);
      Value threads = LLVM::SExtOp::create(
          b, loc, i64,
          LLVM::CallOp::create(b, loc, numThreads, ValueRange()).getResult());
      Value enough = LLVM::ICmpOp::create(
          b, loc, LLVM::ICmpPredicate::sge, batch,
          LLVM::MulOp::create(
              b, loc, threads,
              bb.constant(i64, uneven ? kUnevenEntriesPerThread
                                      : kEntriesPerThread)));
      LLVM::CondBrOp::create(b, loc, enough, parallel, inTurn);
      b.setInsertionPointToEnd(parallel);
      Value slot =
          LLVM::AllocaOp::create(b, loc, ptr, i32, bb.constant(i64, 1));
      LLVM::StoreOp::create(b, loc, bb.constant(i32, ATTNC_STATUS_OK), slot);
      SmallVector<Value> args(ptrs);
      args.append({slot, zero, batch});
      LLVM::CallOp::create(b, loc, tasks, args);
      LLVM::BrOp::create(
          b, loc, ValueRange{LLVM::LoadOp::create(b, loc, i32, slot)}, done);
    }
    if (!sums) {
      Block *computed = bb.forEachEntry(region, inTurn, zero, batch, ptrs,
                                        slice, returnStatus);
      b.setInsertionPointToEnd(computed);
      LLVM::BrOp::create(b, loc, ValueRange{bb.constant(i32, ATTNC_STATUS_OK)},
                         done);
      return success();
    }
    return sumOverEntries(bb, region, inTurn, done, ptrs, zero, batch, slice,
                          sums.asArrayRef(), entryName);
  }

  /// The entries in turn, from `from`, where outputs are summed over them
  /// (`sums`: attn.batch_sums): each such output's entries are written to a
  /// buffer of its own, added to an f32 accumulator (calloc'd: a batch of 0
  /// gives zeros) by @__attnc_sum_f_k and stored by @__attnc_store_f_k
  /// (attn-export-abi) after the last entry; branches to `done` with the
  /// status.
  LogicalResult sumOverEntries(Builder &bb, Region &region, Block *from,
                               Block *done, ValueRange ptrs, Value zero,
                               Value batch, LLVM::LLVMFuncOp slice,
                               ArrayRef<int64_t> sums, StringRef entryName) {
    OpBuilder &b = bb.b;
    Location loc = bb.loc;
    MLIRContext *ctx = &getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    auto i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
    auto declare = [&](StringRef name, Type result, ArrayRef<Type> params) {
      if (auto fn = getOperation().lookupSymbol<LLVM::LLVMFuncOp>(name))
        return fn;
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(getOperation().getBody());
      return LLVM::LLVMFuncOp::create(
          b, loc, name, LLVM::LLVMFunctionType::get(result, params));
    };
    LLVM::LLVMFuncOp calloc = declare("calloc", ptr, {i64, i64});
    LLVM::LLVMFuncOp free =
        declare("free", LLVM::LLVMVoidType::get(ctx), {ptr});
    struct Sum {
      unsigned arg;
      LLVM::LLVMFuncOp add, store;
      Value part, acc;
    };
    SmallVector<Sum> summed;
    for (auto [k, bytes] : llvm::enumerate(sums)) {
      if (!bytes)
        continue;
      std::string suffix = (entryName + "_" + Twine(k)).str();
      auto add = getOperation().lookupSymbol<LLVM::LLVMFuncOp>("__attnc_sum_" +
                                                               suffix);
      auto store = getOperation().lookupSymbol<LLVM::LLVMFuncOp>(
          "__attnc_store_" + suffix);
      if (!add || !store)
        return slice.emitError() << "'attn.batch_sums' needs @__attnc_sum_"
                                 << suffix << " and @__attnc_store_" << suffix;
      summed.push_back({unsigned(k), add, store, Value(), Value()});
    }
    // The buffers, or OUT_OF_MEMORY; every way out frees them.
    Block *release = b.createBlock(&region, {}, {i32}, {loc});
    Block *loop = b.createBlock(&region);
    b.setInsertionPointToEnd(from);
    Value failed =
        LLVM::ConstantOp::create(b, loc, b.getI1Type(), b.getBoolAttr(false));
    Value null = LLVM::ZeroOp::create(b, loc, ptr);
    for (Sum &sum : summed) {
      for (Value *buffer : {&sum.part, &sum.acc}) {
        *buffer =
            LLVM::CallOp::create(b, loc, calloc,
                                 ValueRange{bb.constant(i64, 1),
                                            bb.constant(i64, sums[sum.arg])})
                .getResult();
        failed = LLVM::OrOp::create(
            b, loc, failed,
            LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, *buffer,
                                 null));
      }
    }
    LLVM::CondBrOp::create(
        b, loc, failed, release,
        ValueRange{bb.constant(i32, ATTNC_STATUS_OUT_OF_MEMORY)}, loop,
        ValueRange());
    b.setInsertionPointToEnd(release);
    for (Sum &sum : summed)
      for (Value buffer : {sum.part, sum.acc})
        LLVM::CallOp::create(b, loc, free, ValueRange{buffer});
    LLVM::BrOp::create(b, loc, ValueRange{release->getArgument(0)}, done);

    Block *computed = bb.forEachEntry(
        region, loop, zero, batch, ptrs, slice,
        [&](Value status, Block *) {
          LLVM::BrOp::create(b, loc, ValueRange{status}, release);
        },
        [&](SmallVectorImpl<Value> &args) {
          for (Sum &sum : summed)
            args[sum.arg] = sum.part;
        },
        [&] {
          for (Sum &sum : summed)
            LLVM::CallOp::create(b, loc, sum.add,
                                 ValueRange{sum.part, sum.acc});
        });
    b.setInsertionPointToEnd(computed);
    for (Sum &sum : summed)
      LLVM::CallOp::create(b, loc, sum.store,
                           ValueRange{sum.acc, ptrs[sum.arg]});
    LLVM::BrOp::create(b, loc, ValueRange{bb.constant(i32, ATTNC_STATUS_OK)},
                       release);
    return success();
  }
};

} // namespace
