// A throwaway PKI for TLS tests, made with the `openssl` command: a CA with a node certificate
// signed by it, and a rogue CA with its own node certificate (which the first CA rejects).
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "test/support/child_process.hpp"

namespace conveyor::testing {

struct Pki {
  std::string dir; // holds ca.pem, ca-node.pem/.key, rogue.pem, rogue-node.pem/.key
  // Inline: test_log_dir() exists in the test binaries only (test/support/child_process.hpp).
  Pki() { // a doctest REQUIRE fails when openssl cannot make them
    static std::atomic<int> made{0};
    dir = test_log_dir() + "/pki-" + std::to_string(::getpid()) + "-" + std::to_string(made++);
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
    const std::string script =
      "set -e; rm -rf " + dir + "; mkdir -p " + dir + "; cd " + dir + ";" +
      "for ca in ca rogue; do "
      "openssl req -x509" +
      key +
      "-keyout $ca.key -out $ca.pem -days 1 -subj /CN=$ca >/dev/null 2>&1;"
      "openssl req" +
      key +
      "-keyout $ca-node.key -out $ca-node.csr -subj /CN=localhost >/dev/null 2>&1;"
      "openssl x509 -req -in $ca-node.csr -CA $ca.pem -CAkey $ca.key -CAcreateserial -out "
      "$ca-node.pem "
      "-days 1 >/dev/null 2>&1; done";
    REQUIRE_MESSAGE(std::system(script.c_str()) == 0,
                    "openssl could not make the test certificates");
  }
  std::string cert(const std::string& ca = "ca") const { return dir + "/" + ca + "-node.pem"; }
  std::string key(const std::string& ca = "ca") const { return dir + "/" + ca + "-node.key"; }
  std::string ca_file(const std::string& ca = "ca") const { return dir + "/" + ca + ".pem"; }
  // --tls-cert/--tls-key/--tls-ca for a node with the certificate of `ca`.
  std::vector<std::string> flags(const std::string& ca = "ca") const {
    return {"--tls-cert", cert(ca), "--tls-key", key(ca), "--tls-ca", ca_file(ca)};
  }
};

} // namespace conveyor::testing
