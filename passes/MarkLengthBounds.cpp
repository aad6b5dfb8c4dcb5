// attn-mark-length-bounds: the capacity of the KV cache each lengths
// argument describes, the pages a block table may name, and the order and
// range of varlen's sequence offsets (see Passes.td).
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
    StringRef sortedName =
        attn::AttnDialect::NondecreasingAttrHelper::getNameStr();
    auto i64 = IntegerType::get(&getContext(), 64);
    // Marks `value` when it is an argument of `func`; whether it changed.
    auto mark = [&](func::FuncOp func, Value value, InputBound bound) {
      auto arg = dyn_cast_or_null<BlockArgument>(value);
      if (!arg || arg.getOwner() != &func.getBody().front())
        return false;
      unsigned n = arg.getArgNumber();
      bool changed = false;
      auto old = func.getArgAttrOfType<IntegerAttr>(n, name);
      if (!old || old.getInt() > bound.max) {
        func.setArgAttr(n, name, IntegerAttr::get(i64, bound.max));
        changed = true;
      }
      if (bound.sorted && !func.getArgAttr(n, sortedName)) {
        func.setArgAttr(n, sortedName, UnitAttr::get(&getContext()));
        changed = true;
      }
      return changed;
    };
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        funcs.push_back(func);
    for (func::FuncOp func : funcs)
      for (auto [n, bound] : integerInputBounds(func))
        mark(func, func.getArgument(n), bound);
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
              changed |=
                  mark(func, operand,
                       {b.getInt(), bool(callee.getArgAttr(i, sortedName))});
        });
    }
  }
};

} // namespace

llvm::DenseMap<unsigned, InputBound>
attnc::integerInputBounds(func::FuncOp func) {
  llvm::DenseMap<unsigned, InputBound> bounds;
  auto bound = [&](Value input, int64_t max, bool sorted = false) {
    auto arg = dyn_cast_or_null<BlockArgument>(input);
    if (!arg || arg.getOwner() != &func.getBody().front())
      return;
    auto [it, inserted] =
        bounds.try_emplace(arg.getArgNumber(), InputBound{max, sorted});
    if (!inserted) {
      it->second.max = std::min(it->second.max, max);
      it->second.sorted |= sorted;
    }
  };
  func.walk([&](Operation *op) {
    if (auto a = dyn_cast<attn::AttentionOp>(op)) {
      if (a.getCache())
        bound(a.getLengths(), attn::keyCountOf(a));
      if (Value table = a.getPages())
        bound(table, shapeOf(a.getKey())[0] - 1);
      bound(a.getVarlen(), attn::keyCountOf(a), /*sorted=*/true);
    } else if (auto g = dyn_cast<attn::AttentionGradOp>(op)) {
      if (g.getCache())
        bound(g.getLengths(), attn::keyCountOf(g));
      bound(g.getVarlen(), attn::keyCountOf(g), /*sorted=*/true);
    } else if (auto a = dyn_cast<attn::AppendOp>(op)) {
      bound(a.getLengths(), a.getCapacity());
      if (Value table = a.getPages())
        bound(table, shapeOf(a.getCache())[0] - 1);
    } else if (auto m = dyn_cast<attn::MaskOp>(op)) {
      if (m.getCache())
        bound(m.getLengths(), shapeOf(m.getScores())[3]);
      bound(m.getVarlen(), shapeOf(m.getScores())[3], /*sorted=*/true);
    }
  });
  return bounds;
}
