#include "tools/attnc-lsp-server/HazardFilter.h"

#include "codegen/SourceGuards.h"

#include "llvm/Support/LSP/Protocol.h"

#include <vector>

using namespace llvm;

namespace attnc {

namespace {

/// The LSP position of byte `offset` of `text` (a character is a byte: the
/// specs' syntax is ASCII).
json::Object positionOf(StringRef text, size_t offset) {
  StringRef before = text.take_front(offset);
  size_t lineStart = before.rfind('\n');
  int64_t character = lineStart == StringRef::npos
                          ? int64_t(offset)
                          : int64_t(offset - lineStart - 1);
  return json::Object{{"line", int64_t(before.count('\n'))},
                      {"character", character}};
}

/// A notification's method and params, or nullopt for another message.
std::optional<std::pair<StringRef, json::Object *>>
notificationOf(json::Value &message) {
  json::Object *object = message.getAsObject();
  json::Object *params = object ? object->getObject("params") : nullptr;
  std::optional<StringRef> method =
      object ? object->getString("method") : std::nullopt;
  if (!params || !method)
    return std::nullopt;
  return std::make_pair(*method, params);
}

/// params.textDocument, and its uri.
std::pair<json::Object *, std::optional<StringRef>>
documentOf(json::Object &params) {
  json::Object *document = params.getObject("textDocument");
  return {document, document ? document->getString("uri") : std::nullopt};
}

} // namespace

std::string HazardFilter::update(StringRef uri, int64_t version,
                                 std::string text) {
  texts[uri] = text;
  std::optional<SourceHazard> hazard = findSourceHazard(text);
  if (!hazard)
    return text;
  size_t offset = size_t(hazard->at - text.data());
  json::Object start = positionOf(text, offset),
               end = positionOf(text, offset + 1);
  hazards[uri].insert_or_assign(
      version, json::Object{{"range", json::Object{{"start", std::move(start)},
                                                   {"end", std::move(end)}}},
                            {"severity", 1},
                            {"source", "attnc"},
                            {"message", hazard->message}});
  text.resize(offset);
  return text;
}

json::Value HazardFilter::fromClient(json::Value message) {
  auto notification = notificationOf(message);
  if (!notification)
    return message;
  auto [method, params] = *notification;
  auto [document, uri] = documentOf(*params);
  std::lock_guard<std::mutex> lock(mutex);
  if (method == "textDocument/didOpen") {
    std::optional<StringRef> text =
        document ? document->getString("text") : std::nullopt;
    if (uri && text)
      (*document)["text"] = update(
          *uri, document->getInteger("version").value_or(0), text->str());
  } else if (method == "textDocument/didChange") {
    // (The URI as a string: lsp::URIForFile knows only the schemes the
    // server registers, file and MLIR's test scheme.)
    json::Array *changes = params->getArray("contentChanges");
    auto known = uri ? texts.find(*uri) : texts.end();
    if (!changes || known == texts.end())
      return message;
    std::vector<lsp::TextDocumentContentChangeEvent> events(changes->size());
    json::Path::Root root;
    for (size_t c = 0; c < changes->size(); ++c)
      if (!lsp::fromJSON((*changes)[c], events[c], root))
        return message;
    std::string text = known->second;
    if (failed(lsp::TextDocumentContentChangeEvent::applyTo(events, text))) {
      texts.erase(*uri);
      hazards.erase(*uri);
      return message;
    }
    // The whole text, so that the server's copy is the one sent.
    (*params)["contentChanges"] = json::Array{json::Object{
        {"text", update(*uri, document->getInteger("version").value_or(0),
                        std::move(text))}}};
  } else if (method == "textDocument/didClose" && uri) {
    texts.erase(*uri);
    hazards.erase(*uri);
  }
  return message;
}

json::Value HazardFilter::fromServer(json::Value message) {
  auto notification = notificationOf(message);
  if (!notification || notification->first != "textDocument/publishDiagnostics")
    return message;
  json::Object *params = notification->second;
  std::optional<StringRef> uri = params->getString("uri");
  std::lock_guard<std::mutex> lock(mutex);
  auto document = uri ? hazards.find(*uri) : hazards.end();
  if (document == hazards.end() || document->second.empty())
    return message;
  // The diagnostics of `version` (the latest without one); the versions
  // before it are done with.
  std::map<int64_t, json::Value> &versions = document->second;
  std::optional<int64_t> version = params->getInteger("version");
  auto hazard = version ? versions.find(*version) : std::prev(versions.end());
  if (hazard != versions.end())
    (*params)["diagnostics"] = json::Array{hazard->second};
  if (version)
    versions.erase(versions.begin(), versions.lower_bound(*version));
  return message;
}

} // namespace attnc
