// Tensors as a kernel reads them (bytes in their dtype) and as the float64
// reference reads them, for attnc run and attnc bench.
#ifndef ATTNC_TOOLS_ATTNC_HOSTBUFFER_H
#define ATTNC_TOOLS_ATTNC_HOSTBUFFER_H

#include "attnc/jit.h"
#include "tools/reference/Reference.h"
#include "tools/reference/SpecInterpreter.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace attnc {

using jit::DType;

inline bool isFloat(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

/// One argument's bytes as the kernel sees them, and its float64 values.
struct Buffer {
  jit::TensorSpec spec;
  std::vector<uint8_t> bytes;
  HostTensor values;

  explicit Buffer(const jit::TensorSpec &s) : spec(s) {
    bytes.resize(s.numBytes());
    values.shape = s.shape;
    values.data.assign(s.numElements(), 0.0);
  }
  /// Stores `values` (rounding them to the dtype, in place).
  void pack() {
    for (size_t i = 0; i < values.data.size(); ++i) {
      double &x = values.data[i];
      switch (spec.dtype) {
      case DType::F32: {
        float f = float(x);
        std::memcpy(&bytes[4 * i], &f, 4);
        x = f;
        break;
      }
      case DType::F16:
      case DType::BF16: {
        uint16_t bits = spec.dtype == DType::F16 ? ref::floatToHalf(float(x))
                                                 : ref::floatToBFloat16(float(x));
        std::memcpy(&bytes[2 * i], &bits, 2);
        x = spec.dtype == DType::F16 ? ref::halfToFloat(bits)
                                     : ref::bfloat16ToFloat(bits);
        break;
      }
      case DType::I32: {
        int32_t v = int32_t(x);
        std::memcpy(&bytes[4 * i], &v, 4);
        break;
      }
      case DType::I64: {
        int64_t v = int64_t(x);
        std::memcpy(&bytes[8 * i], &v, 8);
        break;
      }
      }
    }
  }
  void unpack() {
    for (size_t i = 0; i < values.data.size(); ++i) {
      switch (spec.dtype) {
      case DType::F32: {
        float f;
        std::memcpy(&f, &bytes[4 * i], 4);
        values.data[i] = f;
        break;
      }
      case DType::F16:
      case DType::BF16: {
        uint16_t bits;
        std::memcpy(&bits, &bytes[2 * i], 2);
        values.data[i] = spec.dtype == DType::F16 ? ref::halfToFloat(bits)
                                                  : ref::bfloat16ToFloat(bits);
        break;
      }
      case DType::I32: {
        int32_t v;
        std::memcpy(&v, &bytes[4 * i], 4);
        values.data[i] = v;
        break;
      }
      case DType::I64: {
        int64_t v;
        std::memcpy(&v, &bytes[8 * i], 8);
        values.data[i] = double(v);
        break;
      }
      }
    }
  }
};

/// Uniform in [-1, 1), from the top 53 bits of one draw.
inline double randomUniform(std::mt19937_64 &rng) {
  return double(rng() >> 11) / double(1ull << 53) * 2 - 1;
}

/// The largest dimension of any argument of `entry` (at least 1): the
/// bound of random integer inputs, so that lengths and ids stay in range.
inline int64_t largestDimension(const jit::EntryPoint &entry) {
  int64_t largest = 1;
  for (const jit::TensorSpec &arg : entry.args)
    for (int64_t d : arg.shape)
      largest = std::max(largest, d);
  return largest;
}

/// Random inputs: floats uniform in [-1, 1); integers (lengths, ids)
/// uniform in [0, maxInt].
inline void fillRandomInput(Buffer &buffer, std::mt19937_64 &rng,
                            int64_t maxInt, bool sorted = false) {
  for (double &x : buffer.values.data)
    x = isFloat(buffer.spec.dtype) ? randomUniform(rng)
                                   : double(rng() % uint64_t(maxInt + 1));
  if (sorted)
    std::sort(buffer.values.data.begin(), buffer.values.data.end());
  buffer.pack();
}

/// Calls entry point `name` of `module` on the bytes of `buffers`.
inline jit::Result callWith(const jit::Module &module, const std::string &name,
                            std::vector<Buffer> &buffers) {
  // Checked calls: they also run the kernels of GPU targets (copying the
  // tensors to the device and back).
  std::vector<jit::TensorRef> tensors;
  for (Buffer &buffer : buffers)
    tensors.push_back(
        {buffer.bytes.data(), buffer.spec.shape, buffer.spec.dtype});
  return module.call(name, tensors);
}

} // namespace attnc

#endif // ATTNC_TOOLS_ATTNC_HOSTBUFFER_H
