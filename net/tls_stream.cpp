// TLS over memory buffers (net/tls_stream.hpp).
#include "net/tls_stream.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstring>
#include <utility>

namespace conveyor::actors {

namespace {

std::string ssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += out.empty() ? buf : std::string{"; "} + buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

SSL* ssl_of(void* p) { return static_cast<SSL*>(p); }

// The output BIO: OpenSSL's records go straight into a std::vector<char> (BIO data), which
// take_output() then swaps into the socket's write buffer: no memory-BIO copy, no zero-fill.
int out_write(BIO* b, const char* data, size_t size, size_t* written) {
  auto* sink = static_cast<std::vector<char>*>(BIO_get_data(b));
  sink->insert(sink->end(), data, data + size);
  *written = size;
  return 1;
}

long out_ctrl(BIO* b, int cmd, long, void*) {
  switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;
    case BIO_CTRL_WPENDING:
    case BIO_CTRL_PENDING:
      return static_cast<long>(static_cast<std::vector<char>*>(BIO_get_data(b))->size());
    default: return 0;
  }
}

int out_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

const BIO_METHOD* out_method() {
  static BIO_METHOD* m = [] {
    BIO_METHOD* method =
      BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "conveyor tls out");
    BIO_meth_set_write_ex(method, out_write);
    BIO_meth_set_ctrl(method, out_ctrl);
    BIO_meth_set_create(method, out_create);
    return method;
  }();
  return m;
}

// The input BIO: OpenSSL reads the peer's records from the buffers receive() took, in order;
// each buffer is dropped once read. Empty means "nothing yet" (retry), never EOF.
int in_read(BIO* b, char* dst, size_t size, size_t* read) {
  auto* in = static_cast<detail::TlsInput*>(BIO_get_data(b));
  BIO_clear_retry_flags(b);
  std::size_t done = 0;
  while (done < size && !in->chunks.empty()) {
    auto& front = in->chunks.front();
    const std::size_t n = std::min(size - done, front.size() - in->offset);
    std::memcpy(dst + done, front.data() + in->offset, n);
    done += n;
    in->offset += n;
    in->size -= n;
    if (in->offset == front.size()) {
      in->chunks.pop_front(); // (handshake records: small, not worth pooling)
      in->offset = 0;
    }
  }
  *read = done;
  if (done == 0) {
    BIO_set_retry_read(b);
    return 0;
  }
  return 1;
}

long in_ctrl(BIO* b, int cmd, long, void*) {
  switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;
    case BIO_CTRL_PENDING:
      return static_cast<long>(static_cast<detail::TlsInput*>(BIO_get_data(b))->size);
    default: return 0;
  }
}

const BIO_METHOD* in_method() {
  static BIO_METHOD* m = [] {
    BIO_METHOD* method =
      BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "conveyor tls in");
    BIO_meth_set_read_ex(method, in_read);
    BIO_meth_set_ctrl(method, in_ctrl);
    BIO_meth_set_create(method, out_create);
    return method;
  }();
  return m;
}

} // namespace

// --- TlsEndpoint

Expected<std::shared_ptr<TlsEndpoint>> TlsEndpoint::create(const NetworkConfig& n, Role role) {
  if (n.tls_cert.empty() || n.tls_key.empty() || n.tls_ca.empty())
    return invalid_argument(
      "TLS needs all three of `--tls-cert`, `--tls-key` and `--tls-ca`; got " +
      std::string{n.tls_cert.empty() ? "no" : "a"} + " certificate, " +
      (n.tls_key.empty() ? "no" : "a") + " key and " + (n.tls_ca.empty() ? "no" : "a") +
      " CA file");
  std::unique_ptr<SSL_CTX, void (*)(SSL_CTX*)> ctx(
    SSL_CTX_new(role == Role::server ? TLS_server_method() : TLS_client_method()), SSL_CTX_free);
  if (!ctx)
    return internal_error("cannot create an OpenSSL context: " + ssl_errors());
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), n.tls_cert.c_str()) != 1)
    return invalid_argument("`--tls-cert` " + n.tls_cert +
                            " is not a readable PEM certificate: " + ssl_errors());
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), n.tls_key.c_str(), SSL_FILETYPE_PEM) != 1)
    return invalid_argument(
      "`--tls-key` " + n.tls_key +
      " is not a readable PEM private key or does not match `--tls-cert`: " + ssl_errors());
  if (SSL_CTX_check_private_key(ctx.get()) != 1)
    return invalid_argument("`--tls-key` " + n.tls_key + " does not match `--tls-cert` " +
                            n.tls_cert);
  if (SSL_CTX_load_verify_locations(ctx.get(), n.tls_ca.c_str(), nullptr) != 1)
    return invalid_argument("`--tls-ca` " + n.tls_ca +
                            " is not a readable PEM CA certificate: " + ssl_errors());
  // Mutual: each side presents its certificate and requires the peer's, signed by the CA.
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  // TLS 1.3 only: both ends are conveyor nodes, and the bulk path's sealed records take their
  // keys from its exporter (net/bulk_seal.hpp). No session tickets: nothing resumes a bulk
  // session, and after the ack a worker sends only sealed records (a ticket would be a TLS
  // record where the consumer expects none).
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_3_VERSION);
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  return std::shared_ptr<TlsEndpoint>(new TlsEndpoint(ctx.release(), role));
}

TlsEndpoint::~TlsEndpoint() { SSL_CTX_free(static_cast<SSL_CTX*>(ctx_)); }

// --- TlsStream

