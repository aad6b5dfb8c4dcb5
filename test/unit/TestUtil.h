// Helpers shared by the GoogleTest files that compile specs with the JIT.
#ifndef ATTNC_TEST_UNIT_TESTUTIL_H
#define ATTNC_TEST_UNIT_TESTUTIL_H

#include "attnc/jit.h"
#include "attnc/runtime.h"
#include "tools/reference/Reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

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

/// A tensor argument held as doubles (what the reference sees) and as the
/// bytes the kernel reads, rounded to its dtype.
struct Buffer {
  std::vector<double> values;
  std::vector<uint8_t> bytes;
  std::string dtype;

  Buffer(size_t n, const std::string &dtype) : values(n), dtype(dtype) {
    bytes.resize(n * elementSize());
  }
  size_t elementSize() const {
    return dtype == "f32" || dtype == "i32" ? 4 : dtype == "i64" ? 8 : 2;
  }
  void *data() { return bytes.data(); }
  /// Stores `values` into `bytes`, rounding them to the dtype first.
  void pack() {
    for (size_t i = 0; i < values.size(); ++i) {
      if (dtype == "f32") {
        float f = float(values[i]);
        std::memcpy(&bytes[4 * i], &f, 4);
        values[i] = f;
      } else if (dtype == "i32") {
        int32_t v = int32_t(values[i]);
        std::memcpy(&bytes[4 * i], &v, 4);
      } else {
        uint16_t bits = dtype == "f16" ? ref::floatToHalf(float(values[i]))
                                       : ref::floatToBFloat16(float(values[i]));
        std::memcpy(&bytes[2 * i], &bits, 2);
        values[i] = dtype == "f16" ? ref::halfToFloat(bits)
                                   : ref::bfloat16ToFloat(bits);
      }
    }
  }
  /// Reads the kernel's output back into `values`.
  void unpack() {
    for (size_t i = 0; i < values.size(); ++i) {
      if (dtype == "f32") {
        float f;
        std::memcpy(&f, &bytes[4 * i], 4);
        values[i] = f;
      } else {
        uint16_t bits;
        std::memcpy(&bits, &bytes[2 * i], 2);
        values[i] = dtype == "f16" ? ref::halfToFloat(bits)
                                   : ref::bfloat16ToFloat(bits);
      }
    }
  }
};

/// max |actual - expected| / max(max |expected|, floor); NaN must match
/// (NaN against a number, either way, is an infinite error).
inline double errorOf(const std::vector<double> &actual,
                      const std::vector<double> &expected, double floor) {
  double diff = 0, norm = floor;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (std::isnan(actual[i]) != std::isnan(expected[i]))
      return std::numeric_limits<double>::infinity();
    if (std::isnan(expected[i]))
      continue;
    diff = std::max(diff, std::fabs(actual[i] - expected[i]));
    norm = std::max(norm, std::fabs(expected[i]));
  }
  return diff / norm;
}

/// max |actual - expected| / (max |expected| + scale_i) over the elements
/// i, NaN as above: errors relative to each element's own scale (the sum
/// of absolute terms that cancel into it) beside the largest element.
inline double errorOf(const std::vector<double> &actual,
                      const std::vector<double> &expected,
                      const std::vector<double> &scale) {
  double norm = std::numeric_limits<double>::min();
  for (double e : expected)
    if (!std::isnan(e))
      norm = std::max(norm, std::fabs(e));
  double error = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (std::isnan(actual[i]) != std::isnan(expected[i]))
      return std::numeric_limits<double>::infinity();
    if (!std::isnan(expected[i]))
      error = std::max(error,
                       std::fabs(actual[i] - expected[i]) / (norm + scale[i]));
  }
  return error;
}

/// Where `actual` has NaN and `expected` a number, or the reverse, first:
/// "element N: A against E" for a failing check's message; "" if nowhere.
inline std::string nanMismatch(const std::vector<double> &actual,
                               const std::vector<double> &expected) {
  for (size_t i = 0; i < expected.size(); ++i)
    if (std::isnan(actual[i]) != std::isnan(expected[i]))
      return "element " + std::to_string(i) + ": " + std::to_string(actual[i]) +
             " against " + std::to_string(expected[i]);
  return "";
}

/// Whether a status says there is no Vulkan device: such tests skip unless
/// ATTNC_REQUIRE_VULKAN=1 (then they fail).
inline bool noVulkanDevice(const jit::Result &result) {
  const char *require = std::getenv("ATTNC_REQUIRE_VULKAN");
  return result.error.empty() && result.status == ATTNC_STATUS_NO_DEVICE &&
         !(require && std::string(require) == "1");
}

/// Calls entry point `name` with one Buffer per tensor, in order (their
/// count checked).
inline jit::Result call(const jit::Module &module, const std::string &name,
                        const std::vector<Buffer *> &buffers) {
  const jit::EntryPoint *entry = module.find(name);
  if (!entry)
    return {1, "no entry point " + name};
  if (entry->args.size() != buffers.size())
    return {1, name + " takes " + std::to_string(entry->args.size()) +
                   " tensors, the test passes " +
                   std::to_string(buffers.size())};
  std::vector<jit::TensorRef> tensors;
  for (size_t k = 0; k < buffers.size(); ++k)
    tensors.push_back(
        {buffers[k]->data(), entry->args[k].shape, entry->args[k].dtype});
  return module.call(name, tensors);
}

} // namespace attnc::test

#endif // ATTNC_TEST_UNIT_TESTUTIL_H
