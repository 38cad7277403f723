// Sealed records: how the TLS bulk path carries frames once its mutual-TLS handshake is done
// (CAF-free; the sessions of net/bulk_tls.hpp use it).
//
// Why not TLS records: OpenSSL's record layer copies every byte twice beside its cipher pass
// (plaintext into its write buffer, ciphertext out of its read buffer), and our memory BIOs
// twice more; at 1 MiB elements those copies cost as much as the encryption. A sealed record
// is encrypted from the frame's pieces (large tensors in place) straight into the buffer the
// socket writes, and decrypted in place in the buffer the socket read into, which becomes the
// elements' storage: no copy on either side.
//
// The construction (as QUIC and kTLS use a TLS session's keys for their own records):
//   - key and IV: 44 bytes of the session's exporter (RFC 8446 §7.5, label kSealLabel), which
//     both ends derive alike and nobody else can: the session is mutual TLS 1.3, fresh per
//     connection, so no two connections share a key;
//   - AES-256-GCM, one direction only (worker -> consumer: a consumer sends nothing after its
//     hello), nonce = IV xor the record's sequence number (0, 1, 2, ...), as TLS 1.3 does;
//   - the 5-byte header is the associated data, so a changed length, a dropped, repeated or
//     reordered record fails authentication: the consumer closes the channel and fails its
//     frames, as for any broken bulk connection;
//   - a new key and IV every kRekeyBytes of plaintext (the exporter again, with the key's
//     generation as its context), as TLS 1.3 bounds what one AES-GCM key protects (RFC 8446
//     §5.5: about 2^34.5 blocks); both ends count the same bytes, so they change keys at the same
//     record, and no message is needed. A bulk connection may carry terabytes.
//
// On the wire a connection carries TLS records until the worker's ack (handshake, the
// consumer's hello, the ack; both ends read them through TlsStream), then sealed records only:
//   sealed record: 0xC5 | plaintext length u32 (little-endian) | ciphertext | 16-byte tag
// The first byte tells the two apart (TLS content types are 20..24), so the consumer's broker
// reads every record whole, into a buffer of its exact size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/tensor/gather_buffer.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor::actors {

class TlsStream;

namespace bulk {

inline constexpr std::size_t kRecordHeaderBytes = 5; // TLS's record header and ours alike
inline constexpr uint8_t kSealedRecordType = 0xC5;
inline constexpr std::size_t kSealTagBytes = 16;
// TLS records of the handshake and the ack: at most 2^14 bytes plus the cipher's expansion.
inline constexpr std::size_t kMaxTlsRecordBody = 16384 + 2048;
inline constexpr const char* kSealLabel = "EXPORTER-conveyor-bulk-sealed-v1";
inline constexpr uint64_t kRekeyBytes = uint64_t{1} << 36; // 64 GiB: well inside RFC 8446's bound

// A sealed record of `plain` bytes of frame, header and tag included.
inline constexpr std::size_t sealed_size(std::size_t plain) {
  return kRecordHeaderBytes + plain + kSealTagBytes;
}

struct RecordHeader {
  bool sealed = false;  // ours (else a TLS record)
  std::size_t body = 0; // bytes after the header (sealed: ciphertext and tag)
};
// Parses the 5 bytes at `at`; the error names what is wrong (nullopt = ok). A sealed record
// longer than a frame may be (kMaxFrameBytes) or a TLS record longer than TLS allows is an
// error: the reader never reserves a buffer for it.
std::optional<std::string> read_record_header(const char* at, RecordHeader& h);

} // namespace bulk

// One direction's sealing key of an established TlsStream (see above).
class RecordCipher {
public:
  // The keys of `tls`, which must have completed its handshake and must outlive the cipher (the
  // next generation of keys comes from it). Tests pass a small `rekey_bytes`.
  static Expected<std::unique_ptr<RecordCipher>> create(const TlsStream& tls,
                                                        uint64_t rekey_bytes = bulk::kRekeyBytes);
  ~RecordCipher();
  RecordCipher(const RecordCipher&) = delete;
  RecordCipher& operator=(const RecordCipher&) = delete;

  // Writes the next record, of bytes [from, to) of `frame`, at `dst`, which has room for
  // bulk::sealed_size(to - from) bytes; returns that size, or an error when the next key could
  // not be derived.
  Expected<std::size_t> seal(const GatherBuffer& frame, std::size_t from, std::size_t to,
                             char* dst);
  // The next record's body (ciphertext and tag, as its header announced) decrypted in place;
  // `body` keeps the plaintext. data_loss when it fails authentication.
  Status open(std::vector<char>& body);

private:
  RecordCipher(const TlsStream& tls, uint64_t rekey_bytes) : tls_(tls), rekey_bytes_(rekey_bytes) {}
  Status derive_keys(); // generation_'s key and IV
  // The nonce of the next record of `plain` bytes; a new key first when the bytes sealed under
  // this one reached rekey_bytes_.
  Status next_nonce(std::size_t plain, unsigned char nonce[12]);
  const TlsStream& tls_;
  const uint64_t rekey_bytes_;
  void* ctx_ = nullptr; // EVP_CIPHER_CTX*
  unsigned char key_[32] = {};
  unsigned char iv_[12] = {};
  uint64_t seq_ = 0;        // records so far, under every key (nonces never repeat)
  uint64_t generation_ = 0; // of the key
  uint64_t key_bytes_ = 0;  // plaintext bytes under this key
};

} // namespace conveyor::actors