TlsStream::TlsStream(std::shared_ptr<TlsEndpoint> endpoint) : endpoint_(std::move(endpoint)) {
  SSL* ssl = SSL_new(static_cast<SSL_CTX*>(endpoint_->native()));
  BIO* in = BIO_new(in_method());
  BIO* out = BIO_new(out_method());
  if (in != nullptr)
    BIO_set_data(in, &input_);
  if (out != nullptr)
    BIO_set_data(out, &output_);
  if (ssl == nullptr || in == nullptr || out == nullptr) {
    failed_ = internal_error("cannot create a TLS session: " + ssl_errors());
    SSL_free(ssl);
    BIO_free(in);
    BIO_free(out);
    return;
  }
  SSL_set_bio(ssl, in, out); // the session owns both BIOs now
  ssl_ = ssl;
  in_ = in;
  out_ = out;
  if (endpoint_->role() == TlsEndpoint::Role::server) {
    SSL_set_accept_state(ssl);
  } else {
    SSL_set_connect_state(ssl);
    failed_ = advance_handshake(); // the ClientHello
  }
}

TlsStream::~TlsStream() { SSL_free(ssl_of(ssl_)); }

Status TlsStream::fail(const std::string& what, int ssl_result) {
  const int err = SSL_get_error(ssl_of(ssl_), ssl_result);
  std::string why;
  if (err == SSL_ERROR_ZERO_RETURN)
    why = "the peer closed the TLS session";
  else if (err == SSL_ERROR_SSL || err == SSL_ERROR_SYSCALL) {
    why = ssl_errors();
    const long verify = SSL_get_verify_result(ssl_of(ssl_));
    if (verify != X509_V_OK)
      why += std::string{" (peer certificate: "} + X509_verify_cert_error_string(verify) + ")";
  } else
    why = "OpenSSL error " + std::to_string(err);
  failed_ = Status{ErrorCode::permission_denied, what + ": " + why};
  if (err == SSL_ERROR_ZERO_RETURN)
    failed_ = Status{ErrorCode::unavailable, what + ": " + why};
  return failed_;
}

Status TlsStream::advance_handshake() {
  ERR_clear_error();
  const int r = SSL_do_handshake(ssl_of(ssl_));
  if (r == 1) {
    established_ = true;
    if (!pending_.empty()) {
      std::vector<char> held;
      held.swap(pending_);
      return send(held.data(), held.size());
    }
    return Status::OK();
  }
  const int err = SSL_get_error(ssl_of(ssl_), r);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
    return Status::OK();
  return fail("TLS handshake failed", r);
}

Status TlsStream::receive(std::vector<char>&& ciphertext) {
  if (!failed_.ok())
    return failed_;
  if (!ciphertext.empty()) {
    input_.size += ciphertext.size();
    input_.chunks.push_back(std::move(ciphertext));
  }
  return established_ ? Status::OK() : advance_handshake();
}

Status TlsStream::receive(const char* data, std::size_t size) {
  return receive(std::vector<char>(data, data + size));
}

Expected<std::size_t> TlsStream::read(char* dst, std::size_t max) {
  if (!failed_.ok())
    return failed_;
  if (!established_ || max == 0)
    return std::size_t{0};
  std::size_t total = 0;
  while (total < max) {
    ERR_clear_error();
    const int chunk = static_cast<int>(std::min<std::size_t>(max - total, 1u << 30));
    const int r = SSL_read(ssl_of(ssl_), dst + total, chunk);
    if (r > 0) {
      total += static_cast<std::size_t>(r);
      continue;
    }
    const int err = SSL_get_error(ssl_of(ssl_), r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
      break;
    if (total > 0)
      break; // report the error with the next call
    return fail("TLS stream", r);
  }
  return total;
}

Status TlsStream::send(const char* data, std::size_t size) {
  if (!failed_.ok())
    return failed_;
  if (!established_) {
    pending_.insert(pending_.end(), data, data + size);
    return Status::OK();
  }
  // Room for all the records at once (≤ 16 KiB of plaintext each, plus header, tag and padding
  // well under 64 bytes): no reallocation while OpenSSL writes them.
  output_.reserve(output_.size() + size + (size / 16384 + 1) * 64);
  std::size_t done = 0;
  while (done < size) {
    ERR_clear_error();
    const int chunk = static_cast<int>(std::min<std::size_t>(size - done, 1u << 30));
    const int r = SSL_write(ssl_of(ssl_), data + done, chunk);
    if (r <= 0)
      return fail("TLS stream", r); // a memory BIO never pushes back
    done += static_cast<std::size_t>(r);
  }
  return Status::OK();
}

Expected<std::vector<unsigned char>> TlsStream::export_key(const char* label, std::size_t size,
                                                           const unsigned char* context,
                                                           std::size_t context_size) const {
  if (!established_)
    return failed_precondition("TLS keying material asked for before the handshake was done");
  std::vector<unsigned char> out(size);
  ERR_clear_error();
  // (TLS 1.3 treats no context as an empty one: generation 0's key is not a special case.)
  if (SSL_export_keying_material(ssl_of(ssl_), out.data(), out.size(), label, std::strlen(label),
                                 context, context_size, 1) != 1)
    return internal_error(std::string{"cannot derive the TLS session's keying material for "} +
                          label + ": " + ssl_errors());
  return out;
}

bool TlsStream::has_output() const { return !output_.empty(); }

void TlsStream::take_output(std::vector<char>& out) {
  if (output_.empty())
    return;
  if (out.empty())
    out.swap(
      output_); // the socket's (empty) write buffer takes the records; ours keeps its capacity
  else
    out.insert(out.end(), output_.begin(), output_.end());
  output_.clear();
}

} // namespace conveyor::actors
