# Run as `cmake -DDOC=<file.md> -P DocsContents.cmake` after mlir-tblgen's
# -gen-dialect-doc: its `[TOC]` is a marker of MLIR's website generator
# (Hugo) that other markdown viewers (GitHub's, editors') show as the text
# "[TOC]". It becomes a plain list of the operations and attributes the
# document describes, in its order. Idempotent.
file(READ "${DOC}" text)
string(FIND "${text}" "[TOC]" at)
if(at EQUAL -1)
  return()
endif()
string(REGEX MATCHALL "\n### `[^`]+`" headings "${text}")
set(names "")
foreach(heading IN LISTS headings)
  string(REGEX REPLACE "\n### `([^`]+)`" "\\1" name "${heading}")
  list(APPEND names "`${name}`")
endforeach()
list(JOIN names ", " joined)
string(REPLACE "[TOC]" "Contents: ${joined}." text "${text}")
file(WRITE "${DOC}" "${text}")
