// Sealed records of the TLS bulk path (net/bulk_seal.hpp).
#include "net/bulk_seal.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cstring>

#include "net/bulk_frame.hpp"
#include "net/tls_stream.hpp"

namespace conveyor::actors {

namespace bulk {

std::optional<std::string> read_record_header(const char* at, RecordHeader& h) {
  const auto type = static_cast<uint8_t>(at[0]);
  if (type == kSealedRecordType) {
    const uint64_t plain = detail::get(at + 1, 4);
    if (plain == 0 || plain > kMaxFrameBytes)
      return "a sealed record claiming " + std::to_string(plain) + " bytes (allowed: 1.." +
             std::to_string(kMaxFrameBytes) + ")";
    h.sealed = true;
    h.body = static_cast<std::size_t>(plain) + kSealTagBytes;
    return std::nullopt;
  }
  // A TLS record: content type 20..24, protocol version 3.x, length big-endian.
  if (type < 20 || type > 24 || static_cast<uint8_t>(at[1]) != 3)
    return "bytes that are neither a TLS record nor a sealed record (first byte " +
           std::to_string(type) + ")";
  const std::size_t length =
    (std::size_t{static_cast<uint8_t>(at[3])} << 8) | static_cast<uint8_t>(at[4]);
  if (length == 0 || length > kMaxTlsRecordBody)
    return "a TLS record of " + std::to_string(length) + " bytes (allowed: 1.." +
           std::to_string(kMaxTlsRecordBody) + ")";
  h.sealed = false;
  h.body = length;
  return std::nullopt;
}

} // namespace bulk

namespace {

EVP_CIPHER_CTX* ctx_of(void* p) { return static_cast<EVP_CIPHER_CTX*>(p); }

void write_header(unsigned char* at, std::size_t plain) {
  at[0] = bulk::kSealedRecordType;
  bulk::detail::put(reinterpret_cast<char*>(at) + 1, plain, 4);
}

// EVP takes int lengths: a record of up to kMaxFrameBytes goes in slices.
constexpr std::size_t kSlice = std::size_t{1} << 30;

} // namespace

Expected<std::unique_ptr<RecordCipher>> RecordCipher::create(const TlsStream& tls,
                                                             uint64_t rekey_bytes) {
  std::unique_ptr<RecordCipher> c(new RecordCipher(tls, rekey_bytes));
  if (auto keys = c->derive_keys(); !keys.ok())
    return keys;
  c->ctx_ = EVP_CIPHER_CTX_new();
  if (c->ctx_ == nullptr)
    return internal_error("cannot create the bulk path's cipher context");
  return c;
}

Status RecordCipher::derive_keys() {
  unsigned char context[8];
  for (int i = 0; i < 8; ++i)
    context[i] = static_cast<unsigned char>((generation_ >> (8 * i)) & 0xff);
  auto material =
    tls_.export_key(bulk::kSealLabel, sizeof key_ + sizeof iv_, context, sizeof context);
  if (!material.ok())
    return material.status();
  std::memcpy(key_, material->data(), sizeof key_);
  std::memcpy(iv_, material->data() + sizeof key_, sizeof iv_);
  OPENSSL_cleanse(material->data(), material->size());
  return Status::OK();
}

RecordCipher::~RecordCipher() {
  EVP_CIPHER_CTX_free(ctx_of(ctx_));
  OPENSSL_cleanse(key_, sizeof key_);
  OPENSSL_cleanse(iv_, sizeof iv_);
}

Status RecordCipher::next_nonce(std::size_t plain, unsigned char nonce[12]) {
  if (key_bytes_ >= rekey_bytes_) {
    ++generation_;
    key_bytes_ = 0;
    if (auto keys = derive_keys(); !keys.ok())
      return keys;
  }
  key_bytes_ += plain;
  std::memcpy(nonce, iv_, sizeof iv_);
  for (int i = 0; i < 8; ++i)
    nonce[11 - i] ^= static_cast<unsigned char>((seq_ >> (8 * i)) & 0xff);
  ++seq_;
  return Status::OK();
}

Expected<std::size_t> RecordCipher::seal(const GatherBuffer& frame, std::size_t from,
                                         std::size_t to, char* dst) {
  auto* out = reinterpret_cast<unsigned char*>(dst);
  const std::size_t plain = to - from;
  write_header(out, plain);
  unsigned char nonce[12];
  if (auto ok = next_nonce(plain, nonce); !ok.ok())
    return ok;
  EVP_CIPHER_CTX* ctx = ctx_of(ctx_);
  // Every step checked: `dst` is a recycled buffer, and what it held before (another frame,
  // maybe plaintext) must never go out as if sealed.
  int n = 0;
  bool ok =
    EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key_, nonce) == 1 &&
    EVP_EncryptUpdate(ctx, nullptr, &n, out, static_cast<int>(bulk::kRecordHeaderBytes)) == 1;
  unsigned char* at = out + bulk::kRecordHeaderBytes;
  std::size_t left = plain;
  frame.for_each_piece_from(from, [&](const char* p, std::size_t size) {
    size = std::min(size, left);
    left -= size;
    for (std::size_t done = 0; ok && done < size;) {
      const std::size_t slice = std::min(size - done, kSlice);
      ok = EVP_EncryptUpdate(ctx, at, &n, reinterpret_cast<const unsigned char*>(p + done),
                             static_cast<int>(slice)) == 1;
      at += n;
      done += slice;
    }
  });
  ok = ok && left == 0 && EVP_EncryptFinal_ex(ctx, at, &n) == 1;
  at += n;
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(bulk::kSealTagBytes),
                                 at) == 1;
  if (!ok)
    return internal_error("AES-GCM failed to seal a bulk record of " + std::to_string(plain) +
                          " bytes");
  return bulk::sealed_size(plain);
}

Status RecordCipher::open(std::vector<char>& body) {
  if (body.size() <= bulk::kSealTagBytes)
    return data_loss("a sealed record of " + std::to_string(body.size()) +
                     " bytes, shorter than its tag");
  const std::size_t plain = body.size() - bulk::kSealTagBytes;
  unsigned char header[bulk::kRecordHeaderBytes];
  write_header(header, plain);
  unsigned char nonce[12];
  const uint64_t seq = seq_;
  if (auto keys = next_nonce(plain, nonce); !keys.ok())
    return keys;
  EVP_CIPHER_CTX* ctx = ctx_of(ctx_);
  auto* p = reinterpret_cast<unsigned char*>(body.data());
  int n = 0;
  bool ok = EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key_, nonce) == 1 &&
            EVP_DecryptUpdate(ctx, nullptr, &n, header, static_cast<int>(sizeof header)) == 1;
  for (std::size_t done = 0; ok && done < plain;) { // in place: GCM allows out == in
    const std::size_t slice = std::min(plain - done, kSlice);
    ok = EVP_DecryptUpdate(ctx, p + done, &n, p + done, static_cast<int>(slice)) == 1;
    done += slice;
  }
  ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, static_cast<int>(bulk::kSealTagBytes),
                                 p + plain) == 1;
  ok = ok && EVP_DecryptFinal_ex(ctx, p + plain, &n) == 1;
  if (!ok)
    return data_loss("sealed record " + std::to_string(seq) +
                     " failed authentication (altered, lost, repeated or reordered on the way)");
  body.resize(plain);
  return Status::OK();
}

} // namespace conveyor::actors
