// NumPy .npy files (format versions 1, 2 and 3): a small reader for the
// inputs of attnc explain.
#ifndef ATTNC_TOOLS_ATTNC_NPY_H
#define ATTNC_TOOLS_ATTNC_NPY_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace attnc {

/// A C-ordered array of a .npy file, its elements as float64 values.
struct NpyArray {
  std::vector<int64_t> shape;
  /// The element type as NumPy names it: "<f4", "<f8", "<f2", "<i4", "<i8".
  std::string descr;
  std::vector<double> data;
  bool isFloat() const { return descr[1] == 'f'; }
};

/// Parses the contents of a .npy file: little-endian (or byte-order-free)
/// f2, f4, f8, i4 and i8 in C order. The error says what is wrong (bad
/// magic, an unsupported version or dtype, Fortran order, a malformed
/// header, a truncated or oversized data section).
llvm::Expected<NpyArray> parseNpy(llvm::StringRef bytes);

/// Reads and parses the file at `path`; errors name the file.
llvm::Expected<NpyArray> readNpy(llvm::StringRef path);

/// "(2, 8, 80, 32)", NumPy's spelling of a shape.
std::string shapeString(const std::vector<int64_t> &shape);

} // namespace attnc

#endif // ATTNC_TOOLS_ATTNC_NPY_H
