// The LSP messages between an editor and MLIR's language server, filtered so
// that no document the parser would crash on reaches it (codegen/
// SourceGuards.h: brackets nested past the limit, dense arrays of index).
// MlirLspServerMain parses each document as it arrives and has no hook
// before that, hence a filter on its messages rather than a check in it.
#ifndef ATTNC_TOOLS_ATTNC_LSP_SERVER_HAZARDFILTER_H
#define ATTNC_TOOLS_ATTNC_LSP_SERVER_HAZARDFILTER_H

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <mutex>
#include <string>

namespace attnc {

class HazardFilter {
public:
  /// A message from the editor, to pass on to the server. Each document's
  /// text is kept here, and didOpen/didChange send the server the whole
  /// text (a change without a range), cut before the first hazard if it
  /// has one.
  llvm::json::Value fromClient(llvm::json::Value message);

  /// A message from the server, to pass on to the editor: a document with
  /// a hazard gets one diagnostic, at the hazard, instead of the server's
  /// (which are about the cut text).
  llvm::json::Value fromServer(llvm::json::Value message);

private:
  /// The document's text is now `text`, at `version`: its hazard is
  /// recorded, and the text the server may parse is returned.
  std::string update(llvm::StringRef uri, int64_t version, std::string text);

  llvm::StringMap<std::string> texts;
  /// Per document, the versions with a hazard and the diagnostic to show
  /// for each. (By version: the editor's next edits may have passed
  /// through before the server's diagnostics of an earlier one come back.)
  llvm::StringMap<std::map<int64_t, llvm::json::Value>> hazards;
  std::mutex mutex; // fromClient and fromServer run on their own threads
};

} // namespace attnc

#endif // ATTNC_TOOLS_ATTNC_LSP_SERVER_HAZARDFILTER_H
