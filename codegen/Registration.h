// What every attnc tool and the JIT register, in one place: the dialects
// a spec and the pipelines use (and only those), the interface models and
// LLVM IR translations they need, and attnc's passes and pipelines.
#ifndef ATTNC_CODEGEN_REGISTRATION_H
#define ATTNC_CODEGEN_REGISTRATION_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace attnc {

/// The attn dialect, the upstream dialects that spec regions and the
/// pipelines build, their bufferization, deallocation and value-bounds
/// interface models, the func inliner and the LLVM IR translations.
void registerAttncDialects(mlir::DialectRegistry &registry);

/// attnc's passes (attn-*), its pipelines (attnc-*) and the upstream
/// passes a lit test composes with them (canonicalize, cse, inline...).
void registerAttncPasses();

} // namespace attnc

#endif // ATTNC_CODEGEN_REGISTRATION_H
