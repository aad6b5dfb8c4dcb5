// The root of the dialect reference: every op and attribute of the attn
// dialect, for mlir-tblgen -gen-dialect-doc (dialect/CMakeLists.txt writes
// it to build/docs/AttnDialect.md; see docs/README.md).
include "dialect/AttnOps.td"
include "dialect/AttnAttrs.td"
