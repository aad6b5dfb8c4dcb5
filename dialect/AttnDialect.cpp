// Registration of the attn dialect.
#include "dialect/AttnDialect.h"
#include "dialect/AttnOps.h"

#include "mlir/Transforms/InliningUtils.h"

using namespace mlir;
using namespace attnc::attn;

#include "dialect/AttnDialect.cpp.inc"

namespace {
/// attn ops are pure tensor computations: calls to spec functions can be
/// inlined through them (attn-derive-backward differentiates one body).
struct AttnInlinerInterface : DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Operation *, bool) const final {
    return true;
  }
  bool isLegalToInline(Region *, Region *, bool, IRMapping &) const final {
    return true;
  }
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void AttnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/AttnOps.cpp.inc"
      >();
  addInterfaces<AttnInlinerInterface>();
}
