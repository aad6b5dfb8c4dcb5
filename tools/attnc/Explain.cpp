// attnc explain (see Explain.h).
//
// Per spec function (one section of index.html each):
//   1. <f>_mask.png: which (i, j) the first attn.attention lets see each
//      other (batch 0, head 0), by the float64 reference's mask semantics;
//   2. <f>_tiles.png: the forward kernel's query tiles x key blocks as its
//      CPU plan (attn-plan-tiles) and codegen/MaskTiles.h classify them:
//      skipped, whole, boundary;
//   3. <f>_kernels.png: the entry points of @f (forward, backward) and the
//      parallel task functions attn-lower-cpu outlined for them, with their
//      scf.for nests, read from the lowered module;
//   4. <f>_heatmaps.png, <f>_entropy.png, <f>_similarity.png: statistics of
//      the attention probabilities on given or random inputs, by the
//      compiled kernels: <f>_statistics.mlir, the attention and an
//      attn.attention_stats on its LSE, compiled by the JIT and called on
//      the attention's operands (as the spec interpreter computes them),
//      for every batch; the float64 reference (ref::attentionStatistics)
//      cross-checks batch 0 at small sizes, and stands in where the
//      kernels fail.
#include "tools/attnc/Explain.h"

#include "codegen/Compile.h"
#include "codegen/MaskTiles.h"
#include "codegen/Passes.h"
#include "codegen/Pipelines.h"
#include "dialect/AttnAttrs.h"
#include "dialect/AttnOps.h"
#include "dialect/ShapeUtils.h"
#include "passes/Passes.h"
#include "tools/attnc/HostBuffer.h"
#include "tools/attnc/LoadedSpec.h"
#include "tools/attnc/Npy.h"
#include "tools/attnc/Plot.h"
#include "tools/reference/Reference.h"
#include "tools/reference/RegionEvaluator.h"
#include "tools/reference/SpecInterpreter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <random>

