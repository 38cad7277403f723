// test/support/http_test_server.py as a child process: a file server on 127.0.0.1 (a port the OS
// picks, read back from its `listening on` line) with byte ranges and injected faults. Stopped
// and reaped when it goes away.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "test/support/child_process.hpp"

namespace conveyor::testing {

#if defined(CONVEYOR_SOURCE_DIR) && defined(CONVEYOR_BINARY_DIR)
class HttpTestServer {
public:
  // `root`: the directory served; `flags`: --fault PATH:KIND:COUNT, --require-header, --no-ranges.
  // ok() is false (and error() says why) when it did not start.
  explicit HttpTestServer(const std::string& root, std::vector<std::string> flags = {}) {
    std::vector<std::string> argv{
      "/usr/bin/python3", CONVEYOR_SOURCE_DIR "/test/support/http_test_server.py", "--root", root};
    argv.insert(argv.end(), flags.begin(), flags.end());
    tls_ = std::find(flags.begin(), flags.end(), "--tls-cert") != flags.end();
    auto child = ChildProcess::spawn(std::move(argv), "http-server", test_log_dir());
    if (!child.ok()) {
      error_ = child.status().to_string();
      return;
    }
    process_ = std::move(*child);
    auto port = process_->wait_listening(Millis{20000});
    if (!port.ok()) {
      error_ = port.status().to_string() + "\n" + process_->describe();
      return;
    }
    port_ = *port;
  }
  bool ok() const { return port_ != 0; }
  const std::string& error() const { return error_; }
  // "http://127.0.0.1:PORT" + path (path starts with '/'); with --tls-cert in the flags
  // "https://localhost:PORT" + path, the name the test certificates carry.
  std::string url(const std::string& path = "") const {
    return (tls_ ? "https://localhost:" : "http://127.0.0.1:") + std::to_string(port_) + path;
  }
  uint16_t port() const { return port_; }

private:
  std::unique_ptr<ChildProcess> process_;
  uint16_t port_ = 0;
  bool tls_ = false;
  std::string error_;
};
#endif

} // namespace conveyor::testing
