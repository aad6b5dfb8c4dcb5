// The nesting bound of SourceNesting.h.
#include "codegen/SourceNesting.h"

namespace attnc {

const char *findExcessNesting(llvm::StringRef source, unsigned limit) {
  unsigned depth = 0;
  const char *p = source.begin(), *end = source.end();
  while (p != end) {
    char c = *p;
    if (c == '/' && p + 1 != end && p[1] == '/') { // a comment
      while (p != end && *p != '\n')
        ++p;
      continue;
    }
    if (c == '"') { // a string literal, with its escapes
      for (++p; p != end && *p != '"'; ++p)
        if (*p == '\\' && p + 1 != end)
          ++p;
      if (p != end)
        ++p;
      continue;
    }
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