namespace attnc {
namespace {

using plot::Align;
using plot::Axes;
using plot::Canvas;
using plot::Color;
using plot::Rect;

llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::string percent(double share) {
  return llvm::formatv("{0:F1}%", 100 * share).str();
}

std::string htmlEscape(llvm::StringRef text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

/// "file.mlir:6" of an op's location, or "" when it has none.
std::string lineOf(mlir::Operation *op) {
  if (auto loc = mlir::dyn_cast<mlir::FileLineColLoc>(op->getLoc()))
    return (llvm::sys::path::filename(loc.getFilename().getValue()) + ":" +
            llvm::Twine(loc.getLine()))
        .str();
  return "";
}

//===----------------------------------------------------------------------===//
// The target and the compile's passes
//===----------------------------------------------------------------------===//

/// What the CPU pipeline is planned for: the options `attnc compile`
/// would run attnc-pipeline with for the same --cpu.
struct TargetInfo {
  std::string triple, cpu, pipeline;
  AttncPipelineOptions options;
  /// The CPU the statistics kernels are compiled for (the JIT runs them
  /// here): --cpu, or "native" when --cpu names features this host lacks
  /// (`jitNote` says which).
  std::string jitCpu;
  std::string jitNote;
};

llvm::Expected<std::unique_ptr<TargetInfo>>
targetFor(const ExplainOptions &options) {
  CompileOptions compile;
  compile.cpu = options.cpu;
  compile.backward = options.backward;
  auto compiler = Compiler::create(compile);
  if (!compiler)
    return compiler.takeError();
  auto info = std::make_unique<TargetInfo>();
  info->pipeline = compiler->pipeline();
  // builtin.module(attnc-pipeline{...}): the options between the braces.
  llvm::StringRef text = info->pipeline;
  size_t open = text.find('{'), close = text.rfind('}');
  if (open == llvm::StringRef::npos || close == llvm::StringRef::npos ||
      failed(info->options.parseFromString(text.slice(open + 1, close).str())))
    return makeError("cannot read the pipeline's options: " + text);
  info->triple = llvm::sys::getDefaultTargetTriple();
  info->cpu = options.cpu == "native"
                  ? llvm::sys::getHostCPUName().str() + " (native)"
                  : options.cpu;
  info->jitCpu = options.cpu;
  compile.forThisProcess = true;
  if (auto here = Compiler::create(compile); !here) {
    info->jitCpu = "native";
    info->jitNote = toString(here.takeError());
  }
  return info;
}

/// Runs the passes `build` adds on `module`; diagnostics go to the
/// context's handler.
mlir::LogicalResult
runPasses(mlir::ModuleOp module,
          llvm::function_ref<void(mlir::OpPassManager &)> build) {
  mlir::PassManager pm(module.getContext());
  build(pm);
  return pm.run(module);
}

void addPlanTiles(mlir::OpPassManager &pm, const AttncPipelineOptions &o) {
  AttnPlanTilesOptions plan;
  plan.vectorBits = o.vectorBits;
  plan.amx = o.amx;
  plan.dotBf16 = o.dotBf16;
  pm.addPass(createAttnPlanTiles(plan));
}

/// The first attn.attention of `func`'s body, in program order.
attn::AttentionOp firstAttention(mlir::func::FuncOp func) {
  attn::AttentionOp first;
  func.walk([&](attn::AttentionOp op) {
    if (!first)
      first = op;
  });
  return first;
}

//===----------------------------------------------------------------------===//
// Inputs
//===----------------------------------------------------------------------===//

/// A --input flag: the input's name, the file and its array.
struct GivenInput {
  std::string flag, file;
  NpyArray array;
};

std::optional<jit::DType> dtypeNamed(llvm::StringRef name) {
  for (jit::DType d : {jit::DType::F32, jit::DType::F16, jit::DType::BF16,
                       jit::DType::I32, jit::DType::I64})
    if (name == jit::dtypeName(d))
      return d;
  return std::nullopt;
}

std::string typeString(const KernelArg &arg) {
  std::string s = "tensor<";
  for (int64_t d : arg.shape)
    s += std::to_string(d) + "x";
  return s + arg.dtype + ">";
}

/// Reads every --input NAME=FILE.npy; a NAME must be an input of some spec
/// function.
llvm::Expected<std::map<std::string, GivenInput>>
readInputs(const std::vector<std::string> &flags,
           const std::vector<KernelSignature> &kernels) {
  std::map<std::string, GivenInput> given;
  for (const std::string &flag : flags) {
    auto [name, file] = llvm::StringRef(flag).split('=');
    if (name.empty() || file.empty())
      return makeError("--input '" + flag + "': expected NAME=FILE.npy");
    bool known = false;
    std::vector<std::string> functions;
    for (const KernelSignature &kernel : kernels) {
      std::vector<std::string> names;
      for (const KernelArg &arg : kernel.args)
        if (!arg.isOutput) {
          names.push_back(arg.name);
          known = known || arg.name == name;
        }
      functions.push_back("@" + kernel.name + "(" + llvm::join(names, ", ") +
                          ")");
    }
    if (!known)
      return makeError("--input '" + flag + "': no spec function has an " +
                       "input named '" + name +
                       "'; the inputs are: " + llvm::join(functions, ", "));
    if (given.count(name.str()))
      return makeError("--input '" + flag + "': input '" + name +
                       "' is given twice");
    llvm::Expected<NpyArray> array = readNpy(file);
    if (!array)
      return makeError("--input '" + flag +
                       "': " + toString(array.takeError()));
    given[name.str()] = {flag, file.str(), std::move(*array)};
  }
  return given;
}

/// The inputs of `kernel` (the function `func`): random ones (floats
/// uniform in [-1, 1), integers in [0, the largest dimension], as attnc
/// run draws them), those `given` replacing theirs; each rounded to its
/// dtype. A given array of another shape or kind is an error at the
/// argument.
mlir::FailureOr<std::vector<HostTensor>>
inputsOf(const KernelSignature &kernel, mlir::func::FuncOp func,
         const std::map<std::string, GivenInput> &given, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int64_t largest = 1;
  for (const KernelArg &arg : kernel.args)
    for (int64_t d : arg.shape)
      largest = std::max(largest, d);
  std::vector<HostTensor> inputs;
  llvm::DenseMap<unsigned, InputBound> bounds = integerInputBounds(func);
  for (const KernelArg &arg : kernel.args) {
    if (arg.isOutput)
      continue;
    mlir::Location loc = func.getArgument(inputs.size()).getLoc();
    std::optional<jit::DType> dtype = dtypeNamed(arg.dtype);
    if (!dtype)
      return mlir::emitError(loc)
             << "input '" << arg.name << "' has the unsupported dtype "
             << arg.dtype;
    jit::TensorSpec spec;
    spec.name = arg.name;
    spec.shape = arg.shape;
    spec.dtype = *dtype;
    Buffer buffer(spec);
    // Drawn whether given or not: a given input leaves the others' values
    // (a cache's lengths within its capacity).
    auto bound = bounds.find(inputs.size());
    if (bound == bounds.end())
      fillRandomInput(buffer, rng, largest);
    else
      fillRandomInput(buffer, rng, std::min(largest, bound->second.max),
                      bound->second.sorted);
    auto it = given.find(arg.name);
    if (it != given.end()) {
      const NpyArray &array = it->second.array;
      std::string where = "--input '" + it->second.flag + "': ";
      if (array.shape != arg.shape)
        return mlir::emitError(loc)
               << where << "shape " << shapeString(array.shape)
               << ", but input '" << arg.name << "' of @" << kernel.name
               << " is " << typeString(arg);
      if (array.isFloat() != isFloat(*dtype))
        return mlir::emitError(loc)
               << where << "dtype " << array.descr << ", but input '"
               << arg.name << "' of @" << kernel.name << " is "
               << typeString(arg) << " (give "
               << (isFloat(*dtype) ? "<f4, <f8 or <f2" : "<i4 or <i8") << ")";
      buffer.values.data = array.data;
      buffer.pack();
    }
    inputs.push_back(std::move(buffer.values));
  }
  return inputs;
}

//===----------------------------------------------------------------------===//
// 1. The mask
//===----------------------------------------------------------------------===//

/// Cell edges [floor(I n / cells)] for I in [0, cells].
std::vector<double> edges(int64_t n, int64_t cells) {
  std::vector<double> e(cells + 1);
  for (int64_t c = 0; c <= cells; ++c)
    e[c] = double(c * n / cells);
  return e;
}

/// The visible share of each cell of at most 512 x 512 over (i, j) for one
/// (batch, head), evaluated for every pair, or for `samples` x `samples`
/// of a cell's pairs when there are too many (mask_mod regions are
/// evaluated by the reference's interpreter, about a microsecond each).
struct MaskGrid {
  int64_t rows = 0, cols = 0, samples = 0;
  bool exact = true;
  std::vector<double> rowEdges, colEdges, share;
  double visible = 0; // the visible share of all pairs (estimated unless
                      // exact)
};

MaskGrid maskGrid(const ref::MaskSpec &mask, int64_t b, int64_t h, int64_t sq,
                  int64_t skv) {
  MaskGrid grid;
  grid.rows = std::min<int64_t>(sq, 512);
  grid.cols = std::min<int64_t>(skv, 512);
  grid.rowEdges = edges(sq, grid.rows);
  grid.colEdges = edges(skv, grid.cols);
  // A named mask costs a few comparisons, a mask_mod region about a
  // microsecond.
  double budget = mask.maskMod ? 4e6 : 64e6;
  grid.samples = std::max<int64_t>(
      1, int64_t(std::sqrt(budget / double(grid.rows * grid.cols))));
  grid.share.resize(grid.rows * grid.cols);
  double weighted = 0;
  for (int64_t r = 0; r < grid.rows; ++r) {
    int64_t i0 = int64_t(grid.rowEdges[r]),
            ni = int64_t(grid.rowEdges[r + 1]) - i0;
    for (int64_t c = 0; c < grid.cols; ++c) {
      int64_t j0 = int64_t(grid.colEdges[c]),
              nj = int64_t(grid.colEdges[c + 1]) - j0;
      int64_t si = std::min(ni, grid.samples), sj = std::min(nj, grid.samples);
      grid.exact = grid.exact && si == ni && sj == nj;
      int64_t seen = 0;
      for (int64_t a = 0; a < si; ++a)
        for (int64_t e = 0; e < sj; ++e) {
          int64_t i = i0 + (2 * a + 1) * ni / (2 * si);
          int64_t j = j0 + (2 * e + 1) * nj / (2 * sj);
          if (si == ni)
            i = i0 + a;
          if (sj == nj)
            j = j0 + e;
          seen += ref::isVisible(mask, b, h, i, j);
        }
      double share = double(seen) / double(si * sj);
      grid.share[r * grid.cols + c] = share;
      weighted += share * double(ni * nj);
    }
  }
  grid.visible = weighted / double(sq * skv);
  return grid;
}

/// The plot box of a matrix of rows x cols cells: about 480 pixels on its
/// longer side (whole pixels per cell up to 240 cells; 512 cells get one
/// each), at least 80 on either.
Rect matrixBox(int64_t rows, int64_t cols, double x, double y) {
  int64_t cells = std::max(rows, cols);
  double pixels =
      cells <= 240 ? double(480 / cells) : std::max(1.0, 480.0 / double(cells));
  double w = std::max(80.0, double(cols) * pixels),
         h = std::max(80.0, double(rows) * pixels);
  return {x, y, w, h};
}

std::string describeMask(attn::AttentionOp op) {
  std::vector<std::string> parts;
  if (op.getCausal())
    parts.push_back("causal");
  if (std::optional<int64_t> w = op.getWindow())
    parts.push_back("window " + std::to_string(*w));
  if (op.getCache())
    parts.push_back("cache");
  if (op.getLengths())
    parts.push_back("key lengths");
  if (op.getVarlen())
    parts.push_back("packed sequences (varlen)");
  if (!op.getMaskMod().empty())
    parts.push_back("mask_mod region");
  return parts.empty() ? "no mask" : llvm::join(parts, " + ");
}

llvm::Error drawMask(const std::string &path, const std::string &title,
                     const MaskGrid &grid, int64_t sq, int64_t skv) {
  Rect box = matrixBox(grid.rows, grid.cols, 90, 78);
  Canvas canvas(int(box.right() + 150), int(box.bottom() + 70));
  Axes axes{box, 0, double(skv), 0, double(sq), /*yDown=*/true};
  plot::drawCells(canvas, axes, grid.share, grid.rowEdges, grid.colEdges,
                  plot::blues);
  plot::AxesText text;
  text.xLabel = "key j";
  text.yLabel = "query i";
  plot::drawAxes(canvas, axes, text);
  canvas.text(canvas.width() / 2.0, 20, title, 14, Align::Center, plot::kBlack,
              /*bold=*/true);
  std::string sub = (grid.exact ? "" : "~") + percent(grid.visible) +
                    " of the pairs visible (dark)";
  if (grid.rows < sq || grid.cols < skv)
    sub += llvm::formatv(
               "; a cell is ~{0}x{1} pairs, shaded by the visible "
               "share{2}",
               sq / grid.rows, skv / grid.cols,
               grid.exact
                   ? std::string()
                   : llvm::formatv(" of {0}x{0} samples", grid.samples).str())
               .str();
  canvas.text(canvas.width() / 2.0, 44, sub, 12, Align::Center);
  plot::drawColourBar(canvas, {box.right() + 24, box.y, 16, box.h}, 0, 1,
                      plot::blues, "visible share of the cell");
  return canvas.writePng(path);
}

//===----------------------------------------------------------------------===//
// 2. The tile map
//===----------------------------------------------------------------------===//

enum class TileClass { Skipped, Whole, Boundary };

/// Classifies the forward kernel's tiles with codegen/MaskTiles' own index
/// arithmetic: the predicates the flash forward builds (seesKeyBlock of
/// keysSeenBy, isWhole) in a scratch module, evaluated by the reference's
/// region evaluator (the arith ops' folders).
class TileClassifier {
public:
  /// `offsets`: varlen's values (null without varlen), which the
  /// predicates read as a tensor argument.
  TileClassifier(mlir::MLIRContext &context, MaskTiles masks, int64_t rows,
                 int64_t width, const HostTensor *offsets) {
    context.getOrLoadDialect<mlir::arith::ArithDialect>();
    context.getOrLoadDialect<mlir::func::FuncDialect>();
    context.getOrLoadDialect<attn::AttnDialect>();
    auto loc = mlir::UnknownLoc::get(&context);
    module = mlir::ModuleOp::create(loc);
    // Block arguments (limit, i0, j0), as evaluate() takes them, then
    // varlen's offsets (a capture).
    auto build = [&](llvm::StringRef name,
                     llvm::function_ref<mlir::Value(
                         mlir::ImplicitLocOpBuilder &, mlir::Value, mlir::Value,
                         mlir::Value)>
                         body) -> mlir::Region & {
      auto b = mlir::ImplicitLocOpBuilder::atBlockEnd(loc, module->getBody());
      mlir::Type index = b.getIndexType();
      llvm::SmallVector<mlir::Type> inputs = {index, index, index};
      if (offsets)
        inputs.push_back(mlir::RankedTensorType::get(
            {int64_t(offsets->data.size())}, b.getI64Type()));
      auto fn =
          mlir::func::FuncOp::create(b, name, b.getFunctionType(inputs, {}));
      mlir::Block *block = fn.addEntryBlock();
      b.setInsertionPointToStart(block);
      if (offsets)
        masks.offsets = block->getArgument(3);
      mlir::Value v = body(b, block->getArgument(0), block->getArgument(1),
                           block->getArgument(2));
      attn::YieldOp::create(b, v);
      return fn.getBody();
    };
    mlir::Region &seesRegion =
        build("sees", [&](mlir::ImplicitLocOpBuilder &b, mlir::Value limit,
                          mlir::Value i0, mlir::Value j0) {
          return masks.seesKeyBlock(
              b, masks.keysSeenBy(b, limit, i0, rows, width), j0);
        });
    mlir::Region &wholeRegion =
        build("whole", [&](mlir::ImplicitLocOpBuilder &b, mlir::Value limit,
                           mlir::Value i0, mlir::Value j0) {
          return masks.isWhole(b, limit, i0, rows, j0, width,
                               /*existsOnly=*/false);
        });
    std::vector<const HostTensor *> captures;
    if (offsets)
      captures.push_back(offsets);
    sees = std::make_unique<RegionEvaluator>(seesRegion, captures, false);
    whole = std::make_unique<RegionEvaluator>(wholeRegion, captures, false);
  }

  /// The tile of rows [i0, i0 + rows) and keys [j0, j0 + width) of a batch
  /// whose keys end at `limit` (MaskTiles::keyLimit: Skv, or the batch's
  /// length clamped to [0, Skv]).
  TileClass classify(int64_t limit, int64_t i0, int64_t j0) {
    llvm::SmallVector<double> args = {double(limit), double(i0), double(j0)};
    if (sees->evaluate(args) == 0)
      return TileClass::Skipped;
    return whole->evaluate(args) != 0 ? TileClass::Whole : TileClass::Boundary;
  }

private:
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::unique_ptr<RegionEvaluator> sees, whole;
};

struct TileMap {
  attn::CpuPlanAttr plan;
  int64_t rows = 0, width = 0, queryBlock = 0, sq = 0, skv = 0;
  std::vector<int64_t> rowStarts, keyStarts;
  std::vector<TileClass> batch0; // [query tile][key block]
  int64_t counts[3] = {0, 0, 0};
  double savedShare = 0; // of all batches' Sq x Skv score FLOPs
  bool maskModLeft = false;
  std::string namedMasks;
};

/// The tile map of `planned` (after attn-plan-tiles) with the key lengths
/// `lengths` (B of them, or null) and varlen's `offsets` (or null).
TileMap tileMapOf(attn::AttentionOp planned, const int64_t *lengths,
                  const HostTensor *offsets) {
  TileMap map;
  map.plan = mlir::dyn_cast_or_null<attn::CpuPlanAttr>(
      attn::getTilePlan(planned.getOperation()));
  MaskTiles masks(planned);
  auto q = shapeOf(planned.getQuery());
  map.sq = masks.sq;
  map.skv = masks.skv;
  map.rows = map.plan.getRows();
  map.width = map.plan.getKeyBlock();
  map.queryBlock = map.plan.getQueryBlock();
  map.maskModLeft = !planned.getMaskMod().empty();
  map.namedMasks = describeMask(planned);
  for (int64_t i0 = 0; i0 < map.sq; i0 += map.rows)
    map.rowStarts.push_back(i0);
  for (int64_t j0 = 0; j0 < map.skv; j0 += map.width)
    map.keyStarts.push_back(j0);
  TileClassifier classifier(*planned.getContext(), masks, map.rows, map.width,
                            offsets);
  double skipped = 0;
  for (int64_t b = 0; b < q[0]; ++b) {
    int64_t limit = map.skv;
    if (lengths && planned.getLengths())
      limit = std::clamp<int64_t>(lengths[b], 0, map.skv);
    for (int64_t i0 : map.rowStarts)
      for (int64_t j0 : map.keyStarts) {
        TileClass c = classifier.classify(limit, i0, j0);
        if (c == TileClass::Skipped)
          skipped += double(std::min(map.rows, map.sq - i0) *
                            std::min(map.width, map.skv - j0));
        if (b == 0) {
          map.batch0.push_back(c);
          ++map.counts[int(c)];
        }
      }
  }
  map.savedShare = skipped / double(q[0] * map.sq * map.skv);
  return map;
}

const Color kSkipped{0.86, 0.86, 0.86}, kWhole{0.35, 0.70, 0.35},
    kBoundary{0.98, 0.62, 0.22};

llvm::Error drawTileMap(const std::string &path, const std::string &title,
                        const TileMap &map, const MaskGrid &grid,
                        std::optional<int64_t> length) {
  Rect box = matrixBox(grid.rows, grid.cols, 90, 78);
  Canvas canvas(int(box.right() + 330), int(box.bottom() + 70));
  Axes axes{box, 0, double(map.skv), 0, double(map.sq), /*yDown=*/true};
  size_t blocks = map.keyStarts.size();
  for (size_t t = 0; t < map.rowStarts.size(); ++t)
    for (size_t k = 0; k < blocks; ++k) {
      int64_t i0 = map.rowStarts[t], j0 = map.keyStarts[k];
      double x0 = axes.px(j0), x1 = axes.px(std::min(j0 + map.width, map.skv));
      double y0 = axes.py(i0), y1 = axes.py(std::min(i0 + map.rows, map.sq));
      TileClass c = map.batch0[t * blocks + k];
      canvas.fill({x0, y0, x1 - x0, y1 - y0},
                  c == TileClass::Skipped ? kSkipped
                  : c == TileClass::Whole ? kWhole
                                          : kBoundary,
                  /*snap=*/true);
    }
  // The mask on top: visible pairs darkened.
  plot::drawCells(canvas, axes, grid.share, grid.rowEdges, grid.colEdges,
                  [](double share) {
                    return Color{0, 0, 0, 0.45 * share};
                  });
  // Tile edges where tiles are at least 4 pixels; task edges thicker.
  double tileH = box.h * double(map.rows) / double(map.sq),
         blockW = box.w * double(map.width) / double(map.skv);
  if (blockW >= 4)
    for (int64_t j0 : map.keyStarts)
      canvas.line(axes.px(j0), box.y, axes.px(j0), box.bottom(), plot::kWhite,
                  1);
  if (tileH >= 4)
    for (int64_t i0 : map.rowStarts)
      canvas.line(box.x, axes.py(i0), box.right(), axes.py(i0), {1, 1, 1, 0.7},
                  1);
  if (map.queryBlock > map.rows && map.queryBlock < map.sq)
    for (int64_t i0 = map.queryBlock; i0 < map.sq; i0 += map.queryBlock)
      canvas.line(box.x, axes.py(i0), box.right(), axes.py(i0),
                  {0.1, 0.1, 0.1, 0.7}, 1.5);
  plot::AxesText text;
  text.xLabel = "key j";
  text.yLabel = "query i";
  plot::drawAxes(canvas, axes, text);
  canvas.text(canvas.width() / 2.0, 20, title, 14, Align::Center, plot::kBlack,
              /*bold=*/true);
  canvas.text(canvas.width() / 2.0, 44,
              llvm::formatv("{0}-row query tiles x {1}-key blocks; skipped "
                            "tiles save {2} of the score FLOPs",
                            map.rows, map.width, percent(map.savedShare))
                  .str(),
              12, Align::Center);
  std::string whole = map.maskModLeft ? "whole for the named masks (the "
                                        "mask_mod still evaluated)"
                                      : "whole (no mask evaluated)";
  std::vector<std::pair<Color, std::string>> legend = {
      {kSkipped, llvm::formatv("skipped: {0} tiles", map.counts[0]).str()},
      {kWhole, llvm::formatv("{0}: {1}", map.counts[1], "tiles").str()},
      {kBoundary,
       llvm::formatv("boundary (mask per key): {0} tiles", map.counts[2])
           .str()},
      {plot::mix(kBoundary, plot::kBlack, 0.45),
       "darker: visible (i, j) (the mask)"}};
  legend[1].second = whole + ": " + std::to_string(map.counts[1]) + " tiles";
  double x = box.right() + 20, y = box.y + 10;
  // Long labels wrap at the legend's width: two lines for "whole".
  y = plot::drawLegend(canvas, x, y, {legend[0]}, 12);
  if (canvas.textWidth(legend[1].second, 12) > 280) {
    auto [first, rest] = llvm::StringRef(legend[1].second).split(" (");
    plot::drawLegend(canvas, x, y, {{kWhole, first.str()}}, 12);
    y += 16;
    canvas.text(x + 28, y, "(" + rest.str(), 12);
    y += 19;
  } else {
    y = plot::drawLegend(canvas, x, y, {legend[1]}, 12);
  }
  y = plot::drawLegend(canvas, x, y, {legend[2], legend[3]}, 12);
  y += 10;
  std::vector<std::string> notes = {
      "batch 0" +
          (length ? " (key length " + std::to_string(*length) + ")" : ""),
      "named masks: " + map.namedMasks};
  if (map.queryBlock > map.rows && map.queryBlock < map.sq)
    notes.push_back("thick lines: tasks of " + std::to_string(map.queryBlock) +
                    " rows");
  for (const std::string &note : notes) {
    canvas.text(x, y, note, 11, Align::Left, {0.3, 0.3, 0.3});
    y += 17;
  }
  return canvas.writePng(path);
}

//===----------------------------------------------------------------------===//
// 3. The kernels and their loops
//===----------------------------------------------------------------------===//

/// What a task function of the CPU kernels computes, by the name
/// attn-lower-cpu gives it (codegen/cpu/).
std::string taskKind(llvm::StringRef name) {
  static const std::pair<const char *, const char *> kinds[] = {
      {"__attnc_flash_forward", "flash forward: online softmax over key "
                                "blocks; a task per (batch, head, query-tile "
                                "group)"},
      {"__attnc_flash_exact_deltas",
       "Delta = rowsum(P * dP), a task per query tile"},
      {"__attnc_flash_deltas", "Delta = rowsum(dO * O), a task per (batch, "
                               "head)"},
      {"__attnc_flash_backward_kv", "flash backward: dK, dV per key block, dQ "
                                    "terms; a task per (batch, KV head, "
                                    "split)"},
      {"__attnc_flash_dq", "dQ = sum of the splits' copies, a task per "
                           "(batch, head)"},
      {"__attnc_flash_pack", "Q and dO packed in query tiles, a task per "
                             "(batch, head)"},
      {"__attnc_flash_transpose", "K^T in 32-key tiles, a task per (batch, "
                                  "KV head)"},
      {"__attnc_flash_chunk", "V in 32-column chunks, a task per (batch, KV "
                              "head)"},
      {"__attnc_flash_pairs", "K and V in bf16 pairs for AMX, a task per "
                              "(batch, KV head)"},
      {"__attnc_gemm_copy_a", "GEMM: A copied, 64 rows a task"},
      {"__attnc_gemm_pack_b", "GEMM: B packed in 32-wide panels"},
      {"__attnc_gemm_store_c", "GEMM: C written out, 64 rows a task"},
      {"__attnc_gemm", "GEMM (projection or merge), a task per block of "
                       "rows"}};
  for (auto [prefix, kind] : kinds)
    if (name.starts_with(prefix))
      return kind;
  return "";
}

/// The plan numbers a loop's bounds are compared with to name its role.
struct PlanNumbers {
  int64_t rows = 0, keyBlock = 0, d = 0, dv = 0, sq = 0, skv = 0;
};

/// What a loop nest holds, counted over its ops (nested ones included).
struct OpCounts {
  int64_t fma = 0, exp = 0, reductions = 0, amx = 0, ifs = 0;
  std::vector<std::string> calls;
};

std::optional<int64_t> constantOf(mlir::Value v);

/// Whether `loop` runs once: LoopNest shows its body in its place.
bool runsOnce(mlir::scf::ForOp loop) {
  std::optional<int64_t> lb = constantOf(loop.getLowerBound()),
                         ub = constantOf(loop.getUpperBound()),
                         step = constantOf(loop.getStep());
  return lb && ub && step && *ub > *lb && *ub - *lb <= *step;
}

void countOp(mlir::Operation &op, OpCounts &counts) {
  llvm::StringRef name = op.getName().getStringRef();
  if (name == "vector.fma" || name == "math.fma")
    ++counts.fma;
  else if (name == "math.exp" || name == "math.exp2" || name.contains("scalef"))
    ++counts.exp;
  else if (name == "vector.reduction" || name == "vector.multi_reduction")
    ++counts.reductions;
  else if (name == "amx.tile_mulf" || name.contains("tdpbf16"))
    ++counts.amx;
  else if (mlir::isa<mlir::scf::IfOp>(op))
    ++counts.ifs;
  else if (auto call = mlir::dyn_cast<mlir::func::CallOp>(op))
    if (!llvm::is_contained(counts.calls, call.getCallee().str()))
      counts.calls.push_back(call.getCallee().str());
}

/// The ops of `region`, and of the loops in it too when `intoLoops` (else
/// only of those that run once).
void countOps(mlir::Region &region, OpCounts &counts, bool intoLoops) {
  for (mlir::Block &block : region)
    for (mlir::Operation &op : block) {
      auto loop = mlir::dyn_cast<mlir::scf::ForOp>(op);
      if (loop && !intoLoops && !runsOnce(loop))
        continue;
      countOp(op, counts);
      for (mlir::Region &r : op.getRegions())
        countOps(r, counts, intoLoops);
    }
}

std::optional<int64_t> constantOf(mlir::Value v) {
  if (auto c = v.getDefiningOp<mlir::arith::ConstantIndexOp>())
    return c.value();
  return std::nullopt;
}

/// Lines of text, one per loop of a task function's nest that computes
/// something (products, exp, reductions, calls), indented by depth: its
/// bounds, a role where the plan's numbers tell it, and what it computes
/// itself (outside the loops shown below it). Loops of one iteration are
/// left out (their bodies shown in their place), and so are loops that
/// only copy or initialize (counted in a last line) and what lies deeper
/// than kMaxDepth.
class LoopNest {
public:
  LoopNest(const PlanNumbers &plan, bool forward)
      : plan(plan), forward(forward) {}

  std::vector<std::string> describe(mlir::func::FuncOp fn) {
    std::vector<Node> roots;
    walkRegion(fn.getBody(), 0, /*guarded=*/false, fn, roots);
    std::vector<std::string> lines;
    int64_t copies = 0;
    for (const Node &node : roots)
      render(node, lines, copies);
    if (lines.size() > kMaxLines) {
      size_t left = lines.size() - (kMaxLines - 1);
      lines.resize(kMaxLines - 1);
      lines.push_back("... " + std::to_string(left) + " more loops");
    }
    if (copies)
      lines.push_back("(+ " + std::to_string(copies) +
                      " loops that copy, pack or initialize)");
    return lines;
  }

private:
  static constexpr int kMaxDepth = 5;
  static constexpr size_t kMaxLines = 18;

  struct Node {
    int depth = 0;
    std::string head, role, what;
    bool computes = false, task = false;
    std::vector<Node> children;
  };

  void render(const Node &node, std::vector<std::string> &lines,
              int64_t &copies) {
    if (!node.computes && !node.task) {
      // The loop and the loops in it.
      std::function<void(const Node &)> count = [&](const Node &n) {
        ++copies;
        for (const Node &child : n.children)
          count(child);
      };
      count(node);
      return;
    }
    std::string line = std::string(2 * node.depth, ' ') + node.head;
    if (!node.role.empty())
      line += "  -- " + node.role;
    if (!node.what.empty())
      line += "  [" + node.what + "]";
    lines.push_back(line);
    for (const Node &child : node.children)
      render(child, lines, copies);
  }

  void walkRegion(mlir::Region &region, int depth, bool guarded,
                  mlir::func::FuncOp fn, std::vector<Node> &out) {
    for (mlir::Block &block : region)
      for (mlir::Operation &op : block) {
        if (auto loop = mlir::dyn_cast<mlir::scf::ForOp>(op)) {
          visitLoop(loop, depth, guarded, fn, out);
        } else if (auto branch = mlir::dyn_cast<mlir::scf::IfOp>(op)) {
          for (mlir::Region &r : branch->getRegions())
            walkRegion(r, depth, /*guarded=*/true, fn, out);
        } else {
          for (mlir::Region &r : op.getRegions())
            walkRegion(r, depth, guarded, fn, out);
        }
      }
  }

  void visitLoop(mlir::scf::ForOp loop, int depth, bool guarded,
                 mlir::func::FuncOp fn, std::vector<Node> &out) {
    std::optional<int64_t> lb = constantOf(loop.getLowerBound()),
                           ub = constantOf(loop.getUpperBound()),
                           step = constantOf(loop.getStep());
    // Loops of one iteration (one head of a task, ...): their bodies.
    if (runsOnce(loop)) {
      walkRegion(loop.getRegion(), depth, guarded, fn, out);
      return;
    }
    if (depth >= kMaxDepth)
      return;
    auto bound = [](std::optional<int64_t> v) {
      return v ? std::to_string(*v) : std::string("?");
    };
    auto arg = mlir::dyn_cast<mlir::BlockArgument>(loop.getLowerBound());
    Node node;
    node.depth = depth;
    node.task = arg && arg.getOwner() == &fn.getBody().front();
    node.head =
        (guarded ? "if ..: " : "") +
        (node.task ? std::string("for task in [begin, end)")
                   : "for " + bound(lb) + ".." + bound(ub) +
                         (step && *step == 1 ? "" : " step " + bound(step)));
    std::optional<int64_t> trips;
    if (lb && ub && step)
      trips = (*ub - *lb + *step - 1) / *step;
    // All the nest computes (whether to show the loop), and what the loop
    // computes itself, outside the loops shown below it.
    OpCounts counts, own;
    countOps(loop.getRegion(), counts, /*intoLoops=*/true);
    countOps(loop.getRegion(), own, /*intoLoops=*/depth + 1 >= kMaxDepth);
    if (node.task) {
      node.role = "one task (run in parallel on the pool)";
    } else if (step && *step == plan.keyBlock && plan.keyBlock > 1) {
      node.role = "key blocks of " + std::to_string(plan.keyBlock) +
                  (forward ? " (online-softmax steps)" : "");
    } else if (!node.task && ub && plan.keyBlock > 0 && !forward &&
               *ub == (plan.skv + plan.keyBlock - 1) / plan.keyBlock) {
      node.role = "key blocks of " + std::to_string(plan.keyBlock) +
                  " keys (this split's)";
    } else if (trips && *trips == plan.rows && counts.exp > 0) {
      node.role = forward ? "rows: online softmax (max, exp, sum, rescale)"
                          : "rows: P = exp(S - LSE)";
    } else if (trips && *trips == plan.rows) {
      node.role = "rows of a register block";
    } else if (step && *step == 16 && ub && (*ub == plan.d || *ub == plan.dv)) {
      node.role = "16-lane vectors of a row";
    } else if (step && *step == plan.rows && plan.rows > 1) {
      node.role = "query tiles of " + std::to_string(plan.rows) + " rows";
    } else if (trips && *trips == plan.keyBlock / 32 && *step == 1 &&
               plan.keyBlock > 32) {
      node.role = "32-key tiles of the block";
    } else if (step && *step == 32) {
      node.role = "32-key tiles";
    } else if (step && *step == 16 && ub && (*ub == plan.d || *ub == plan.dv)) {
      node.role = "16-lane vectors of a row";
    } else if (ub && (*ub == plan.d || *ub == plan.dv)) {
      node.role = "head dimension";
    } else if (ub && *ub == plan.sq && step && *step == 1) {
      node.role = "query rows";
    } else if (!ub && step && *step == 1 && depth <= 2 && forward) {
      node.role = "query tiles of the task";
    }
    std::vector<std::string> what;
    if (own.amx)
      what.push_back(std::to_string(own.amx) + " AMX tile products");
    if (own.fma)
      what.push_back(std::to_string(own.fma) + " fma");
    if (own.exp)
      what.push_back("exp");
    if (own.reductions)
      what.push_back("reductions");
    // Long helper names cut short; the same cut name once, counted.
    std::vector<std::pair<std::string, int>> calls;
    for (const std::string &call : own.calls) {
      std::string shown = call.size() < 40 ? call : call.substr(0, 37) + "...";
      auto it = llvm::find_if(calls, [&](auto &c) { return c.first == shown; });
      if (it == calls.end())
        calls.push_back({shown, 1});
      else
        ++it->second;
    }
    for (auto &[shown, count] : calls)
      what.push_back("calls " + shown +
                     (count > 1 ? " (" + std::to_string(count) + ")" : ""));
    node.what = llvm::join(what, ", ");
    node.computes = counts.amx || counts.fma || counts.exp ||
                    counts.reductions || !counts.calls.empty();
    walkRegion(loop.getRegion(), depth + 1, /*guarded=*/false, fn,
               node.children);
    out.push_back(std::move(node));
  }

  PlanNumbers plan;
  bool forward;
};

/// One step of an entry point: a call of a task function (with its task
/// count), of another function, or an attn op left to the unfused
/// lowering.
struct EntryStep {
  std::string text, callee;
  bool parallel = false;
  int64_t calls = 1;
};

struct EntryPointInfo {
  std::string name, signature;
  std::vector<EntryStep> steps;
};

struct TaskFunctionInfo {
  std::string name, kind;
  std::vector<std::string> loops;
};

struct KernelDiagram {
  std::vector<EntryPointInfo> entries;
  std::vector<TaskFunctionInfo> tasks;
  std::vector<std::string> plans; // "attn.attention in @f_fwd: #attn..."
};

/// The entry points of @name (@name, @name_fwd, @name_bwd) in `lowered`
/// (after attn-lower-cpu) and the task functions they call.
KernelDiagram kernelDiagramOf(mlir::ModuleOp lowered, llvm::StringRef name,
                              const std::map<std::string, PlanNumbers> &plans,
                              const std::vector<std::string> &planTexts) {
  KernelDiagram diagram;
  diagram.plans = planTexts;
  std::vector<std::string> seen;
  for (std::string entry :
       {name.str(), name.str() + "_fwd", name.str() + "_bwd"}) {
    auto fn = lowered.lookupSymbol<mlir::func::FuncOp>(entry);
    if (!fn || fn.isExternal())
      continue;
    EntryPointInfo info;
    info.name = entry;
    info.signature = llvm::formatv("{0} inputs -> {1} results",
                                   fn.getNumArguments(), fn.getNumResults())
                         .str();
    fn.walk([&](mlir::Operation *op) {
      if (auto call = mlir::dyn_cast<mlir::func::CallOp>(op)) {
        std::string callee = call.getCallee().str();
        auto target = lowered.lookupSymbol<mlir::func::FuncOp>(callee);
        EntryStep step;
        step.callee = callee;
        if (target && target->hasAttr("attn.parallel_tasks") &&
            call.getNumOperands() >= 2) {
          std::optional<int64_t> begin =
              constantOf(call.getOperand(call.getNumOperands() - 2));
          std::optional<int64_t> end =
              constantOf(call.getOperand(call.getNumOperands() - 1));
          step.parallel = true;
          step.text = callee + "  x " +
                      (begin && end ? std::to_string(*end - *begin) : "?") +
                      " tasks";
          if (!llvm::is_contained(seen, callee)) {
            seen.push_back(callee);
            bool forward = !llvm::StringRef(callee).contains("backward") &&
                           !llvm::StringRef(callee).contains("_dq") &&
                           !llvm::StringRef(callee).contains("deltas");
            auto numbers = plans.find(forward ? "forward" : "backward");
            LoopNest nest(numbers == plans.end() ? PlanNumbers()
                                                 : numbers->second,
                          forward);
            diagram.tasks.push_back(
                {callee, taskKind(callee), nest.describe(target)});
          }
        } else {
          step.text = "calls @" + callee;
        }
        // Consecutive calls of one function (a layer's projections): one
        // line.
        if (!info.steps.empty() && info.steps.back().callee == callee &&
            info.steps.back().text == step.text) {
          EntryStep &last = info.steps.back();
          last.calls += 1;
          return;
        }
        info.steps.push_back(step);
      } else if (op->getDialect() &&
                 op->getDialect()->getNamespace() == "attn") {
        bool fusable = mlir::isa<attn::AttentionOp, attn::AttentionGradOp>(op);
        info.steps.push_back(
            {op->getName().getStringRef().str() +
                 (fusable ? "  (unfused: the reference lowering, "
                            "materializes scores)"
                          : "  (to linalg loops: attn-lower-to-linalg)"),
             "", false});
      }
    });
    diagram.entries.push_back(std::move(info));
  }
  return diagram;
}

llvm::Error drawKernels(const std::string &path, const std::string &title,
                        const KernelDiagram &diagram) {
  // Measure first, on a scratch canvas.
  Canvas scratch(8, 8);
  std::vector<plot::TextBox> entryBoxes, taskBoxes;
  for (const EntryPointInfo &entry : diagram.entries) {
    plot::TextBox box;
    box.title = "@" + entry.name + "  (" + entry.signature + ")";
    for (const EntryStep &step : entry.steps)
      box.lines.push_back((step.parallel ? "-> " : "   ") + step.text +
                          (step.calls > 1
                               ? "  (" + std::to_string(step.calls) + " calls)"
                               : ""));
    if (entry.steps.empty())
      box.lines.push_back("(no kernels: copies only)");
    entryBoxes.push_back(box);
  }
  for (const TaskFunctionInfo &task : diagram.tasks) {
    plot::TextBox box;
    box.title = task.name;
    if (!task.kind.empty())
      box.lines.push_back("// " + task.kind);
    box.lines.insert(box.lines.end(), task.loops.begin(), task.loops.end());
    box.fill = {1.0, 0.97, 0.92};
    box.border = {0.7, 0.45, 0.2};
    box.fontSize = 11;
    taskBoxes.push_back(box);
  }
  double entryWidth = 0, taskWidth = 0;
  for (auto &box : entryBoxes)
    entryWidth = std::max(entryWidth, plot::measureTextBox(scratch, box).w);
  for (auto &box : taskBoxes)
    taskWidth = std::max(taskWidth, plot::measureTextBox(scratch, box).w);
  const double margin = 20, gap = 70, top = 70 + 16.0 * diagram.plans.size();
  double taskX = margin + entryWidth + gap;
  // Layout: each entry point in the left column, the task functions it
  // calls first in the right column from its top.
  std::vector<double> entryY, taskY(taskBoxes.size(), 0);
  double yLeft = top, yRight = top;
  size_t nextTask = 0;
  for (size_t e = 0; e < entryBoxes.size(); ++e) {
    double y = std::max(yLeft, yRight);
    entryY.push_back(y);
    yLeft = y + plot::measureTextBox(scratch, entryBoxes[e]).h + 24;
    double ty = y;
    for (const EntryStep &step : diagram.entries[e].steps) {
      if (!step.parallel || nextTask >= taskBoxes.size() ||
          diagram.tasks[nextTask].name != step.callee)
        continue;
      taskY[nextTask] = ty;
      ty += plot::measureTextBox(scratch, taskBoxes[nextTask]).h + 16;
      ++nextTask;
    }
    yRight = std::max(yRight, ty + 8);
  }
  for (; nextTask < taskBoxes.size(); ++nextTask) {
    taskY[nextTask] = yRight;
    yRight += plot::measureTextBox(scratch, taskBoxes[nextTask]).h + 16;
  }
  double width = taskBoxes.empty() ? margin + entryWidth + margin
                                   : taskX + taskWidth + margin;
  width = std::max(width, scratch.textWidth(title, 15, true) + 2 * margin);
  for (const std::string &plan : diagram.plans)
    width =
        std::max(width, scratch.textWidth(plan, 11, false, true) + 2 * margin);
  Canvas canvas(int(width), int(std::max(yLeft, yRight) + margin));
  canvas.text(margin, 22, title, 15, Align::Left, plot::kBlack, true);
  double py = 48;
  canvas.text(margin, py,
              diagram.plans.empty() ? "tile plans (attn-plan-tiles): none"
                                    : "tile plans (attn-plan-tiles):",
              12, Align::Left, {0.3, 0.3, 0.3});
  for (const std::string &plan : diagram.plans) {
    py += 16;
    canvas.text(margin + 10, py, plan, 11, Align::Left, {0.2, 0.2, 0.2}, false,
                false, /*mono=*/true);
  }
  std::vector<Rect> taskRects;
  for (size_t t = 0; t < taskBoxes.size(); ++t)
    taskRects.push_back(
        plot::drawTextBox(canvas, taskX, taskY[t], taskBoxes[t]));
  for (size_t e = 0; e < entryBoxes.size(); ++e) {
    Rect rect = plot::drawTextBox(canvas, margin, entryY[e], entryBoxes[e]);
    double fs = entryBoxes[e].fontSize;
    std::vector<std::string> arrowed;
    for (size_t s = 0; s < diagram.entries[e].steps.size(); ++s) {
      const EntryStep &step = diagram.entries[e].steps[s];
      if (!step.parallel || llvm::is_contained(arrowed, step.callee))
        continue;
      arrowed.push_back(step.callee);
      for (size_t t = 0; t < diagram.tasks.size(); ++t)
        if (diagram.tasks[t].name == step.callee) {
          double ly = rect.y + fs * 2.3 + double(s) * fs * 1.35;
          plot::drawArrow(canvas, rect.right(), ly, taskRects[t].x - 2,
                          taskRects[t].y + 12, {0.5, 0.5, 0.6, 0.8});
          break;
        }
    }
  }
  return canvas.writePng(path);
}

//===----------------------------------------------------------------------===//
// 4. Statistics of the attention on the inputs
//===----------------------------------------------------------------------===//

/// One panel per head of batch 0: the pooled probabilities, on a
/// square-root colour scale shared by the panels.
llvm::Error drawHeatmaps(const std::string &path, const std::string &title,
                         const ref::AttentionStatistics &stats,
                         const ref::AttentionShape &shape, int64_t gq,
                         int64_t gk, const std::string &source) {
  // Four panels of 200 pixels a row, eight smaller ones for many heads.
  int64_t heads = shape.H, perRow = std::min<int64_t>(heads, heads > 8 ? 8 : 4);
  int64_t panelRows = (heads + perRow - 1) / perRow;
  double side = heads > 8 ? 130 : 200;
  double pw = side, ph = side;
  if (shape.Sq > shape.Skv)
    pw = std::max(60.0, side * double(shape.Skv) / double(shape.Sq));
  else
    ph = std::max(60.0, side * double(shape.Sq) / double(shape.Skv));
  double left = 90, top = 80, hgap = 40, vgap = 70;
  Canvas canvas(int(left + perRow * (pw + hgap) + 110),
                int(top + panelRows * (ph + vgap) + 10));
  double vmax = 0;
  bool nan = false;
  for (int64_t n = 0; n < heads * gq * gk; ++n) {
    if (std::isfinite(stats.pooled[n]))
      vmax = std::max(vmax, stats.pooled[n]);
    nan = nan || std::isnan(stats.pooled[n]);
  }
  if (vmax <= 0)
    vmax = 1;
  std::vector<double> rowEdges = edges(shape.Sq, gq),
                      colEdges = edges(shape.Skv, gk);
  for (int64_t h = 0; h < heads; ++h) {
    double x = left + double(h % perRow) * (pw + hgap),
           y = top + double(h / perRow) * (ph + vgap);
    Axes axes{{x, y, pw, ph}, 0, double(shape.Skv), 0, double(shape.Sq), true};
    llvm::ArrayRef<double> values(&stats.pooled[h * gq * gk], gq * gk);
    plot::drawCells(canvas, axes, values, rowEdges, colEdges, [&](double v) {
      return plot::viridis(std::sqrt(std::max(v, 0.0) / vmax));
    });
    plot::AxesText text;
    text.title = "head " + std::to_string(h);
    text.xTicks = 3;
    text.yTicks = 3;
    text.fontSize = 11;
    if (h / perRow == panelRows - 1 || h + perRow >= heads)
      text.xLabel = "key j";
    if (h % perRow == 0)
      text.yLabel = "query i";
    plot::drawAxes(canvas, axes, text);
  }
  canvas.text(canvas.width() / 2.0, 20, title, 14, Align::Center, plot::kBlack,
              true);
  canvas.text(
      canvas.width() / 2.0, 42,
      llvm::formatv("batch 0, by {3}; a cell is the mean of p over ~{0}x{1} "
                    "(i, j); square-root colour scale{2}",
                    llvm::formatv("{0:F1}", double(shape.Sq) / gq).str(),
                    llvm::formatv("{0:F1}", double(shape.Skv) / gk).str(),
                    nan ? "; grey: NaN (a score of +inf or NaN)" : "", source)
          .str(),
      12, Align::Center);
  double barX = left + perRow * (pw + hgap) - hgap + 24;
  plot::drawColourBar(
      canvas, {barX, top, 16, std::max(ph, 160.0)}, 0, vmax,
      [](double t) { return plot::viridis(t); }, "mean probability p", 12,
      /*gamma=*/0.5);
  return canvas.writePng(path);
}

llvm::Error drawEntropy(const std::string &path, const std::string &title,
                        const ref::AttentionStatistics &stats,
                        const ref::AttentionShape &shape,
                        const std::vector<double> &uniform,
                        const std::string &source) {
  int64_t heads = shape.H, sq = shape.Sq;
  Canvas canvas(1060, 470);
  Rect lineBox{80, 80, 520, 320};
  double ymax = 0;
  for (int64_t n = 0; n < heads * sq; ++n)
    if (std::isfinite(stats.entropy[n]))
      ymax = std::max(ymax, stats.entropy[n]);
  for (double u : uniform)
    if (std::isfinite(u))
      ymax = std::max(ymax, u);
  ymax = ymax > 0 ? ymax * 1.05 : 1;
  // Few rows (decoding): points at whole rows, half a row of margin.
  bool few = sq < 16;
  Axes lines{lineBox,
             few ? -0.5 : 0.0,
             few ? double(sq) - 0.5 : double(sq - 1),
             0,
             ymax,
             /*yDown=*/false};
  std::vector<double> xs(sq);
  for (int64_t i = 0; i < sq; ++i)
    xs[i] = double(i);
  for (double y : plot::niceTicks(0, ymax, 5, false))
    canvas.line(lineBox.x, lines.py(y), lineBox.right(), lines.py(y),
                plot::kLightGrey, 1);
  plot::drawPolyline(canvas, lines, xs, uniform, plot::kBlack, 1.5,
                     /*dashed=*/true);
  for (int64_t h = 0; h < heads; ++h) {
    llvm::ArrayRef<double> ys(&stats.entropy[h * sq], size_t(sq));
    plot::drawPolyline(canvas, lines, xs, ys, plot::qualitative(int(h)), 1.5);
    if (few)
      plot::drawPoints(canvas, lines, xs, ys, plot::qualitative(int(h)), 3.5);
  }
  if (few)
    plot::drawPoints(canvas, lines, xs, uniform, plot::kBlack, 2);
  plot::AxesText text;
  text.title = "entropy of each query row's p";
  text.xLabel = "query row i";
  text.yLabel = "entropy (nats)";
  text.integerTicks = false;
  for (double x : plot::niceTicks(0, double(std::max<int64_t>(sq - 1, 1)), 6,
                                  /*integers=*/true))
    if (x <= double(sq - 1))
      text.xTickLabels.push_back({x, plot::formatNumber(x)});
  plot::drawAxes(canvas, lines, text);
  // Legend: heads (at most 12 named), then the uniform bound.
  std::vector<std::pair<Color, std::string>> legend;
  for (int64_t h = 0; h < std::min<int64_t>(heads, 12); ++h)
    legend.push_back({plot::qualitative(int(h)), "head " + std::to_string(h)});
  if (heads > 12)
    legend.push_back({plot::kWhite, "... (colours repeat)"});
  double y = plot::drawLegend(canvas, lineBox.right() + 14, lineBox.y + 6,
                              legend, 11, /*lines=*/true);
  canvas.line(lineBox.right() + 14, y, lineBox.right() + 36, y, plot::kBlack,
              1.5, true);
  canvas.text(lineBox.right() + 42, y, "log(visible keys)", 11);
  canvas.text(lineBox.right() + 42, y + 15, "= uniform attention", 11);

  // Bars: the mean entropy of each head.
  Rect barBox{830, 80, 200, 320};
  double bmax = 0;
  for (int64_t h = 0; h < heads; ++h)
    if (std::isfinite(stats.meanEntropy[h]))
      bmax = std::max(bmax, stats.meanEntropy[h]);
  bmax = bmax > 0 ? bmax * 1.1 : 1;
  Axes bars{barBox, -0.5, double(heads) - 0.5, 0, bmax, /*yDown=*/false};
  for (int64_t h = 0; h < heads; ++h) {
    double v = stats.meanEntropy[h];
    if (!std::isfinite(v))
      continue;
    double x0 = bars.px(double(h) - 0.4), x1 = bars.px(double(h) + 0.4);
    canvas.fill({x0, bars.py(v), x1 - x0, bars.py(0) - bars.py(v)},
                plot::qualitative(int(h)));
  }
  plot::AxesText barText;
  barText.title = "mean entropy per head";
  barText.xLabel = "head";
  barText.yLabel = "nats";
  barText.integerTicks = false;
  int64_t every = std::max<int64_t>(1, (heads + 7) / 8);
  for (int64_t h = 0; h < heads; h += every)
    barText.xTickLabels.push_back({double(h), std::to_string(h)});
  plot::drawAxes(canvas, bars, barText);
  canvas.text(canvas.width() / 2.0, 20, title, 14, Align::Center, plot::kBlack,
              true);
  canvas.text(canvas.width() / 2.0, 42,
              "batch 0, by " + source +
                  "; rows that see no key count 0 (not in the means)",
              12, Align::Center);
  return canvas.writePng(path);
}

llvm::Error drawSimilarity(const std::string &path, const std::string &title,
                           const ref::AttentionStatistics &stats, int64_t heads,
                           const std::string &source) {
  double cell = std::clamp(400.0 / double(heads), 6.0, 60.0);
  Rect box{90, 80, cell * double(heads), cell * double(heads)};
  Canvas canvas(int(box.right() + 150), int(box.bottom() + 70));
  Axes axes{box, -0.5, double(heads) - 0.5, -0.5, double(heads) - 0.5, true};
  std::vector<double> e(heads + 1);
  for (int64_t h = 0; h <= heads; ++h)
    e[h] = double(h) - 0.5;
  llvm::ArrayRef<double> values(stats.similarity.data(), size_t(heads * heads));
  plot::drawCells(canvas, axes, values, e, e,
                  [](double v) { return plot::viridis(v); });
  if (heads <= 12)
    for (int64_t r = 0; r < heads; ++r)
      for (int64_t c = 0; c < heads; ++c) {
        double v = values[r * heads + c];
        canvas.text(axes.px(double(c)), axes.py(double(r)),
                    llvm::formatv("{0:F2}", v).str(), std::min(11.0, cell / 3),
                    Align::Center,
                    v > 0.6 || std::isnan(v) ? plot::kBlack : plot::kWhite);
      }
  plot::AxesText text;
  text.xLabel = "head";
  text.yLabel = "head";
  int64_t every = std::max<int64_t>(1, (heads + 11) / 12);
  for (int64_t h = 0; h < heads; h += every) {
    text.xTickLabels.push_back({double(h), std::to_string(h)});
    text.yTickLabels.push_back({double(h), std::to_string(h)});
  }
  plot::drawAxes(canvas, axes, text);
  canvas.text(canvas.width() / 2.0, 20, title, 14, Align::Center, plot::kBlack,
              true);
  canvas.text(canvas.width() / 2.0, 44,
              "batch 0, by " + source +
                  ": <P_h, P_g> / (|P_h| |P_g|) over all (i, j)",
              12, Align::Center);
  plot::drawColourBar(
      canvas, {box.right() + 24, box.y, 16, box.h}, 0, 1,
      [](double t) { return plot::viridis(t); }, "cosine similarity");
  return canvas.writePng(path);
}

//===----------------------------------------------------------------------===//
// 4. The statistics by the compiled kernels
//===----------------------------------------------------------------------===//

/// attn.attention_stats's results for every batch, in float64: entropy
/// [B, H, Sq], mean_entropy [B, H], pooled [B, H, Gq, Gk] and similarity
/// [B, H, H]; and what computing them took.
struct CompiledStatistics {
  std::vector<double> entropy, meanEntropy, pooled, similarity;
  double compileMs = 0, kernelMs = 0;
  bool fromDiskCache = false;

  /// Batch b's part, laid out as ref::attentionStatistics returns one
  /// batch.
  ref::AttentionStatistics batch(int64_t b, const ref::AttentionShape &shape,
                                 int64_t gq, int64_t gk) const {
    auto slice = [b](const std::vector<double> &all, int64_t per) {
      return std::vector<double>(all.begin() + b * per,
                                 all.begin() + (b + 1) * per);
    };
    ref::AttentionStatistics stats;
    stats.entropy = slice(entropy, shape.H * shape.Sq);
    stats.meanEntropy = slice(meanEntropy, shape.H);
    stats.pooled = slice(pooled, shape.H * gq * gk);
    stats.similarity = slice(similarity, shape.H * shape.H);
    return stats;
  }
};

/// A module of one function @`function` whose arguments are the distinct
/// operands of `op` (returned in `arguments`, in the order they first
/// appear among op's operands) and whose body is a copy of `op` and an
/// attn.attention_stats on its LSE with the same options and regions,
/// returning O, the entropies, the mean entropies, the pooled map of
/// gq x gk cells and the head similarity.
mlir::OwningOpRef<mlir::ModuleOp>
statisticsModule(attn::AttentionOp op, llvm::StringRef function, int64_t gq,
                 int64_t gk, std::vector<mlir::Value> &arguments) {
  mlir::ImplicitLocOpBuilder b(op.getLoc(), op.getContext());
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(b.getLoc());
  for (mlir::Value value : op->getOperands())
    if (!llvm::is_contained(arguments, value))
      arguments.push_back(value);
  llvm::SmallVector<mlir::Type> argumentTypes;
  for (mlir::Value value : arguments)
    argumentTypes.push_back(value.getType());
  auto q = shapeOf(op.getQuery());
  auto f32 = [&](llvm::ArrayRef<int64_t> shape) -> mlir::Type {
    return mlir::RankedTensorType::get(shape, b.getF32Type());
  };
  mlir::Type entropy = f32({q[0], q[1], q[2]}), mean = f32({q[0], q[1]}),
             pooled = f32({q[0], q[1], gq, gk}),
             similarity = f32({q[0], q[1], q[1]});
  b.setInsertionPointToEnd(module->getBody());
  auto fn = mlir::func::FuncOp::create(
      b, function,
      b.getFunctionType(argumentTypes, {op.getOutput().getType(), entropy, mean,
                                        pooled, similarity}));
  mlir::Block *block = fn.addEntryBlock();
  b.setInsertionPointToStart(block);
  mlir::IRMapping map;
  for (auto [value, argument] : llvm::zip(arguments, block->getArguments()))
    map.map(value, argument);
  auto attention =
      mlir::cast<attn::AttentionOp>(b.clone(*op.getOperation(), map));
  auto stats = attn::AttentionStatsOp::create(
      b, entropy, mean, pooled, similarity, attention.getQuery(),
      attention.getKey(), attention.getLse(), attention.getScaleAttr(),
      attention.getCausalAttr(), attention.getWindowAttr(),
      attention.getLengths(), attention.getScoreCaptures(),
      attention.getMaskCaptures());
  attn::cloneRegions(attention, stats);
  mlir::func::ReturnOp::create(
      b, mlir::ValueRange{attention.getOutput(), stats.getEntropy(),
                          stats.getMeanEntropy(), stats.getPooled(),
                          stats.getSimilarity()});
  return module;
}

/// The tensors of some values of a spec function: each points into the
/// function's inputs, an InterpretedAttention, or `computed`.
struct OperandValues {
  std::vector<const HostTensor *> tensors;
  std::vector<HostTensor> computed;
};

/// The values of `values`, operands of `op` (an attn.attention of `func`'s
/// body), when `func` runs on `inputs`: an argument's own; Q, K and V as
/// `attention` evaluated them; the others (lengths or captures that ops
/// compute) by the spec interpreter, on a copy of `func` that returns them
/// just before `op`.
mlir::FailureOr<OperandValues>
operandValues(mlir::func::FuncOp func, attn::AttentionOp op,
              const std::vector<HostTensor> &inputs,
              const InterpretedAttention &attention,
              llvm::ArrayRef<mlir::Value> values) {
  OperandValues result;
  result.tensors.resize(values.size(), nullptr);
  std::vector<size_t> computed;
  mlir::Block &body = func.getBody().front();
  for (size_t n = 0; n < values.size(); ++n) {
    auto argument = mlir::dyn_cast<mlir::BlockArgument>(values[n]);
    if (argument && argument.getOwner() == &body)
      result.tensors[n] = &inputs[argument.getArgNumber()];
    else if (values[n] == op.getQuery())
      result.tensors[n] = &attention.query;
    else if (values[n] == op.getKey())
      result.tensors[n] = &attention.key;
    else if (values[n] == op.getValue())
      result.tensors[n] = &attention.value;
    else
      computed.push_back(n);
  }
  if (computed.empty())
    return result;
  mlir::OwningOpRef<mlir::ModuleOp> scratch =
      mlir::ModuleOp::create(func.getLoc());
  mlir::IRMapping map;
  mlir::func::FuncOp copy = func.clone(map);
  scratch->push_back(copy);
  mlir::Block &block = copy.getBody().front();
  mlir::Operation *copied = &*std::next(
      block.begin(), std::distance(body.begin(), op->getIterator()));
  llvm::SmallVector<mlir::Value> returned;
  llvm::SmallVector<mlir::Type> types;
  for (size_t n : computed) {
    returned.push_back(map.lookup(values[n]));
    types.push_back(values[n].getType());
  }
  mlir::OpBuilder b(copied);
  mlir::Operation *ret =
      mlir::func::ReturnOp::create(b, copied->getLoc(), returned);
  while (&block.back() != ret) {
    block.back().dropAllUses();
    block.back().erase();
  }
  copy.setType(b.getFunctionType(copy.getArgumentTypes(), types));
  copy.removeResAttrsAttr();
  mlir::FailureOr<std::vector<HostTensor>> evaluated =
      interpretSpec(copy, inputs, /*roundResults=*/true);
  if (mlir::failed(evaluated))
    return mlir::failure();
  // Moving `result` keeps the tensors of `computed` where they are.
  result.computed = std::move(*evaluated);
  for (size_t n = 0; n < computed.size(); ++n)
    result.tensors[computed[n]] = &result.computed[n];
  return result;
}

using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

/// attn.attention_stats over `op` (an attn.attention of `func`'s body) for
/// every batch, by the kernels the JIT compiles for `cpu` (without a
/// backward), called on `func`'s `inputs` as the spec interpreter carries
/// them to `op`. `text` receives the compiled spec as soon as it is built.
llvm::Expected<CompiledStatistics>
compiledStatistics(mlir::func::FuncOp func, attn::AttentionOp op,
                   const std::vector<HostTensor> &inputs,
                   const InterpretedAttention &attention,
                   const std::string &cpu, int64_t gq, int64_t gk,
                   std::string &text) {
  // Diagnostics of the building and the interpreting go to the error.
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(
      op.getContext(), [&](mlir::Diagnostic &diagnostic) {
        diagnostics += diagnostic.str() + "\n";
        return mlir::success();
      });
  std::string function = func.getSymName().str() + "_statistics";
  std::vector<mlir::Value> arguments;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      statisticsModule(op, function, gq, gk, arguments);
  if (mlir::failed(mlir::verify(*module)))
    return makeError("the statistics function does not verify: " + diagnostics);
  llvm::raw_string_ostream(text) << *module;
  mlir::FailureOr<OperandValues> values =
      operandValues(func, op, inputs, attention, arguments);
  if (mlir::failed(values))
    return makeError("cannot evaluate the attention's operands: " +
                     diagnostics);

  CompiledStatistics result;
  jit::Options jitOptions;
  jitOptions.cpu = cpu;
  jitOptions.backward = false;
  std::string error;
  Clock::time_point start = Clock::now();
  std::shared_ptr<const jit::Module> compiled =
      jit::Module::compile(text, jitOptions, &error);
  result.compileMs = millisecondsSince(start);
  if (!compiled)
    return makeError("the JIT did not compile " + function +
                     ".mlir (its spec.mlir):\n" + error);
  result.fromDiskCache = compiled->fromDiskCache();
  const jit::EntryPoint *entry = compiled->find(function);
  size_t count = values->tensors.size();
  if (!entry || entry->args.size() != count + 5)
    return makeError("the JIT made no entry point @" + function + " of " +
                     llvm::Twine(count) + " inputs and 5 outputs");
  std::vector<Buffer> buffers;
  buffers.reserve(entry->args.size());
  for (const jit::TensorSpec &arg : entry->args) {
    // The kernels read the bytes: the inputs' and O's values go (a copy
    // while packing an input).
    Buffer &buffer = buffers.emplace_back(arg);
    bool statistic = arg.isOutput && buffers.size() > count + 1;
    if (!arg.isOutput) {
      const HostTensor &value = *values->tensors[buffers.size() - 1];
      if (value.data.size() != buffer.values.data.size())
        return makeError("input '" + arg.name + "' of @" + function +
                         " has another size than the attention's operand");
      buffer.values.data = value.data;
      buffer.pack();
    }
    if (!statistic)
      buffer.values.data = std::vector<double>();
  }
  start = Clock::now();
  jit::Result called = callWith(*compiled, function, buffers);
  result.kernelMs = millisecondsSince(start);
  if (!called.error.empty())
    return makeError("calling @" + function + " failed: " + called.error);
  if (called.status != 0)
    return makeError("the kernels of @" + function + " returned status " +
                     llvm::Twine(called.status));
  std::vector<double> *outputs[] = {&result.entropy, &result.meanEntropy,
                                    &result.pooled, &result.similarity};
  for (size_t n = 0; n < 4; ++n) {
    Buffer &buffer = buffers[count + 1 + n];
    buffer.unpack();
    *outputs[n] = std::move(buffer.values.data);
  }
  return result;
}

/// max |a - b| / max |b| over the elements (as attnc run measures its
/// outputs' errors); elements NaN in both count as equal, NaN in one only
/// make it NaN.
double relativeDifference(llvm::ArrayRef<double> a, llvm::ArrayRef<double> b) {
  double difference = 0, scale = 0;
  for (size_t n = 0; n < a.size() && n < b.size(); ++n) {
    if (std::isnan(a[n]) && std::isnan(b[n]))
      continue;
    if (std::isnan(a[n]) || std::isnan(b[n]))
      return std::nan("");
    difference = std::max(difference, std::fabs(a[n] - b[n]));
    scale = std::max(scale, std::fabs(b[n]));
  }
  return scale > 0 ? difference / scale : difference;
}

std::string scientific(double value) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%.1e", value);
  return text;
}

/// An HTML table of the mean entropy of each batch (rows) and head
/// (columns), at most 64 x 32 of them.
std::string meanEntropyTable(const CompiledStatistics &stats, int64_t batches,
                             int64_t heads) {
  int64_t rows = std::min<int64_t>(batches, 64),
          cols = std::min<int64_t>(heads, 32);
  std::string html = "<table class=\"numbers\">\n<tr><th>batch</th>";
  for (int64_t h = 0; h < cols; ++h)
    html += "<th>head " + std::to_string(h) + "</th>";
  html += cols < heads ? "<th>...</th></tr>\n" : "</tr>\n";
  for (int64_t b = 0; b < rows; ++b) {
    html += "<tr><td>" + std::to_string(b) + "</td>";
    for (int64_t h = 0; h < cols; ++h)
      html += llvm::formatv("<td>{0:F3}</td>", stats.meanEntropy[b * heads + h])
                  .str();
    html += cols < heads ? "<td>...</td></tr>\n" : "</tr>\n";
  }
  if (rows < batches)
    html += "<tr><td>...</td></tr>\n";
  return html + "</table>\n";
}

//===----------------------------------------------------------------------===//
// The report
//===----------------------------------------------------------------------===//

/// One numbered part of a function's section: a heading, a paragraph
/// (HTML) and its pictures.
struct Part {
  std::string heading, text;
  std::vector<std::string> notes; // HTML blocks after the paragraph
  std::vector<std::string> files;
  std::string after; // HTML after the pictures
};

/// What one spec function's section of index.html says.
struct Section {
  std::string name;
  std::vector<std::string> intro; // HTML paragraphs
  std::map<int, Part> parts;      // by number, 1 to 4
};

class Explainer {
public:
  Explainer(const ExplainOptions &options, llvm::raw_ostream &outs,
            llvm::raw_ostream &errs)
      : options(options), outs(outs), errs(errs) {}

