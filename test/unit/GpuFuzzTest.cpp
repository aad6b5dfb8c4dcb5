// Random specs through the GPU layer (attnc compile --target=vulkan and
// --target=cuda, to LLVM IR with the kernels embedded): no crash, and every
// compile either succeeds or says why in a located error. The specs mix fused
// and graph forms, every mask kind, score_mod expressions over random
// arithmetic and math ops with float and integer captures, mask_mod regions,
// GQA/MQA, f32/f16/bf16, degenerate and odd shapes, and head dimensions up to
// 320 (too wide for the workgroup memory of the GPU plan: the unfused path),
// and attention statistics and distillations over the LSE (their forward
// and gradient kernels).
#include "codegen/Compile.h"
#include "codegen/Registration.h"
#include "test/unit/TestUtil.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>

namespace {

struct Generator {
  std::mt19937_64 rng;
  explicit Generator(uint64_t seed) : rng(seed) {}

  int64_t pick(std::initializer_list<int64_t> values) {
    return *(values.begin() + rng() % values.size());
  }
  bool chance(int outOf) { return rng() % outOf == 0; }

  /// A score_mod body: a few random f32 ops over the score, the indices
  /// and the captures, ending in %r.
  std::string scoreModBody(bool slopes, bool bias, int64_t H, int64_t Sq,
                           int64_t Skv) {
    std::ostringstream os;
    std::vector<std::string> values = {"%s"};
    os << "    %i64 = arith.index_cast %i : index to i64\n"
       << "    %j64 = arith.index_cast %j : index to i64\n"
       << "    %dij = arith.subi %j64, %i64 : i64\n"
       << "    %fd = arith.sitofp %dij : i64 to f32\n";
    values.push_back("%fd");
    if (slopes) {
      os << "    %sl = tensor.extract %slopesArg[%h] : tensor<" << H
         << "xf32>\n";
      values.push_back("%sl");
    }
    if (bias) {
      os << "    %bi = tensor.extract %biasArg[%h, %i, %j] : tensor<" << H
         << "x" << Sq << "x" << Skv << "xf32>\n";
      values.push_back("%bi");
    }
    int steps = 1 + rng() % 4;
    for (int n = 0; n < steps; ++n) {
      std::string a = values[rng() % values.size()],
                  b = values[rng() % values.size()];
      std::string name = "%t" + std::to_string(n);
      switch (rng() % 7) {
      case 0:
        os << "    " << name << " = arith.addf " << a << ", " << b
           << " : f32\n";
        break;
      case 1:
        os << "    " << name << " = arith.mulf " << a << ", " << b
           << " : f32\n";
        break;
      case 2:
        os << "    " << name << " = arith.subf " << a << ", " << b
           << " : f32\n";
        break;
      case 3:
        os << "    " << name << " = math.tanh " << a << " : f32\n";
        break;
      case 4:
        os << "    " << name << " = arith.maximumf " << a << ", " << b
           << " : f32\n";
        break;
      case 5:
        os << "    %c" << n << " = arith.constant 0.5 : f32\n"
           << "    " << name << " = arith.mulf " << a << ", %c" << n
           << " : f32\n";
        break;
      default:
        os << "    " << name << " = math.sin " << a << " : f32\n";
        break;
      }
      values.push_back(name);
    }
    os << "    %r = arith.addf %s, " << values.back() << " : f32\n"
       << "    attn.yield %r : f32\n";
    return os.str();
  }

