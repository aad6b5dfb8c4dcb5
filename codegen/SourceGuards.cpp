// The checks of SourceGuards.h.
#include "codegen/SourceGuards.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"

namespace attnc {

namespace {

/// Skips a comment or string literal at `p` (with its escapes); returns
/// whether there was one.
bool skipCommentOrString(const char *&p, const char *end) {
  if (*p == '/' && p + 1 != end && p[1] == '/') {
    while (p != end && *p != '\n')
      ++p;
    return true;
  }
  if (*p != '"')
    return false;
  for (++p; p != end && *p != '"'; ++p)
    if (*p == '\\' && p + 1 != end)
      ++p;
  if (p != end)
    ++p;
  return true;
}

} // namespace

const char *findIndexDenseArray(llvm::StringRef source) {
  const char *p = source.begin(), *end = source.end();
  while (p != end) {
    if (skipCommentOrString(p, end))
      continue;
    llvm::StringRef rest(p, end - p);
    if (rest.consume_front("array")) {
      rest = rest.ltrim();
      if (rest.consume_front("<") && rest.ltrim().starts_with("index"))
        return p;
    }
    ++p;
  }
  return nullptr;
}

const char *findNegativeDimension(llvm::StringRef source,
                                  llvm::StringRef *typeName) {
  auto isIdentifierChar = [](char c) {
    return llvm::isAlnum(c) || c == '_' || c == '.' || c == '$' || c == '%' ||
           c == '@' || c == '#' || c == '!' || c == '^';
  };
  const char *p = source.begin(), *end = source.end();
  while (p != end) {
    if (skipCommentOrString(p, end))
      continue;
    llvm::StringRef rest(p, end - p);
    bool atWord = p == source.begin() || !isIdentifierChar(p[-1]);
    if (atWord &&
        (rest.consume_front("tensor") || rest.consume_front("memref"))) {
      rest = rest.ltrim();
      if (rest.consume_front("<")) {
        // dimension-list: (`?` | decimal | `*`) `x` ..., then the element
        // type; blanks are allowed around each `x`.
        while (true) {
          rest = rest.ltrim();
          if (rest.starts_with("-") && rest.size() > 1 &&
              llvm::isDigit(rest[1])) {
            if (typeName)
              *typeName = llvm::StringRef(p, 6);
            return rest.begin();
          }
          size_t size = rest.starts_with("?") || rest.starts_with("*")
                            ? 1
                            : rest.find_if_not(llvm::isDigit);
          if (size == 0 || size == llvm::StringRef::npos)
            break;
          llvm::StringRef after = rest.drop_front(size).ltrim();
          if (!after.consume_front("x"))
            break;
          rest = after;
        }
      }
    }
    ++p;
  }
  return nullptr;
}

const char *findExcessNesting(llvm::StringRef source, unsigned limit) {
  unsigned depth = 0;
  const char *p = source.begin(), *end = source.end();
  while (p != end) {
    if (skipCommentOrString(p, end))
      continue;
    char c = *p;
    if (c == '{' || c == '(' || c == '[' || c == '<') {
      if (++depth > limit)
        return p;
    } else if (c == '}' || c == ')' || c == ']' ||
               (c == '>' &&
                (p == source.begin() || (p[-1] != '-' && p[-1] != '=')))) {
      if (depth)
        --depth;
    }
    ++p;
  }
  return nullptr;
}

std::optional<SourceHazard> findSourceHazard(llvm::StringRef source) {
  if (const char *deep = findExcessNesting(source))
    return SourceHazard{deep, ("brackets nest deeper than " +
                               llvm::Twine(kMaxSourceNesting) + " levels here")
                                  .str()};
  if (const char *array = findIndexDenseArray(source))
    return SourceHazard{array,
                        "dense arrays of index are not supported (MLIR 22's "
                        "parser crashes on them); use array<i64: ...>"};
  llvm::StringRef typeName;
  if (const char *negative = findNegativeDimension(source, &typeName))
    return SourceHazard{negative, ("negative dimension size in " + typeName +
                                   " type; sizes must be positive")
                                      .str()};
  return std::nullopt;
}

} // namespace attnc
