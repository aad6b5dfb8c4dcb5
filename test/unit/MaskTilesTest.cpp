// The target-neutral mask-tile arithmetic (codegen/MaskTiles.h) against the
// float64 reference's visibility rule (ref::isVisible), pair by pair: for
// causal, window and key-length masks over square and rectangular shapes,
// every row's [lo, hi) is exactly the keys it sees, a skipped tile holds no
// visible pair, a whole tile holds nothing else, and the rows outside
// rowsSeeing see none of a key tile; the same with the rows at the end of
// the keys (`cache`), where the key limit places them. The IR MaskTiles builds over constant
// indices is folded by the canonicalizer and read back.
#include "codegen/MaskTiles.h"
#include "codegen/Registration.h"
#include "tools/reference/Reference.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>

using namespace mlir;

namespace {

struct MaskCase {
  bool causal;
  std::optional<int64_t> window;
  int64_t sq, skv;
  int64_t length; // keys of the batch (the key limit), <= skv
  int64_t rows, width;
  bool cache = false;
};

/// Builds values with MaskTiles over constant indices in one function,
/// folds them and gives back their constants.
class Folder {
public:
  Folder() : context(registry()) {
    context.loadAllAvailableDialects();
    OpBuilder top(&context);
    module = ModuleOp::create(top, UnknownLoc::get(&context));
    top.setInsertionPointToEnd(module->getBody());
    func = func::FuncOp::create(top, UnknownLoc::get(&context), "f",
                                top.getFunctionType({}, {}));
    builder.emplace(UnknownLoc::get(&context), &context);
    builder->setInsertionPointToStart(func.addEntryBlock());
  }

  ImplicitLocOpBuilder &b() { return *builder; }
  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b(), v); }

  /// Records `value` (index or i1); its constant is at the returned slot.
  size_t keep(Value value) {
    kept.push_back(value);
    return kept.size() - 1;
  }

  /// Folds every kept value to a constant; false if one does not fold.
  bool fold() {
    SmallVector<Type> types;
    for (Value v : kept)
      types.push_back(v.getType());
    func.setFunctionType(builder->getFunctionType({}, types));
    func::ReturnOp::create(b(), kept);
    PassManager pm(&context);
    pm.addPass(createCanonicalizerPass());
    if (failed(pm.run(*module)))
      return false;
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    for (Value v : ret.getOperands()) {
      IntegerAttr c;
      if (!matchPattern(v, m_Constant(&c)))
        return false;
      values.push_back(c.getValue().getSExtValue());
    }
    return true;
  }

  int64_t at(size_t slot) const { return values[slot]; }

private:
  static DialectRegistry registry() {
    DialectRegistry r;
    attnc::registerAttncDialects(r);
    return r;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  func::FuncOp func;
  std::optional<ImplicitLocOpBuilder> builder;
  SmallVector<Value> kept;
  std::vector<int64_t> values;
};