  int run(const std::string &path);

private:
  int fail(const llvm::Twine &message) {
    errs << "attnc: error: " << message << "\n";
    return 1;
  }
  std::string out(const std::string &file) const {
    llvm::SmallString<256> p(options.outputDir);
    llvm::sys::path::append(p, file);
    return std::string(p);
  }
  /// Records a picture of `part` once written; false (with the error
  /// printed) when it could not be.
  bool picture(Part &part, const std::string &file, llvm::Error written) {
    if (written) {
      errs << "attnc: error: " << toString(std::move(written)) << "\n";
      return false;
    }
    part.files.push_back(file);
    outs << "  wrote " << out(file) << "\n";
    return true;
  }
  /// Writes `text` to `file` of the folder; false (with the error
  /// printed) when it could not.
  bool writeText(const std::string &file, const std::string &text) {
    std::error_code ec;
    llvm::raw_fd_ostream os(out(file), ec);
    if (!ec) {
      os << text;
      os.close();
      ec = os.error();
      os.clear_error();
    }
    if (ec) {
      errs << "attnc: error: cannot write '" << out(file)
           << "': " << ec.message() << "\n";
      return false;
    }
    outs << "  wrote " << out(file) << "\n";
    return true;
  }
  mlir::LogicalResult explainFunction(
      const KernelSignature &kernel, const std::vector<HostTensor> &inputs,
      mlir::ModuleOp original, mlir::ModuleOp fused, mlir::ModuleOp planned,
      mlir::ModuleOp lowered, const std::vector<std::string> &plans,
      const std::map<std::string, PlanNumbers> &numbers, Section &section);
  bool writeIndex(const std::string &path,
                  const std::vector<Section> &sections);

