// The .npy reader of Npy.h.
#include "tools/attnc/Npy.h"

#include "tools/reference/Reference.h"

#include "llvm/Support/MemoryBuffer.h"

#include <cstring>

namespace attnc {
namespace {

llvm::Error npyError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The value of `key` in the header's Python dict literal, from just after
/// its colon; empty when the key is missing.
llvm::StringRef valueOf(llvm::StringRef header, llvm::StringRef key) {
  for (char quote : {'\'', '"'}) {
    std::string quoted = (llvm::Twine(quote) + key + llvm::Twine(quote)).str();
    size_t at = header.find(quoted);
    if (at == llvm::StringRef::npos)
      continue;
    llvm::StringRef rest = header.drop_front(at + quoted.size()).ltrim();
    if (!rest.consume_front(":"))
      return {};
    return rest.ltrim();
  }
  return {};
}

/// Reads `descr`'s quoted string.
bool parseDescr(llvm::StringRef value, std::string &descr) {
  if (value.empty() || (value[0] != '\'' && value[0] != '"'))
    return false;
  size_t end = value.find(value[0], 1);
  if (end == llvm::StringRef::npos)
    return false;
  descr = value.slice(1, end).str();
  return true;
}

/// Reads `shape`'s tuple of non-negative integers: "()", "(5,)", "(2, 3)".
bool parseShape(llvm::StringRef value, std::vector<int64_t> &shape) {
  if (!value.consume_front("("))
    return false;
  size_t end = value.find(')');
  if (end == llvm::StringRef::npos)
    return false;
  llvm::SmallVector<llvm::StringRef> items;
  value.take_front(end).split(items, ',');
  for (llvm::StringRef item : items) {
    item = item.trim();
    // A trailing comma, as in (5,), leaves an empty last item.
    if (item.empty())
      continue;
    // NumPy 1.x wrote longs as 5L.
    item.consume_back("L");
    int64_t n;
    if (item.getAsInteger(10, n) || n < 0)
      return false;
    shape.push_back(n);
  }
  return true;
}

} // namespace

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

llvm::Expected<NpyArray> parseNpy(llvm::StringRef bytes) {
  static const char magic[] = "\x93NUMPY";
  if (!bytes.starts_with(llvm::StringRef(magic, 6)))
    return npyError("not a NumPy .npy file (no \\x93NUMPY magic)");
  if (bytes.size() < 10)
    return npyError("truncated .npy header");
  unsigned major = uint8_t(bytes[6]);
  size_t headerLength, headerStart;
  if (major == 1) {
    headerLength = uint8_t(bytes[8]) | size_t(uint8_t(bytes[9])) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return npyError("truncated .npy header");
    headerLength = 0;
    for (int i = 0; i < 4; ++i)
      headerLength |= size_t(uint8_t(bytes[8 + i])) << (8 * i);
    headerStart = 12;
  } else {
    return npyError("unsupported .npy format version " + llvm::Twine(major) +
                    " (1, 2 and 3 are read)");
  }
  if (bytes.size() < headerStart + headerLength)
    return npyError("truncated .npy header");
  llvm::StringRef header = bytes.substr(headerStart, headerLength);

  NpyArray array;
  if (!parseDescr(valueOf(header, "descr"), array.descr))
    return npyError("malformed .npy header: no 'descr' string");
  llvm::StringRef fortran = valueOf(header, "fortran_order");
  if (fortran.starts_with("True"))
    return npyError("Fortran-ordered arrays are not supported; save a C-"
                    "ordered one (numpy.ascontiguousarray)");
  if (!fortran.starts_with("False"))
    return npyError("malformed .npy header: no 'fortran_order'");
  if (!parseShape(valueOf(header, "shape"), array.shape))
    return npyError("malformed .npy header: no 'shape' tuple");

  // '<' little-endian, '|' and '=' byte order free or native (x86 and
  // AArch64 Linux: little-endian).
  std::string descr = array.descr;
  if (descr.size() == 3 && (descr[0] == '|' || descr[0] == '='))
    descr[0] = '<';
  int width = 0;
  if (descr == "<f2")
    width = 2;
  else if (descr == "<f4" || descr == "<i4")
    width = 4;
  else if (descr == "<f8" || descr == "<i8")
    width = 8;
  else
    return npyError("unsupported dtype '" + array.descr +
                    "'; expected little-endian <f4, <f8, <f2, <i4 or <i8");
  array.descr = descr;

  uint64_t count = 1;
  for (int64_t d : array.shape) {
    if (d != 0 && count > (uint64_t(1) << 40) / uint64_t(d))
      return npyError("shape " + shapeString(array.shape) + " is too large");
    count *= uint64_t(d);
  }
  llvm::StringRef data = bytes.drop_front(headerStart + headerLength);
  if (data.size() != count * width)
    return npyError("data section of " + llvm::Twine(data.size()) +
                    " bytes, but shape " + shapeString(array.shape) + " of " +
                    array.descr + " needs " + llvm::Twine(count * width));
  array.data.resize(count);
  const char *p = data.data();
  for (uint64_t i = 0; i < count; ++i, p += width) {
    if (descr == "<f2") {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      array.data[i] = ref::halfToFloat(bits);
    } else if (descr == "<f4") {
      float f;
      std::memcpy(&f, p, 4);
      array.data[i] = f;
    } else if (descr == "<f8") {
      std::memcpy(&array.data[i], p, 8);
    } else if (descr == "<i4") {
      int32_t v;
      std::memcpy(&v, p, 4);
      array.data[i] = v;
    } else {
      int64_t v;
      std::memcpy(&v, p, 8);
      array.data[i] = double(v);
    }
  }
  return array;
}

llvm::Expected<NpyArray> readNpy(llvm::StringRef path) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return npyError("cannot read '" + path + "': " + file.getError().message());
  llvm::Expected<NpyArray> array = parseNpy((*file)->getBuffer());
  if (!array)
    return npyError("'" + path + "': " + toString(array.takeError()));
  return array;
}

} // namespace attnc
