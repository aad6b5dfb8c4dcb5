// From the LLVM dialect to machine code: TargetMachine, LLVM IR, objects.
#ifndef ATTNC_CODEGEN_TARGET_H
#define ATTNC_CODEGEN_TARGET_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
} // namespace llvm

namespace attnc {

struct TargetOptions {
  std::string triple;       // empty: the host
  std::string cpu = "native"; // "native": the host CPU and its features
  unsigned optLevel = 3;
};

/// A TargetMachine for position-independent code on `options`' target.
llvm::Expected<std::unique_ptr<llvm::TargetMachine>>
createTargetMachine(const TargetOptions &options);

/// The host ISA features `machine`'s CPU uses that this host lacks, comma
/// separated (empty: its code runs here).
std::string featuresMissingOnHost(llvm::TargetMachine &machine);

/// The width of `machine`'s vector registers in bits: 512 with AVX-512, 256
/// with AVX, else 128 (what attn-plan-tiles sizes register blocks for).
int64_t vectorRegisterBits(llvm::TargetMachine &machine);

/// Whether `machine`'s CPU has AMX tiles with bf16 products.
bool hasAmxBf16(llvm::TargetMachine &machine);
/// Whether `machine` has AVX-512 BF16 (vdpbf16ps).
bool hasAvx512Bf16(llvm::TargetMachine &machine);

/// Translates an LLVM-dialect module to LLVM IR for `machine` and runs the
/// optimization pipeline at `optLevel`.
llvm::Expected<std::unique_ptr<llvm::Module>>
translateToLLVMIR(mlir::ModuleOp module, llvm::LLVMContext &llvmContext,
                  llvm::TargetMachine &machine, unsigned optLevel);

/// Writes `module` as an object file or assembly.
llvm::Error emitMachineCode(llvm::Module &module, llvm::TargetMachine &machine,
                            llvm::raw_pwrite_stream &os, bool assembly);

} // namespace attnc

#endif // ATTNC_CODEGEN_TARGET_H
