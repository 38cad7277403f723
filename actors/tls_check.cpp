// validate_security (conveyor/options.hpp): the TLS files are checked with OpenSSL before the
// actor system starts, so that a bad file is a clear start-up error naming the flag instead of
// an exception inside CAF's multiplexer at the first connection.
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <memory>

#include "conveyor/options.hpp"

namespace conveyor {

namespace {

std::string ssl_error() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += out.empty() ? buf : std::string{"; "} + buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

} // namespace

Status validate_security(const NetworkConfig& n) {
  if (!n.tls())
    return Status::OK();
  if (n.tls_cert.empty() || n.tls_key.empty() || n.tls_ca.empty())
    return invalid_argument("TLS needs all three of `--tls-cert`, `--tls-key` and `--tls-ca`; got " +
                            std::string{n.tls_cert.empty() ? "no" : "a"} + " certificate, " +
                            (n.tls_key.empty() ? "no" : "a") + " key and " +
                            (n.tls_ca.empty() ? "no" : "a") + " CA file");
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(SSL_CTX_new(TLS_method()), SSL_CTX_free);
  if (!ctx)
    return internal_error("cannot create an OpenSSL context: " + ssl_error());
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), n.tls_cert.c_str()) != 1)
    return invalid_argument("`--tls-cert` " + n.tls_cert + " is not a readable PEM certificate: " +
                            ssl_error());
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), n.tls_key.c_str(), SSL_FILETYPE_PEM) != 1)
    return invalid_argument("`--tls-key` " + n.tls_key +
                            " is not a readable PEM private key or does not match `--tls-cert`: " +
                            ssl_error());
  if (SSL_CTX_check_private_key(ctx.get()) != 1)
    return invalid_argument("`--tls-key` " + n.tls_key + " does not match `--tls-cert` " +
                            n.tls_cert);
  if (SSL_CTX_load_verify_locations(ctx.get(), n.tls_ca.c_str(), nullptr) != 1)
    return invalid_argument("`--tls-ca` " + n.tls_ca + " is not a readable PEM CA certificate: " +
                            ssl_error());
  return Status::OK();
}

} // namespace conveyor