  const ExplainOptions &options;
  llvm::raw_ostream &outs, &errs;
  std::unique_ptr<TargetInfo> target;
  std::map<std::string, GivenInput> given;
};

int Explainer::run(const std::string &path) {
  if (options.outputDir.empty())
    return fail("give the output folder with -o DIR");
  if (options.grid < 1)
    return fail("--grid must be at least 1, got " + llvm::Twine(options.grid));
  auto file = llvm::MemoryBuffer::getFileOrSTDIN(path, /*IsText=*/true);
  if (!file)
    return fail("cannot read '" + path + "': " + file.getError().message());
  auto info = targetFor(options);
  if (!info)
    return fail(toString(info.takeError()));
  target = std::move(*info);

  LoadedSpec loaded(std::move(*file), errs);
  mlir::FailureOr<Spec> spec = loaded.parse();
  if (mlir::failed(spec))
    return 1;
  auto inputs = readInputs(options.inputs, spec->kernels);
  if (!inputs)
    return fail(toString(inputs.takeError()));
  given = std::move(*inputs);

  // The spec as attnc compile sees it, at three points of its pipeline:
  // fused (the graph stage without the backward: what the reference
  // interprets), tiles planned (attn-plan-tiles), and the whole graph
  // stage lowered by attn-lower-cpu (the kernels).
  const AttncPipelineOptions &pipeline = target->options;
  mlir::OwningOpRef<mlir::ModuleOp> fused = spec->module->clone();
  if (mlir::failed(runPasses(*fused, [&](mlir::OpPassManager &pm) {
        buildGraphPipeline(pm, /*fuse=*/true, /*backward=*/false);
      })))
    return 1;
  mlir::OwningOpRef<mlir::ModuleOp> planned = fused->clone();
  if (mlir::failed(runPasses(*planned, [&](mlir::OpPassManager &pm) {
        addPlanTiles(pm, pipeline);
      })))
    return 1;
  mlir::OwningOpRef<mlir::ModuleOp> lowered = spec->module->clone();
  if (mlir::failed(runPasses(*lowered, [&](mlir::OpPassManager &pm) {
        buildGraphPipeline(pm, /*fuse=*/true, options.backward);
        addPlanTiles(pm, pipeline);
      })))
    return 1;
  // The plans, read before attn-lower-cpu consumes them.
  std::map<std::string, std::vector<std::string>> plans;
  std::map<std::string, std::map<std::string, PlanNumbers>> numbers;
  lowered->walk([&](mlir::Operation *op) {
    if (!mlir::isa<attn::AttentionOp, attn::AttentionGradOp>(op))
      return;
    auto plan =
        mlir::dyn_cast_or_null<attn::CpuPlanAttr>(attn::getTilePlan(op));
    auto fn = op->getParentOfType<mlir::func::FuncOp>();
    if (!plan || !fn)
      return;
    std::string owner = fn.getSymName().str();
    llvm::StringRef base = owner;
    if (!base.consume_back("_fwd"))
      base.consume_back("_bwd");
    std::string text;
    llvm::raw_string_ostream os(text);
    os << op->getName().getStringRef() << " in @" << owner << ": ";
    os << mlir::Attribute(plan);
    plans[base.str()].push_back(text);
    bool grad = mlir::isa<attn::AttentionGradOp>(op);
    auto q = shapeOf(op->getOperand(0)), v = shapeOf(op->getOperand(2));
    numbers[base.str()][grad ? "backward" : "forward"] = {
        plan.getRows(), plan.getKeyBlock(), q[3], v[3], q[2], v[2]};
  });
  if (mlir::failed(runPasses(*lowered, [&](mlir::OpPassManager &pm) {
        AttnLowerCpuOptions lower;
        lower.vectorBits = pipeline.vectorBits;
        pm.addPass(createAttnLowerCpu(lower));
      })))
    return 1;

  // Every function's inputs, before anything is written: a bad one writes
  // no folder.
  std::map<std::string, std::vector<HostTensor>> inputsByFunction;
  for (const KernelSignature &kernel : spec->kernels) {
    mlir::FailureOr<std::vector<HostTensor>> inputs = inputsOf(
        kernel, spec->module->lookupSymbol<mlir::func::FuncOp>(kernel.name),
        given, options.seed);
    if (mlir::failed(inputs))
      return 1;
    inputsByFunction[kernel.name] = std::move(*inputs);
  }
  if (std::error_code ec = llvm::sys::fs::create_directories(options.outputDir))
    return fail("cannot create the folder '" + options.outputDir +
                "': " + ec.message());
  std::vector<Section> sections;
  for (const KernelSignature &kernel : spec->kernels) {
    Section section;
    section.name = kernel.name;
    outs << "@" << kernel.name << ":\n";
    if (mlir::failed(explainFunction(kernel, inputsByFunction[kernel.name],
                                     *spec->module, *fused, *planned, *lowered,
                                     plans[kernel.name], numbers[kernel.name],
                                     section)))
      return 1;
    sections.push_back(std::move(section));
  }
  std::string index = out("index.html");
  if (!writeIndex(index, sections))
    return 1;
  outs << "wrote " << index << "\n";
  return 0;
}

mlir::LogicalResult Explainer::explainFunction(
    const KernelSignature &kernel, const std::vector<HostTensor> &inputs,
    mlir::ModuleOp original, mlir::ModuleOp fused, mlir::ModuleOp planned,
    mlir::ModuleOp lowered, const std::vector<std::string> &plans,
    const std::map<std::string, PlanNumbers> &numbers, Section &section) {
  const std::string &name = kernel.name;
  auto fusedFn = fused.lookupSymbol<mlir::func::FuncOp>(name);
  auto originalFn = original.lookupSymbol<mlir::func::FuncOp>(name);
  auto plannedFn = planned.lookupSymbol<mlir::func::FuncOp>(name);
  attn::AttentionOp op = fusedFn ? firstAttention(fusedFn) : nullptr;
  attn::AttentionOp plannedOp = plannedFn ? firstAttention(plannedFn) : nullptr;
  Part &maskPart = section.parts[1], &tilePart = section.parts[2],
       &kernelPart = section.parts[3], &statsPart = section.parts[4];
  maskPart.heading = "1. The mask";
  tilePart.heading = "2. The tile map";
  kernelPart.heading = "3. The kernels and their loops";
  statsPart.heading = "4. Attention on the inputs";

  if (!op) {
    section.intro.push_back(
        "@" + htmlEscape(name) +
        " has no attn.attention, also after attn-fuse: no mask, tile map or "
        "attention statistics to show.");
    section.parts.erase(1);
    section.parts.erase(2);
    section.parts.erase(4);
  } else {
    auto q = shapeOf(op.getQuery()), k = shapeOf(op.getKey()),
         v = shapeOf(op.getValue());
    std::string where = lineOf(op), type;
    llvm::raw_string_ostream(type)
        << mlir::getElementTypeOrSelf(op.getQuery().getType());
    section.intro.push_back(
        llvm::formatv(
            "The pictures show the first attn.attention{0}: B = "
            "{1}, H = {2} (KV heads {3}), Sq = {4}, Skv = {5}, D = "
            "{6}, Dv = {7}, {8}; scale {9}; masks: {10}{11}.",
            where.empty() ? "" : " (" + htmlEscape(where) + ")", q[0], q[1],
            k[1], q[2], k[2], q[3], v[3], htmlEscape(type),
            llvm::format("%.6g", double(float(op.getEffectiveScale()))),
            describeMask(op),
            op.getScoreMod().empty() ? "" : "; a score_mod region")
            .str());
    if (!originalFn || !firstAttention(originalFn))
      section.intro.push_back(
          "@" + htmlEscape(name) +
          " is written in the graph form: attn-fuse (run here as attnc "
          "compile runs it, after inlining) fused its chain into this one "
          "attn.attention.");

    // The op as the reference evaluates it on the inputs.
    mlir::FailureOr<InterpretedAttention> attention =
        interpretAttention(fusedFn, op, inputs);
    if (mlir::failed(attention))
      return mlir::failure();
    const ref::AttentionShape &shape = attention->shape;

    // 1. The mask.
    MaskGrid grid = maskGrid(attention->mask, 0, 0, shape.Sq, shape.Skv);
    if (!picture(maskPart, name + "_mask.png",
                 drawMask(out(name + "_mask.png"),
                          "@" + name + ": visible (i, j) of batch 0, head 0",
                          grid, shape.Sq, shape.Skv)))
      return mlir::failure();
    maskPart.text =
        describeMask(op) + ", by the reference's semantics (ref::isVisible" +
        (op.getMaskMod().empty()
             ? ""
             : "; the mask_mod region evaluated in float64 by the spec "
               "interpreter") +
        "); query rows downwards, keys to the right; " + percent(grid.visible) +
        " of the pairs are visible" +
        (op.getLengths() ? " (batch 0's key length: " +
                               std::to_string(attention->mask.lengths[0]) + ")"
                         : "") +
        ".";

    // 2. The tile map.
    if (plannedOp && mlir::isa_and_nonnull<attn::CpuPlanAttr>(
                         attn::getTilePlan(plannedOp.getOperation()))) {
      std::optional<HostTensor> offsets;
      if (attention->mask.offsets)
        offsets =
            HostTensor{{attention->mask.numOffsets},
                       std::vector<double>(attention->mask.offsets,
                                           attention->mask.offsets +
                                               attention->mask.numOffsets)};
      TileMap map = tileMapOf(plannedOp, attention->mask.lengths,
                              offsets ? &*offsets : nullptr);
      if (!picture(tilePart, name + "_tiles.png",
                   drawTileMap(
                       out(name + "_tiles.png"),
                       "@" + name + ": tiles of the CPU forward", map, grid,
                       op.getLengths()
                           ? std::optional<int64_t>(attention->mask.lengths[0])
                           : std::nullopt)))
        return mlir::failure();
      std::string planText;
      llvm::raw_string_ostream os(planText);
      os << mlir::Attribute(map.plan);
      int64_t total = map.counts[0] + map.counts[1] + map.counts[2];
      tilePart.text =
          llvm::formatv(
              "attn-plan-tiles planned <code>{0}</code> for {1}: register "
              "blocks of {2} query rows, {3} rows a task, online-softmax "
              "steps of {4} keys{5}. The masks it analyses per tile: {6}{7}. "
              "Of batch 0's {8} tiles ({9} query tiles x {10} key block(s)), "
              "{11} are skipped, {12} whole and {13} boundary; skipping "
              "saves {14} of the score FLOPs (Q K<sup>T</sup> and P V) over "
              "all batches. (codegen/MaskTiles.h's own index arithmetic "
              "classifies the tiles. Within a block, a tile also skips the "
              "32-key tiles past its last visible key: not counted here.)",
              htmlEscape(planText), htmlEscape(target->cpu), map.rows,
              map.queryBlock, map.width,
              map.plan.getAmx() ? ", on AMX tiles" : "", map.namedMasks,
              map.maskModLeft
                  ? " (the mask_mod region is not affine in i - j: every "
                    "tile a task visits evaluates it per key)"
                  : (!op.getMaskMod().empty()
                         ? " (the mask_mod region became these named masks)"
                         : ""),
              total, map.rowStarts.size(), map.keyStarts.size(), map.counts[0],
              map.counts[1], map.counts[2], percent(map.savedShare))
              .str();
    } else {
      tilePart.text = "The first attn.attention has no CPU tile plan (it "
                      "takes the unfused reference lowering): no tiles are "
                      "skipped.";
    }

    // 4. The statistics: attn.attention_stats over this op, by the compiled
    // kernels, for every batch; the pictures show batch 0. The float64
    // reference computes batch 0 again as a cross-check where that is
    // cheap, and in the kernels' place where they fail.
    int64_t gq = std::min(options.grid, shape.Sq),
            gk = std::min(options.grid, shape.Skv);
    auto reference = [&] {
      // Batch 0: Q and K begin with it, and the mask and score_mod see
      // b = 0.
      ref::AttentionShape batch0 = shape;
      batch0.B = 1;
      double gflop = 2e-9 * double(shape.H * shape.Sq * shape.Skv * shape.D);
      if (gflop > 20)
        outs << llvm::formatv("  the float64 attention statistics take {0:F0} "
                              "GFLOP: this takes a while\n",
                              gflop);
      return ref::attentionStatistics(
          batch0, attention->scale, attention->mask, attention->scoreMod,
          attention->query.data.data(), attention->key.data.data(), gq, gk);
    };
    std::string specText, specLink;
    llvm::Expected<CompiledStatistics> compiled = compiledStatistics(
        fusedFn, op, inputs, *attention, target->jitCpu, gq, gk, specText);
    if (!specText.empty()) {
      std::string specFile = name + "_statistics.mlir";
      if (!writeText(specFile, specText)) {
        if (!compiled)
          llvm::consumeError(compiled.takeError());
        return mlir::failure();
      }
      specLink = "<a href=\"" + htmlEscape(specFile) + "\"><code>@" +
                 htmlEscape(name) + "_statistics</code></a>";
    }
    ref::AttentionStatistics stats;
    std::string source;
    std::vector<std::string> paragraphs;
    std::string errorBlock;
    if (compiled) {
      stats = compiled->batch(0, shape, gq, gk);
      source = "the compiled kernels";
      std::string batches = shape.B == 1
                                ? std::string("its one batch")
                                : "all " + std::to_string(shape.B) + " batches";
      std::string compiledIn =
          compiled->fromDiskCache
              ? std::string("from the disk cache")
              : llvm::formatv("compiled in {0:F0} ms", compiled->compileMs)
                    .str();
      std::vector<std::string> extras;
      if (op.getLengths())
        extras.push_back("the key lengths");
      if (!op.getScoreCaptures().empty() || !op.getMaskCaptures().empty())
        extras.push_back("the captures");
      std::string extraOperands =
          extras.empty() ? "" : " (and " + llvm::join(extras, " and ") + ")";
      outs << llvm::formatv("  statistics by the compiled kernels ({0}): "
                            "{1:F1} ms for {2}\n",
                            compiledIn, compiled->kernelMs, batches);
      paragraphs.push_back(
          llvm::formatv(
              "The statistics were computed by the compiled kernels in {0:F1} "
              "ms (one call, for {1}): the JIT compiled {2} (this "
              "attn.attention and an attn.attention_stats on its LSE with "
              "the same options and regions, without a backward; {3}, for "
              "the CPU {4}) and called it on Q, K, V{5} as the spec computes "
              "them from the inputs. The pictures show batch 0.",
              compiled->kernelMs, batches, specLink, compiledIn,
              htmlEscape(target->jitCpu == "native"
                             ? llvm::sys::getHostCPUName().str() + " (native)"
                             : target->jitCpu),
              extraOperands)
              .str() +
          (target->jitNote.empty()
               ? ""
               : " (Not for --cpu=" + htmlEscape(options.cpu) + ": " +
                     htmlEscape(target->jitNote) + ".)"));
      double size = double(shape.B) * double(shape.H) * double(shape.Sq) *
                    double(shape.Skv) * double(shape.D);
      if (size <= double(int64_t(1) << 26)) {
        ref::AttentionStatistics exact = reference();
        std::string differences[] = {
            scientific(relativeDifference(stats.entropy, exact.entropy)),
            scientific(
                relativeDifference(stats.meanEntropy, exact.meanEntropy)),
            scientific(relativeDifference(stats.pooled, exact.pooled)),
            scientific(relativeDifference(stats.similarity, exact.similarity))};
        paragraphs.push_back(
            llvm::formatv("Cross-check against the float64 reference "
                          "(ref::attentionStatistics, from P row by row, "
                          "batch 0): max |compiled - float64| / max "
                          "|float64| is {0} for the entropies, {1} for the "
                          "mean entropies, {2} for the pooled map and {3} "
                          "for the head similarity.",
                          differences[0], differences[1], differences[2],
                          differences[3])
                .str());
        outs << llvm::formatv("  cross-check against the float64 reference "
                              "(batch 0): entropy {0}, mean entropy {1}, "
                              "pooled {2}, similarity {3}\n",
                              differences[0], differences[1], differences[2],
                              differences[3]);
      } else {
        paragraphs.push_back(
            "No cross-check against the float64 reference at this size: B H "
            "Sq Skv D = " +
            scientific(size) + " is above 2<sup>26</sup>.");
      }
      if (shape.B > 1)
        statsPart.after =
            "<p>The mean entropy (nats) of each head in every batch, from the "
            "same call:</p>\n" +
            meanEntropyTable(*compiled, shape.B, shape.H);
    } else {
      std::string message = toString(compiled.takeError());
      errs << "attnc: warning: @" << name
           << ": the compiled statistics failed; the float64 reference "
              "computes them instead: "
           << message << "\n";
      stats = reference();
      source = "the float64 reference";
      paragraphs.push_back(
          "<b>The compiled kernels failed</b> (the error is below; it is a "
          "bug, please report it), so the statistics of batch 0 come from "
          "the float64 reference (ref::attentionStatistics, from P row by "
          "row)" +
          (specLink.empty() ? std::string()
                            : ". The function the kernels were to compute "
                              "them with: " +
                                  specLink) +
          ".");
      errorBlock = "<pre>" + htmlEscape(message) + "</pre>";
    }
    // log(visible keys) per row of batch 0, head 0: uniform attention
    // (left out where a mask_mod region would take too long).
    std::vector<double> uniform(shape.Sq, std::nan(""));
    if (!attention->mask.maskMod || shape.Sq * shape.Skv <= (1 << 22))
      for (int64_t i = 0; i < shape.Sq; ++i) {
        int64_t count = 0;
        for (int64_t j = 0; j < shape.Skv; ++j)
          count += ref::isVisible(attention->mask, 0, 0, i, j);
        uniform[i] = count ? std::log(double(count)) : std::nan("");
      }
    std::vector<std::string> from;
    for (const KernelArg &arg : kernel.args)
      if (!arg.isOutput && given.count(arg.name))
        from.push_back(htmlEscape(arg.name) + " from " +
                       htmlEscape(given.at(arg.name).file));
    statsPart.text =
        "P = softmax(mask(score_mod(scale Q K<sup>T</sup>))) on " +
        (from.empty()
             ? "random inputs (seed " + std::to_string(options.seed) +
                   "; floats uniform in [-1, 1), integers in [0, the largest "
                   "dimension], as attnc run draws them)"
             : "inputs " + llvm::join(from, ", ") +
                   ", the others random (seed " + std::to_string(options.seed) +
                   ")") +
        ": per head the mean of p over " + std::to_string(gq) + " x " +
        std::to_string(gk) +
        " cells; each row's entropy (log of the visible keys when uniform, 0 "
        "when one key takes all); the cosine similarity of the heads' P.";
    for (const std::string &paragraph : paragraphs)
      statsPart.notes.push_back("<p>" + paragraph + "</p>");
    if (!errorBlock.empty())
      statsPart.notes.push_back(errorBlock);
    if (!picture(statsPart, name + "_heatmaps.png",
                 drawHeatmaps(out(name + "_heatmaps.png"),
                              "@" + name + ": attention probabilities per head",
                              stats, shape, gq, gk, source)) ||
        !picture(statsPart, name + "_entropy.png",
                 drawEntropy(out(name + "_entropy.png"),
                             "@" + name +
                                 ": how spread out each row's "
                                 "attention is",
                             stats, shape, uniform, source)) ||
        !picture(statsPart, name + "_similarity.png",
                 drawSimilarity(out(name + "_similarity.png"),
                                "@" + name +
                                    ": similarity of the heads' "
                                    "attention",
                                stats, shape.H, source)))
      return mlir::failure();
  }

  // 3. The kernels.
  KernelDiagram diagram = kernelDiagramOf(lowered, name, numbers, plans);
  if (!picture(kernelPart, name + "_kernels.png",
               drawKernels(out(name + "_kernels.png"),
                           "@" + name +
                               ": entry points and their parallel "
                               "task functions (after "
                               "attn-lower-cpu)",
                           diagram)))
    return mlir::failure();
  std::vector<std::string> entries, tasks;
  for (const EntryPointInfo &entry : diagram.entries)
    entries.push_back("<code>" + htmlEscape(entry.name) + "</code>");
  for (const TaskFunctionInfo &task : diagram.tasks)
    tasks.push_back("<code>" + htmlEscape(task.name) + "</code>");
  kernelPart.text =
      "Entry points " + llvm::join(entries, ", ") +
      (tasks.empty()
           ? "; no parallel task functions (no fused kernels)."
           : "; the parallel task functions attn-lower-cpu outlined for them "
             "(a call runs its tasks on the runtime's thread pool): " +
                 llvm::join(tasks, ", ") +
                 ". Their loop nests are read from the module after "
                 "attn-lower-cpu: bounds (? where they depend on the task), "
                 "roles where the plan's numbers tell them, and what a nest "
                 "computes (fma, exp, reductions); loops of one iteration "
                 "are left out.");
  return mlir::success();
}

bool Explainer::writeIndex(const std::string &path,
                           const std::vector<Section> &sections) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    errs << "attnc: error: cannot write '" << path << "': " << ec.message()
         << "\n";
    return false;
  }
  os << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n"
     << "<title>attnc explain</title>\n<style>\n"
     << "body { font-family: sans-serif; max-width: 1200px; margin: 2em "
        "auto; line-height: 1.4; }\n"
     << "img { max-width: 100%; border: 1px solid #ddd; margin: 0.3em 0; }\n"
     << "code { background: #f4f4f4; }\n"
     << "pre { background: #fff4f0; padding: 0.5em; white-space: pre-wrap; }\n"
     << "table.numbers { border-collapse: collapse; font-size: 90%; }\n"
     << "table.numbers td, table.numbers th { padding: 0.1em 0.6em; "
        "text-align: right; border-bottom: 1px solid #eee; }\n"
     << "</style></head><body>\n"
     << "<h1>What attnc decided</h1>\n"
     << "<p>Target: " << htmlEscape(target->triple) << ", CPU "
     << htmlEscape(target->cpu) << ", vector registers of "
     << int64_t(target->options.vectorBits) << " bits"
     << (target->options.amx ? ", AMX tiles" : "")
     << (target->options.dotBf16 ? ", AVX-512 BF16 dot products" : "")
     << " (what attnc compile --cpu=" << htmlEscape(options.cpu)
     << " plans for: <code>attnc-pipeline{vector-bits="
     << int64_t(target->options.vectorBits)
     << " amx=" << (target->options.amx ? "true" : "false")
     << " dot-bf16=" << (target->options.dotBf16 ? "true" : "false")
     << " backward=" << (target->options.backward ? "true" : "false")
     << "}</code>, the tile planner attn-plan-tiles and the CPU lowering "
        "attn-lower-cpu).</p>\n";
  for (const Section &section : sections) {
    os << "<h2>@" << htmlEscape(section.name) << "</h2>\n";
    for (const std::string &p : section.intro)
      os << "<p>" << p << "</p>\n";
    for (auto &[number, part] : section.parts) {
      os << "<h3>" << htmlEscape(part.heading) << "</h3>\n<p>" << part.text
         << "</p>\n";
      for (const std::string &note : part.notes)
        os << note << "\n";
      for (const std::string &file : part.files)
        os << "<img src=\"" << htmlEscape(file) << "\" alt=\""
           << htmlEscape(file) << "\">\n";
      os << part.after;
    }
  }
  os << "</body></html>\n";
  return true;
}

} // namespace

int explainSpec(const std::string &path, const ExplainOptions &options,
                llvm::raw_ostream &outs, llvm::raw_ostream &errs) {
  return Explainer(options, outs, errs).run(path);
}

} // namespace attnc
