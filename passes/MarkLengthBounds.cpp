// attn-mark-length-bounds: the capacity of the KV cache each lengths
// argument describes, and the pages a block table may name (see Passes.td).
#include "dialect/AttnDialect.h"
#include "dialect/AttnOps.h"
#include "dialect/ShapeUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

namespace attnc {
#define GEN_PASS_DEF_ATTNMARKLENGTHBOUNDS
#include "passes/Passes.h.inc"
} // namespace attnc

using namespace mlir;
using namespace attnc;

namespace {

struct AttnMarkLengthBounds
    : attnc::impl::AttnMarkLengthBoundsBase<AttnMarkLengthBounds> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    StringRef name = attn::AttnDialect::MaxValueAttrHelper::getNameStr();
    auto i64 = IntegerType::get(&getContext(), 64);
    // Marks `lengths` when it is an argument of `func`; whether it changed.
    auto bound = [&](func::FuncOp func, Value lengths, int64_t capacity) {
      auto arg = dyn_cast_or_null<BlockArgument>(lengths);
      if (!arg || arg.getOwner() != &func.getBody().front())
        return false;
      unsigned n = arg.getArgNumber();
      if (auto old = func.getArgAttrOfType<IntegerAttr>(n, name)) {
        if (old.getInt() <= capacity)
          return false;
      }
      func.setArgAttr(n, name, IntegerAttr::get(i64, capacity));
      return true;
    };
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        funcs.push_back(func);
    for (func::FuncOp func : funcs)
      for (auto [n, capacity] : cacheInputBounds(func))
        bound(func, func.getArgument(n), capacity);
    // An argument passed on to a marked one (@f calls @f_fwd) is marked
    // too, until nothing changes.
    for (bool changed = true; changed;) {
      changed = false;
      for (func::FuncOp func : funcs)
        func.walk([&](func::CallOp call) {
          auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
          if (!callee)
            return;
          for (auto [i, operand] : llvm::enumerate(call.getOperands()))
            if (auto b = callee.getArgAttrOfType<IntegerAttr>(i, name))
              changed |= bound(func, operand, b.getInt());
        });
    }
  }
};

} // namespace

llvm::DenseMap<unsigned, int64_t> attnc::cacheInputBounds(func::FuncOp func) {
  llvm::DenseMap<unsigned, int64_t> bounds;
  auto bound = [&](Value lengths, int64_t capacity) {
    auto arg = dyn_cast_or_null<BlockArgument>(lengths);
    if (!arg || arg.getOwner() != &func.getBody().front())
      return;
    auto [it, inserted] = bounds.try_emplace(arg.getArgNumber(), capacity);
    if (!inserted)
      it->second = std::min(it->second, capacity);
  };
  func.walk([&](Operation *op) {
    if (auto a = dyn_cast<attn::AttentionOp>(op); a && a.getCache()) {
      bound(a.getLengths(), attn::keyCountOf(a));
      if (Value table = a.getPages())
        bound(table, shapeOf(a.getKey())[0] - 1);
    } else if (auto g = dyn_cast<attn::AttentionGradOp>(op); g && g.getCache())
      bound(g.getLengths(), attn::keyCountOf(g));
    else if (auto a = dyn_cast<attn::AppendOp>(op)) {
      bound(a.getLengths(), a.getCapacity());
      if (Value table = a.getPages())
        bound(table, shapeOf(a.getCache())[0] - 1);
    } else if (auto m = dyn_cast<attn::MaskOp>(op); m && m.getCache())
      bound(m.getLengths(), shapeOf(m.getScores())[3]);
  });
  return bounds;
}
