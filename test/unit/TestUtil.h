// Helpers shared by the GoogleTest files that compile specs with the JIT.
#ifndef ATTNC_TEST_UNIT_TESTUTIL_H
#define ATTNC_TEST_UNIT_TESTUTIL_H

#include "attnc/jit.h"

#include <initializer_list>
#include <sstream>
#include <string>

namespace attnc::test {

/// Tests compile in memory only: no disk cache shared with users.
inline jit::Options testOptions() {
  jit::Options options;
  options.diskCache = false;
  return options;
}

/// "tensor<2x3xf32>" for shape {2, 3} and dtype "f32".
inline std::string tensorType(std::initializer_list<int64_t> shape,
                              const std::string &dtype = "f32") {
  std::ostringstream os;
  os << "tensor<";
  for (int64_t d : shape)
    os << d << "x";
  os << dtype << ">";
  return os.str();
}

} // namespace attnc::test

#endif // ATTNC_TEST_UNIT_TESTUTIL_H
