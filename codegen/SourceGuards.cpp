// The checks of SourceGuards.h.
#include "codegen/SourceGuards.h"

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

} // namespace attnc
