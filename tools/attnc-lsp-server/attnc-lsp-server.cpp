// attnc-lsp-server: MLIR's language server (diagnostics, hover, go to
// definition, completion...) for specs in the attn dialect, with the dialects
// attnc and attnc-opt register. Editors start it and talk LSP over stdio
// (README.md, "Editor support").
//
// MLIR's server runs on a thread of its own behind two pipes; this thread
// passes the editor's messages through a HazardFilter (no text MLIR 22's
// parser would crash on reaches the server) and the server's back.
#include "codegen/Registration.h"
#include "tools/attnc-lsp-server/HazardFilter.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-lsp-server/MlirLspServerMain.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/LSP/Transport.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace llvm;

namespace {

/// Writes `message` to `fd` as one LSP message (Content-Length framing),
/// pretty-printed with `pretty` (as -lit-test asks). False on a write error.
bool writeMessage(int fd, const json::Value &message, bool pretty) {
  std::string body =
      pretty ? formatv("{0:2}", message).str() : formatv("{0}", message).str();
  std::string framed =
      formatv("Content-Length: {0}\r\n\r\n{1}", body.size(), body).str();
  for (size_t done = 0; done < framed.size();) {
    ssize_t n = ::write(fd, framed.data() + done, framed.size() - done);
    if (n <= 0)
      return false;
    done += size_t(n);
  }
  return true;
}

/// Reads messages from `in` (in `style`) until its end, and writes each,
/// through `filter`, to `outFd`; closes `outFd` at the end (the reader then
/// sees the end of its input).
template <typename Filter>
void relay(std::FILE *in, lsp::JSONStreamStyle style, int outFd, bool pretty,
           Filter filter) {
  lsp::JSONTransportInputOverFile input(in, style);
  std::string text;
  while (!input.isEndOfInput() && !input.hasError()) {
    if (failed(input.readMessage(text)))
      continue;
    Expected<json::Value> message = json::parse(text);
    if (!message) {
      consumeError(message.takeError());
      continue; // (the server would only log it)
    }
    if (!writeMessage(outFd, filter(std::move(*message)), pretty))
      break;
  }
  ::close(outFd);
}

} // namespace

int main(int argc, char **argv) {
  for (int a = 1; a < argc; ++a)
    if (StringRef(argv[a]).ltrim('-').starts_with("help") ||
        StringRef(argv[a]).ltrim('-') == "version") {
      mlir::DialectRegistry registry;
      return mlir::failed(mlir::MlirLspServerMain(argc, argv, registry));
    }
  // The editor's messages come in the style MLIR's options ask for; the
  // server gets them in the standard one.
  bool delimited = false, pretty = false;
  std::vector<char *> serverArgs = {argv[0]};
  static char standard[] = "--input-style=standard", prettyFlag[] = "--pretty",
              verbose[] = "--log=verbose";
  for (int a = 1; a < argc; ++a) {
    StringRef arg = StringRef(argv[a]).ltrim('-');
    if (arg == "lit-test") {
      delimited = pretty = true;
      serverArgs.insert(serverArgs.end(), {prettyFlag, verbose});
    } else if (arg.consume_front("input-style=")) {
      delimited = arg == "delimited";
    } else {
      pretty |= arg == "pretty";
      serverArgs.push_back(argv[a]);
    }
  }
  serverArgs.push_back(standard);
  serverArgs.push_back(nullptr);

  // fd 0 and 1 become the server's ends of two pipes.
  int toServer[2], fromServer[2];
  if (::pipe(toServer) || ::pipe(fromServer)) {
    std::perror("attnc-lsp-server: pipe");
    return 1;
  }
  int editorIn = ::dup(0), editorOut = ::dup(1);
  if (editorIn < 0 || editorOut < 0 || ::dup2(toServer[0], 0) < 0 ||
      ::dup2(fromServer[1], 1) < 0) {
    std::perror("attnc-lsp-server: dup");
    return 1;
  }
  ::close(toServer[0]);
  ::close(fromServer[1]);

  attnc::HazardFilter filter;
  int status = 0;
  std::thread server([&] {
    mlir::DialectRegistry registry;
    attnc::registerAttncDialects(registry);
    status = mlir::failed(mlir::MlirLspServerMain(int(serverArgs.size() - 1),
                                                  serverArgs.data(), registry));
    std::fflush(stdout);
    outs().flush();
    ::close(1); // the relay below then sees the end of the server's output
  });
  std::thread toServerRelay([&] {
    relay(::fdopen(editorIn, "r"),
          delimited ? lsp::JSONStreamStyle::Delimited
                    : lsp::JSONStreamStyle::Standard,
          toServer[1], /*pretty=*/false,
          [&](json::Value m) { return filter.fromClient(std::move(m)); });
  });
  relay(::fdopen(fromServer[0], "r"), lsp::JSONStreamStyle::Standard, editorOut,
        pretty, [&](json::Value m) { return filter.fromServer(std::move(m)); });
  server.join();
  // The server has stopped (an exit notification, or the end of the
  // editor's input): the editor's relay may still wait on its input.
  toServerRelay.detach();
  std::_Exit(status);
}