  std::string spec() {
    int64_t B = pick({1, 2, 3}), Hkv = pick({1, 2, 3});
    int64_t H = Hkv * pick({1, 2, 4});
    int64_t Sq = pick({1, 2, 17, 33, 64}), Skv = pick({1, 3, 31, 32, 65});
    int64_t D = pick({1, 7, 16, 64, 80, 128, 320});
    int64_t Dv = chance(2) ? D : pick({3, 16, 64, 96});
    std::string dtype = chance(3) ? "bf16" : chance(3) ? "f16" : "f32";
    bool lengths = chance(3), slopes = chance(3), bias = chance(5),
         maskMod = chance(4), scoreMod = slopes || bias || chance(3);
    std::string q = attnc::test::tensorType({B, H, Sq, D}, dtype),
                k = attnc::test::tensorType({B, Hkv, Skv, D}, dtype),
                v = attnc::test::tensorType({B, Hkv, Skv, Dv}, dtype),
                o = attnc::test::tensorType({B, H, Sq, Dv}, dtype),
                lse = attnc::test::tensorType({B, H, Sq}, "f32");
    std::string masks;
    if (chance(2))
      masks += " causal";
    if (chance(3))
      masks += " window " + std::to_string(pick({1, 4, 40}));
    std::ostringstream os;
    os << "func.func @f(%q: " << q << ", %k: " << k << ", %v: " << v;
    if (lengths)
      os << ", %len: tensor<" << B << "xi32>";
    if (slopes)
      os << ", %slopes: tensor<" << H << "xf32>";
    if (bias)
      os << ", %bias: tensor<" << H << "x" << Sq << "x" << Skv << "xf32>";
    if (maskMod)
      os << ", %doc: tensor<" << std::max(Sq, Skv) << "xi32>";
    os << ") -> (" << o << ", " << lse << ") {\n"
       << "  %o, %lse = attn.attention %q, %k, %v" << masks;
    if (lengths)
      os << " lengths(%len : tensor<" << B << "xi32>)";
    std::vector<std::string> captures, captureTypes;
    if (slopes) {
      captures.push_back("%slopes");
      captureTypes.push_back("tensor<" + std::to_string(H) + "xf32>");
    }
    if (bias) {
      captures.push_back("%bias");
      captureTypes.push_back(attnc::test::tensorType({H, Sq, Skv}, "f32"));
    }
    auto list = [](const std::vector<std::string> &items) {
      std::string text;
      for (size_t n = 0; n < items.size(); ++n)
        text += (n ? ", " : "") + items[n];
      return text;
    };
    if (!captures.empty())
      os << " score_captures(" << list(captures) << " : " << list(captureTypes)
         << ")";
    std::string docType =
        "tensor<" + std::to_string(std::max(Sq, Skv)) + "xi32>";
    if (maskMod)
      os << " mask_captures(%doc : " << docType << ")";
    os << "\n      : " << q << ", " << k << ", " << v << " -> " << o << ", "
       << lse << "\n";
    std::ostringstream regions;
    if (scoreMod) {
      regions << "      score_mod {\n  ^bb0(%s: f32, %b: index, %h: index, "
                 "%i: index, %j: index";
      if (slopes)
        regions << ", %slopesArg: " << captureTypes[0];
      if (bias)
        regions << ", %biasArg: " << captureTypes.back();
      regions << "):\n" << scoreModBody(slopes, bias, H, Sq, Skv) << "  }";
    }
    std::string maskRegion =
        " mask_mod {\n  ^bb0(%b: index, %h: index, %i: index, %j: index, "
        "%docArg: " +
        docType + "):\n    %di = tensor.extract %docArg[%i] : " + docType +
        "\n    %dj = tensor.extract %docArg[%j] : " + docType +
        "\n    %same = arith.cmpi sle, %dj, %di : i32\n"
        "    attn.yield %same : i1\n  }";
    if (maskMod)
      regions << maskRegion;
    os << regions.str();
    // Statistics over the LSE, with the same masks and regions: a random
    // subset (the entropies are differentiated) and pooled grid.
    std::vector<std::string> results = {"%o", "%lse"}, resultTypes = {o, lse};
    if (chance(3)) {
      std::string headRows = attnc::test::tensorType({B, H, Sq}),
                  heads = attnc::test::tensorType({B, H}),
                  pooled =
                      attnc::test::tensorType({B, H, 1 + int64_t(rng() % Sq),
                                               1 + int64_t(rng() % Skv)}),
                  sim = attnc::test::tensorType({B, H, H});
      std::vector<std::pair<std::string, std::string>> all = {
          {"entropy", headRows},
          {"mean_entropy", heads},
          {"pooled", pooled},
          {"similarity", sim}};
      std::vector<std::pair<std::string, std::string>> picked;
      for (auto &stat : all)
        if (chance(2))
          picked.push_back(stat);
      if (picked.empty())
        picked.push_back(all[rng() % all.size()]);
      std::string names, types;
      for (size_t n = 0; n < picked.size(); ++n) {
        std::string name = "%st" + std::to_string(n);
        names += (n ? ", " : "") + name;
        types += " " + picked[n].first + " " + picked[n].second;
        results.push_back(name);
        resultTypes.push_back(picked[n].second);
      }
      os << "\n  " << names << " = attn.attention_stats %q, %k, %lse" << masks;
      if (lengths)
        os << " lengths(%len : tensor<" << B << "xi32>)";
      if (!captures.empty())
        os << " score_captures(" << list(captures) << " : "
           << list(captureTypes) << ")";
      if (maskMod)
        os << " mask_captures(%doc : " << docType << ")";
      os << "\n      : " << q << ", " << k << ", " << lse << " ->" << types
         << "\n"
         << regions.str();
    }
    // A distillation of the attention from itself (KL 0, but every kernel
    // of attn.distill and its gradient), per row or its mean.
    if (chance(4)) {
      std::string klType = chance(2) ? std::string("tensor<f32>") : lse;
      os << "\n  %kl = attn.distill %q, %k, %lse teacher %q, %k, %lse" << masks;
      if (lengths)
        os << " lengths(%len : tensor<" << B << "xi32>)";
      if (maskMod)
        os << " mask_captures(%doc : " << docType << ")";
      os << "\n      : " << q << ", " << k << ", " << lse << " teacher " << q
         << ", " << k << ", " << lse << " -> " << klType;
      if (maskMod)
        os << maskRegion;
      results.push_back("%kl");
      resultTypes.push_back(klType);
    }
    os << "\n  return " << list(results) << " : " << list(resultTypes)
       << "\n}\n";
    std::string text = os.str();
    // The function's result types, now that the statistics are known.
    std::string head = ") -> (" + o + ", " + lse + ") {";
    text.replace(text.find(head), head.size(),
                 ") -> (" + list(resultTypes) + ") {");
    return text;
  }
};

/// Compiles `count` random specs for `options`' target to LLVM IR; each
/// either compiles or fails with located errors (none does: the generator
/// writes valid specs).
void compileRandomSpecs(const attnc::Compiler &compiler, int count,
                        uint64_t seed) {
  mlir::DialectRegistry registry;
  attnc::registerAttncDialects(registry);
  Generator generator(seed);
  int compiled = 0;
  for (int n = 0; n < count; ++n) {
    std::string text = generator.spec();
    SCOPED_TRACE(text);
    mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
    context.printOpOnDiagnostic(false);
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text),
                                 llvm::SMLoc());
    int errors = 0;
    std::string messages;
    mlir::ScopedDiagnosticHandler handler(
        &context, [&](mlir::Diagnostic &diagnostic) {
          if (diagnostic.getSeverity() == mlir::DiagnosticSeverity::Error) {
            ++errors;
            messages += diagnostic.str() + "\n";
            EXPECT_FALSE(mlir::isa<mlir::UnknownLoc>(diagnostic.getLocation()))
                << "an error without a location: " << diagnostic.str();
          }
          return mlir::success();
        });
    mlir::FailureOr<attnc::Spec> spec = compiler.lower(sourceMgr, context);
    if (mlir::failed(spec)) {
      EXPECT_GT(errors, 0) << "a failed compile without an error";
      continue;
    }
    EXPECT_EQ(errors, 0) << messages;
    llvm::LLVMContext llvmContext;
    auto module = compiler.translate(*spec->module, llvmContext);
    ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
    ++compiled;
  }
  // The generator writes valid specs (every op it uses has a gradient
  // rule): all of them compile.
  EXPECT_EQ(compiled, count);
}

TEST(GpuFuzzTest, RandomSpecsCompileForVulkan) {
  attnc::CompileOptions options;
  options.target = attnc::CompileTarget::Vulkan;
  options.optLevel = 0;
  options.verifyEachPass = false;
  auto compiler = attnc::Compiler::create(options);
  ASSERT_TRUE(bool(compiler)) << llvm::toString(compiler.takeError());
  compileRandomSpecs(*compiler, 300, 20261202);
}

/// The same specs through NVVM to sm_90a PTX (LLVM's NVPTX backend; ptxas
/// is test/cuda's), where a CUDA toolkit's libdevice is installed.
TEST(GpuFuzzTest, RandomSpecsCompileForCuda) {
  attnc::CompileOptions options;
  options.target = attnc::CompileTarget::Cuda;
  options.gpuArch = "sm_90a";
  options.gpuBinary = "ptx";
  options.optLevel = 0;
  options.verifyEachPass = false;
  auto compiler = attnc::Compiler::create(options);
  if (!compiler)
    GTEST_SKIP() << llvm::toString(compiler.takeError());
  compileRandomSpecs(*compiler, 100, 20261202);
}

} // namespace