void checkCase(const MaskCase &c) {
  SCOPED_TRACE(testing::Message()
               << "causal " << c.causal << " window " << c.window.value_or(0)
               << " Sq " << c.sq << " Skv " << c.skv << " length " << c.length
               << " rows " << c.rows << " width " << c.width << " cache "
               << c.cache);
  attnc::MaskTiles masks(c.causal, c.window, c.sq, c.skv, c.cache);
  attnc::ref::MaskSpec ref;
  ref.causal = c.causal;
  ref.window = c.window.value_or(0);
  ref.cache = c.cache;
  ref.sq = c.sq;
  ref.skv = c.skv;
  int64_t lengths[1] = {c.length};
  ref.lengths = lengths;
  auto visible = [&](int64_t i, int64_t j) {
    return j < c.skv && attnc::ref::isVisible(ref, 0, 0, i, j);
  };

  Folder f;
  Value limit = f.idx(c.length);
  struct RowSlots {
    size_t row, lo, hi;
  };
  std::vector<RowSlots> rowSlots;
  for (int64_t i = 0; i < c.sq + c.rows; ++i) {
    attnc::MaskTiles::RowRange r =
        masks.rowRange(f.b(), limit, f.idx(i), /*existsOnly=*/true);
    rowSlots.push_back({f.keep(r.row), f.keep(r.lo), f.keep(r.hi)});
  }
  struct TileSlots {
    int64_t i0, j0;
    size_t sees, whole, wholeExisting, first, end;
  };
  std::vector<TileSlots> tiles;
  for (int64_t i0 = 0; i0 < c.sq; i0 += c.rows)
    for (int64_t j0 = 0; j0 < c.skv; j0 += c.width) {
      Value i = f.idx(i0), j = f.idx(j0);
      attnc::MaskTiles::KeyRange keys =
          masks.keysSeenBy(f.b(), limit, i, c.rows, c.width);
      auto [first, end] = masks.rowsSeeing(f.b(), limit, j, c.width, c.rows);
      tiles.push_back(
          {i0, j0, f.keep(masks.seesKeyBlock(f.b(), keys, j)),
           f.keep(masks.isWhole(f.b(), limit, i, c.rows, j, c.width, false)),
           f.keep(masks.isWhole(f.b(), limit, i, c.rows, j, c.width, true)),
           f.keep(first), f.keep(end)});
    }
  ASSERT_TRUE(f.fold());

  // Every row sees exactly [lo, hi); rows past Sq see nothing.
  for (int64_t i = 0; i < c.sq + c.rows; ++i) {
    const RowSlots &s = rowSlots[i];
    EXPECT_EQ(f.at(s.row), std::min(i, c.sq - 1));
    for (int64_t j = 0; j < c.skv; ++j) {
      bool inside = f.at(s.lo) <= j && j < f.at(s.hi);
      EXPECT_EQ(inside, i < c.sq && visible(i, j))
          << "row " << i << " key " << j;
    }
  }
  for (const TileSlots &t : tiles) {
    bool any = false, all = true, allExisting = true, rowsOutsideSee = false;
    for (int64_t r = 0; r < c.rows; ++r) {
      // Rows past Sq repeat the last one (existsOnly = false) or see no key.
      int64_t i = std::min(t.i0 + r, c.sq - 1);
      bool exists = t.i0 + r < c.sq;
      for (int64_t j = t.j0; j < t.j0 + c.width; ++j) {
        bool v = visible(i, j);
        any |= exists && v;
        all &= v;
        allExisting &= exists && v;
      }
    }
    EXPECT_GE(f.at(t.first), 0);
    EXPECT_GE(f.at(t.end), 0);
    for (int64_t i = 0; i < c.sq; ++i) {
      int64_t p = c.cache ? c.length - c.sq + i : i;
      if (i < f.at(t.first) || i >= f.at(t.end))
        for (int64_t j = t.j0; j < t.j0 + c.width; ++j)
          rowsOutsideSee |= j < c.skv && (c.causal ? j <= p : true) &&
                            (!c.window || (j <= p && p - j < *c.window));
    }
    std::string where =
        "tile (" + std::to_string(t.i0) + ", " + std::to_string(t.j0) + ")";
    if (!f.at(t.sees))
      EXPECT_FALSE(any) << where << " is skipped but has a visible pair";
    if (f.at(t.whole))
      EXPECT_TRUE(all) << where << " is whole but has a masked pair";
    if (f.at(t.wholeExisting))
      EXPECT_TRUE(allExisting) << where << " is whole but has a masked pair";
    EXPECT_FALSE(rowsOutsideSee) << where << ": rows outside rowsSeeing see it";
  }
}

TEST(MaskTiles, MatchTheReferenceTileByTile) {
  int checked = 0;
  for (bool causal : {false, true})
    for (std::optional<int64_t> window :
         {std::optional<int64_t>(), std::optional<int64_t>(1),
          std::optional<int64_t>(5), std::optional<int64_t>(40)})
      for (auto [sq, skv] : {std::pair<int64_t, int64_t>{37, 37},
                             {13, 70},
                             {70, 13},
                             {1, 33},
                             {100, 100}})
        for (int64_t length : {skv, skv / 2, int64_t(0)})
          for (auto [rows, width] :
               {std::pair<int64_t, int64_t>{4, 32}, {7, 64}, {16, 16}})
            for (bool cache : {false, true}) {
              if (cache && !causal && !window)
                continue; // `cache` needs causal or window
              checkCase({causal, window, sq, skv, length, rows, width, cache});
              ++checked;
            }
  EXPECT_EQ(checked, (2 * 4 + 7) * 5 * 3 * 3);
}

// The tiles are tight where the masks allow: a causal square's tiles below
// the diagonal are whole, above it skipped, on it boundary.
TEST(MaskTiles, CausalSquareTilesAreClassified) {
  attnc::MaskTiles masks(/*causal=*/true, std::nullopt, 64, 64);
  Folder f;
  Value limit = f.idx(64);
  std::vector<std::pair<size_t, size_t>> slots;
  for (int64_t i0 = 0; i0 < 64; i0 += 16)
    for (int64_t j0 = 0; j0 < 64; j0 += 16) {
      Value i = f.idx(i0), j = f.idx(j0);
      auto keys = masks.keysSeenBy(f.b(), limit, i, 16, 16);
      slots.push_back(
          {f.keep(masks.seesKeyBlock(f.b(), keys, j)),
           f.keep(masks.isWhole(f.b(), limit, i, 16, j, 16, true))});
    }
  ASSERT_TRUE(f.fold());
  size_t k = 0;
  for (int64_t ti = 0; ti < 4; ++ti)
    for (int64_t tj = 0; tj < 4; ++tj, ++k) {
      EXPECT_EQ(f.at(slots[k].first) != 0, tj <= ti) << ti << "," << tj;
      EXPECT_EQ(f.at(slots[k].second) != 0, tj < ti) << ti << "," << tj;
    }
}

} // namespace
