// validate_security (conveyor/options.hpp): the TLS files are checked with OpenSSL before the
// actor system starts, so that a bad file is a clear start-up error naming the flag instead of
// an exception inside CAF's multiplexer at the first connection.
#include "net/tls_stream.hpp"
#include "conveyor/options.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <memory>

namespace conveyor {

namespace {

template <class T, void (*Free)(T*)>
struct Freer {
  void operator()(T* p) const { Free(p); }
};
using BioPtr = std::unique_ptr<BIO, Freer<BIO, BIO_free_all>>;
using X509Ptr = std::unique_ptr<X509, Freer<X509, X509_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Freer<X509_STORE, X509_STORE_free>>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, Freer<X509_STORE_CTX, X509_STORE_CTX_free>>;

void free_chain(STACK_OF(X509) * chain) { sk_X509_pop_free(chain, X509_free); }
using ChainPtr = std::unique_ptr<STACK_OF(X509), Freer<STACK_OF(X509), free_chain>>;

// The node's own certificate must verify against the CA file the way its peers verify it (mutual
// TLS: every peer loads the same --tls-ca). One signed by another CA loads fine and matches its
// key, and then every connection fails in the handshake on both sides; refused here instead.
// The certificate file may carry intermediates after the node's certificate
// (SSL_CTX_use_certificate_chain_file sends them): they are offered as untrusted, as in a handshake.
Status verify_against_ca(const NetworkConfig& n) {
  ERR_clear_error();
  BioPtr bio{BIO_new_file(n.tls_cert.c_str(), "r")};
  if (!bio)
    return invalid_argument("`--tls-cert` " + n.tls_cert + " cannot be read");
  X509Ptr leaf{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)};
  if (!leaf)
    return invalid_argument("`--tls-cert` " + n.tls_cert + " is not a readable PEM certificate");
  ChainPtr intermediates{sk_X509_new_null()};
  if (!intermediates)
    return internal_error("cannot allocate an OpenSSL certificate stack");
  while (X509* extra = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr))
    if (!sk_X509_push(intermediates.get(), extra)) {
      X509_free(extra);
      return internal_error("cannot allocate an OpenSSL certificate stack");
    }
  ERR_clear_error(); // the loop ends on "no start line": not an error

  StorePtr store{X509_STORE_new()};
  StoreCtxPtr ctx{X509_STORE_CTX_new()};
  if (!store || !ctx)
    return internal_error("cannot allocate an OpenSSL certificate store");
  if (X509_STORE_load_locations(store.get(), n.tls_ca.c_str(), nullptr) != 1) {
    ERR_clear_error();
    return invalid_argument("`--tls-ca` " + n.tls_ca + " is not a readable PEM CA certificate");
  }
  if (X509_STORE_CTX_init(ctx.get(), store.get(), leaf.get(), intermediates.get()) != 1) {
    ERR_clear_error();
    return internal_error("cannot set up an OpenSSL certificate verification");
  }
  const int ok = X509_verify_cert(ctx.get());
  const int err = X509_STORE_CTX_get_error(ctx.get());
  ERR_clear_error();
  if (ok == 1)
    return Status::OK();
  return invalid_argument("`--tls-cert` " + n.tls_cert + " does not verify against `--tls-ca` " +
                          n.tls_ca + " (" + X509_verify_cert_error_string(err) +
                          "): peers check this node's certificate against the same CA, so every "
                          "connection would fail; give a certificate signed by that CA, or the "
                          "CA that signed it");
}

} // namespace

Status validate_security(const NetworkConfig& n) {
  if (!n.tls())
    return Status::OK();
  // The same loading the TLS bulk path does (net/tls_stream.cpp), result discarded.
  auto endpoint = actors::TlsEndpoint::create(n, actors::TlsEndpoint::Role::server);
  if (!endpoint.ok())
    return endpoint.status();
  return verify_against_ca(n);
}

} // namespace conveyor
