// One end of a mutual-TLS 1.3 byte stream over memory buffers (our own BIOs), without sockets
// or actors: the TLS bulk sessions (net/bulk_tls.cpp) feed it what the socket read and hand
// the socket what it produced, for the handshake, the hello and the ack; the frames after them
// are sealed records keyed by its exporter (net/bulk_seal.hpp). Both ends present a
// certificate signed by the node's CA and check the peer's against it, as CAF's openssl module
// does on the control connections.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/options.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

// The certificate, key and CA of a node, loaded once (an SSL_CTX).
class TlsEndpoint {
public:
  enum class Role { server, client };
  // invalid_argument naming the flag for an unreadable file or a key that does not match.
  static Expected<std::shared_ptr<TlsEndpoint>> create(const NetworkConfig& network, Role role);
  ~TlsEndpoint();
  TlsEndpoint(const TlsEndpoint&) = delete;
  TlsEndpoint& operator=(const TlsEndpoint&) = delete;

  Role role() const { return role_; }
  void* native() const { return ctx_; } // SSL_CTX*

private:
  TlsEndpoint(void* ctx, Role role) : ctx_(ctx), role_(role) {}
  void* ctx_;
  Role role_;
};

namespace detail {
// Ciphertext receive()d and not yet read by OpenSSL (TlsStream's input BIO reads it).
struct TlsInput {
  std::deque<std::vector<char>> chunks;
  std::size_t offset = 0; // bytes of chunks.front() already read
  std::size_t size = 0;   // unread bytes in all chunks
};
} // namespace detail

class TlsStream {
public:
  // A client starts its handshake at once: take_output() then holds its first record.
  explicit TlsStream(std::shared_ptr<TlsEndpoint> endpoint);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // Ciphertext the peer sent. An error when the handshake failed (e.g. a certificate the CA did
  // not sign, or a peer that does not speak TLS) or a record is corrupt; the message says which.
  // The stream keeps `ciphertext` until read() has decrypted it (OpenSSL reads its records
  // straight from it: no copy into a memory BIO), then drops it.
  Status receive(std::vector<char>&& ciphertext);
  Status receive(const char* data, std::size_t size); // copies, then as above
  // Decrypts up to `max` bytes of plaintext into `dst`; returns how many (0: nothing more yet).
  // An error as for receive(), or when the peer closed the TLS session.
  Expected<std::size_t> read(char* dst, std::size_t max);
  // Plaintext for the peer: encrypted at once, or held until the handshake is done.
  Status send(const char* data, std::size_t size);
  // Appends the ciphertext to write to the socket (handshake and data records) to `out`.
  void take_output(std::vector<char>& out);
  bool has_output() const;
  bool established() const { return established_; }
  // `size` bytes of keying material for `label`, alike at both ends of the session and secret
  // to them (the TLS 1.3 exporter, RFC 8446 §7.5); the handshake must be done.
  // `context` (may be empty) tells apart keys of one label.
  Expected<std::vector<unsigned char>> export_key(const char* label, std::size_t size,
                                                  const unsigned char* context = nullptr,
                                                  std::size_t context_size = 0) const;

private:
  Status advance_handshake();
  Status fail(const std::string& what, int ssl_result);
  std::shared_ptr<TlsEndpoint> endpoint_;
  void* ssl_ = nullptr; // SSL*
  void* in_ = nullptr;  // BIO* (ciphertext from the peer: reads input_)
  void* out_ = nullptr; // BIO* (ciphertext for the peer: appends to output_)
  detail::TlsInput input_;
  std::vector<char> output_; // ciphertext for the peer (the output BIO writes here)
  bool established_ = false;
  std::vector<char> pending_; // plaintext sent before the handshake ended
  Status failed_;
};

} // namespace conveyor::actors
