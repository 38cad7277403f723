// TlsStream (net/tls_stream.hpp): two ends talking through memory, with certificates made by
// the openssl command (test/support/pki.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "net/bulk_frame.hpp"
#include "net/bulk_seal.hpp"
#include "net/tls_stream.hpp"
#include "conveyor/options.hpp"
#include "test/support/pki.hpp"

using namespace conveyor;
using namespace conveyor::actors;
using conveyor::testing::Pki;

namespace {

NetworkConfig files(const Pki& pki, const std::string& ca = "ca", const std::string& trust = "ca") {
  NetworkConfig n;
  n.tls_cert = pki.cert(ca);
  n.tls_key = pki.key(ca);
  n.tls_ca = pki.ca_file(trust);
  return n;
}

std::shared_ptr<TlsEndpoint> endpoint(const NetworkConfig& n, TlsEndpoint::Role role) {
  auto e = TlsEndpoint::create(n, role);
  REQUIRE_MESSAGE(e.ok(), e.status().to_string());
  return *e;
}

// Moves `from`'s ciphertext to `to` in chunks of `chunk` bytes (as a socket might); the first
// error `to` reports, or OK.
Status shuttle(TlsStream& from, TlsStream& to, std::size_t chunk) {
  std::vector<char> wire;
  from.take_output(wire);
  for (std::size_t at = 0; at < wire.size(); at += chunk) {
    auto st = to.receive(wire.data() + at, std::min(chunk, wire.size() - at));
    if (!st.ok())
      return st;
  }
  return Status::OK();
}

// Runs the handshake (both directions until neither has output); the first error or OK.
Status handshake(TlsStream& client, TlsStream& server, std::size_t chunk) {
  for (int i = 0; i < 10 && (client.has_output() || server.has_output()); ++i) {
    if (auto st = shuttle(client, server, chunk); !st.ok())
      return st;
    if (auto st = shuttle(server, client, chunk); !st.ok())
      return st;
  }
  return Status::OK();
}

std::string read_all(TlsStream& s, std::size_t expect) {
  std::string out(expect + 16, '\0');
  std::size_t have = 0;
  for (;;) {
    auto got = s.read(out.data() + have, out.size() - have);
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    if (*got == 0)
      break;
    have += *got;
  }
  out.resize(have);
  return out;
}

std::string pattern(std::size_t n, int seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>((i * 131 + static_cast<std::size_t>(seed) * 7) & 0xff);
  return s;
}

} // namespace

TEST_CASE("TLS stream: mutual handshake, then frames of every size arrive byte-exact both ways") {
  Pki pki;
  auto server_end = endpoint(files(pki), TlsEndpoint::Role::server);
  auto client_end = endpoint(files(pki), TlsEndpoint::Role::client);
  for (std::size_t chunk : {std::size_t{1} << 20, std::size_t{977}}) {
    CAPTURE(chunk);
    TlsStream client(client_end), server(server_end);
    CHECK(client.has_output()); // the ClientHello, at once
    // Sent before the handshake ends: held, then delivered first.
    const std::string early = pattern(16, 1);
    REQUIRE(client.send(early.data(), early.size()).ok());
    REQUIRE(handshake(client, server, chunk).ok());
    CHECK(client.established());
    CHECK(server.established());
    REQUIRE(shuttle(client, server, chunk).ok());
    CHECK(read_all(server, early.size()) == early);
    for (std::size_t size :
         {std::size_t{1}, std::size_t{16384}, std::size_t{16385}, std::size_t{(1 << 20) + 7}}) {
      CAPTURE(size);
      const std::string down = pattern(size, 2), up = pattern(size / 3 + 1, 3);
      REQUIRE(server.send(down.data(), down.size()).ok());
      REQUIRE(shuttle(server, client, chunk).ok());
      CHECK(read_all(client, down.size()) == down);
      REQUIRE(client.send(up.data(), up.size()).ok());
      REQUIRE(shuttle(client, server, chunk).ok());
      CHECK(read_all(server, up.size()) == up);
    }
  }
}

TEST_CASE("TLS stream: a certificate the CA did not sign is refused, and so is a plain peer") {
  Pki pki;
  auto server_end = endpoint(files(pki), TlsEndpoint::Role::server);
  SUBCASE("client from another CA") {
    TlsStream rogue(endpoint(files(pki, "rogue", "ca"), TlsEndpoint::Role::client));
    TlsStream server(server_end);
    auto st = handshake(rogue, server, 4096);
    if (st.ok()) // the refusal may surface on either side, depending on the TLS version's order
      st = handshake(server, rogue, 4096);
    CHECK_FALSE(st.ok());
    CHECK(st.message().find("handshake") != std::string::npos);
    CHECK_FALSE(server.established());
    char buf[16];
    CHECK_FALSE(server.read(buf, sizeof buf).ok());
  }
  SUBCASE("a server whose certificate the client's CA did not sign") {
    TlsStream client(endpoint(files(pki, "ca", "ca"), TlsEndpoint::Role::client));
    TlsStream rogue_server(endpoint(files(pki, "rogue", "rogue"), TlsEndpoint::Role::server));
    auto st = handshake(client, rogue_server, 4096);
    CHECK_FALSE(st.ok());
    CHECK_FALSE(client.established());
  }
  SUBCASE("a peer that does not speak TLS") {
    TlsStream server(server_end);
    const std::string hello = "CVBH plain hello, not a TLS record";
    auto st = server.receive(hello.data(), hello.size());
    CHECK_FALSE(st.ok());
    CHECK(st.message().find("handshake") != std::string::npos);
  }
}

TEST_CASE("TLS stream: bad files are refused naming the flag") {
  Pki pki;
  NetworkConfig n = files(pki);
  n.tls_key = pki.key("rogue");
  auto e = TlsEndpoint::create(n, TlsEndpoint::Role::server);
  REQUIRE_FALSE(e.ok());
  CHECK(e.status().message().find("--tls-key") != std::string::npos);
  n = files(pki);
  n.tls_ca = pki.dir + "/missing.pem";
  e = TlsEndpoint::create(n, TlsEndpoint::Role::client);
  REQUIRE_FALSE(e.ok());
  CHECK(e.status().message().find("--tls-ca") != std::string::npos);
}

TEST_CASE(
  "TLS files: a node certificate that does not verify against --tls-ca is refused at start-up") {
  Pki pki;
  CHECK(validate_security(files(pki)).ok());
  CHECK(validate_security(files(pki, "rogue", "rogue")).ok());
  // Loads and matches its key, but no peer trusting the CA would accept it.
  const auto st = validate_security(files(pki, "rogue", "ca"));
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == ErrorCode::invalid_argument);
  CHECK(st.message().find("`--tls-cert` " + pki.cert("rogue")) != std::string::npos);
  CHECK(st.message().find("does not verify against `--tls-ca` " + pki.ca_file("ca")) !=
        std::string::npos);
  // A certificate file holding the node's certificate and then more of its chain verifies too.
  const std::string chain = pki.dir + "/chain.pem";
  REQUIRE(std::system(("cat " + pki.cert() + " " + pki.ca_file() + " > " + chain).c_str()) == 0);
  NetworkConfig n = files(pki);
  n.tls_cert = chain;
  CHECK(validate_security(n).ok());
}

// --- sealed records (net/bulk_seal.hpp): the TLS bulk path's frames after the ack

namespace {

struct SealedPair {
  std::unique_ptr<TlsStream> client, server; // the ciphers derive later keys from them
  std::unique_ptr<RecordCipher> worker, consumer;
};

// Both ends of one fresh session, each with the keys derived from it (a new key every
// `worker_rekey` / `consumer_rekey` bytes).
SealedPair sealed_pair(const Pki& pki, uint64_t worker_rekey = bulk::kRekeyBytes,
                       uint64_t consumer_rekey = bulk::kRekeyBytes) {
  SealedPair p;
  p.client = std::make_unique<TlsStream>(endpoint(files(pki), TlsEndpoint::Role::client));
  p.server = std::make_unique<TlsStream>(endpoint(files(pki), TlsEndpoint::Role::server));
  REQUIRE(handshake(*p.client, *p.server, 4096).ok());
  REQUIRE(p.client->established());
  REQUIRE(p.server->established());
  auto w = RecordCipher::create(*p.server, worker_rekey);
  auto c = RecordCipher::create(*p.client, consumer_rekey);
  REQUIRE_MESSAGE(w.ok(), w.status().to_string());
  REQUIRE_MESSAGE(c.ok(), c.status().to_string());
  p.worker = std::move(*w);
  p.consumer = std::move(*c);
  return p;
}

// A frame as a task makes it: 40 bytes of header room, then a tensor's storage as a view, then
// a few bytes of its own.
GatherBuffer frame_of(const std::string& header, const std::shared_ptr<const std::string>& tensor,
                      const std::string& tail) {
  GatherBuffer frame;
  frame.own.assign(header.begin(), header.end());
  frame.add_view(tensor, tensor->data(), tensor->size());
  frame.own.insert(frame.own.end(), tail.begin(), tail.end());
  return frame;
}

// Seals `frame` as the worker's session does (header and payload, a record each).
std::vector<char> seal_frame(RecordCipher& c, const GatherBuffer& frame) {
  const std::size_t h = bulk::kFrameHeaderBytes;
  std::vector<char> out(bulk::sealed_size(h) + bulk::sealed_size(frame.size() - h));
  auto at = c.seal(frame, 0, h, out.data());
  REQUIRE(at.ok());
  CHECK(*at == bulk::sealed_size(h));
  auto rest = c.seal(frame, h, frame.size(), out.data() + *at);
  REQUIRE(rest.ok());
  CHECK(*rest == out.size() - *at);
  return out;
}

// Splits a stream of sealed records into their bodies, as the consumer's broker reads them.
std::vector<std::vector<char>> record_bodies(const std::vector<char>& wire) {
  std::vector<std::vector<char>> bodies;
  for (std::size_t at = 0; at < wire.size();) {
    bulk::RecordHeader h;
    REQUIRE_FALSE(bulk::read_record_header(wire.data() + at, h));
    REQUIRE(h.sealed);
    at += bulk::kRecordHeaderBytes;
    REQUIRE(at + h.body <= wire.size());
    bodies.emplace_back(wire.begin() + static_cast<std::ptrdiff_t>(at),
                        wire.begin() + static_cast<std::ptrdiff_t>(at + h.body));
    at += h.body;
  }
  return bodies;
}

} // namespace

TEST_CASE("sealed records: a frame sealed from its pieces opens byte-exact with the peer's keys") {
  Pki pki;
  auto keys = sealed_pair(pki);
  for (std::size_t size : {std::size_t{1}, std::size_t{16384}, std::size_t{(1 << 20) + 7}}) {
    CAPTURE(size);
    auto tensor = std::make_shared<const std::string>(pattern(size, 5));
    const GatherBuffer frame = frame_of(pattern(bulk::kFrameHeaderBytes, 6), tensor, pattern(9, 7));
    const std::vector<char> plain = frame.flatten();
    const std::vector<char> wire = seal_frame(*keys.worker, frame);
    // Encrypted: the tensor's first 64 bytes do not appear on the wire (a shorter run could by chance).
    if (size >= 64)
      CHECK(std::search(wire.begin(), wire.end(), tensor->begin(), tensor->begin() + 64) ==
            wire.end());
    auto bodies = record_bodies(wire);
    REQUIRE(bodies.size() == 2);
    CHECK(bodies[0].size() == bulk::kFrameHeaderBytes + bulk::kSealTagBytes);
    for (auto& body : bodies)
      REQUIRE_MESSAGE(keys.consumer->open(body).ok(), "size " << body.size());
    std::vector<char> got = bodies[0];
    got.insert(got.end(), bodies[1].begin(), bodies[1].end());
    CHECK(got == plain);
  }
}

TEST_CASE("sealed records: a changed bit, a lost, repeated or reordered record, or another "
          "session's keys fail") {
  Pki pki;
  auto keys = sealed_pair(pki);
  auto tensor = std::make_shared<const std::string>(pattern(5000, 8));
  const GatherBuffer frame = frame_of(pattern(bulk::kFrameHeaderBytes, 9), tensor, "");
  auto first = record_bodies(seal_frame(*keys.worker, frame));
  auto second = record_bodies(seal_frame(*keys.worker, frame));
  SUBCASE("a changed bit in the ciphertext or the tag") {
    for (std::size_t at : {std::size_t{0}, first[0].size() - 1}) {
      auto sealed = sealed_pair(pki);
      auto wire = record_bodies(seal_frame(*sealed.worker, frame));
      wire[0][at] = static_cast<char>(wire[0][at] ^ 0x10);
      auto st = sealed.consumer->open(wire[0]);
      CHECK_FALSE(st.ok());
      CHECK(st.message().find("failed authentication") != std::string::npos);
    }
  }
  SUBCASE("a changed length (the header is authenticated)") {
    first[0].push_back('x');
    CHECK_FALSE(keys.consumer->open(first[0]).ok());
  }
  SUBCASE("a lost record: the next one does not open") {
    CHECK_FALSE(keys.consumer->open(first[1]).ok());
  }
  SUBCASE("a repeated record") {
    auto copy = first[0];
    REQUIRE(keys.consumer->open(first[0]).ok());
    CHECK_FALSE(keys.consumer->open(copy).ok());
  }
  SUBCASE("records of the next frame first") { CHECK_FALSE(keys.consumer->open(second[0]).ok()); }
  SUBCASE("another session's keys") {
    auto other = sealed_pair(pki);
    CHECK_FALSE(other.consumer->open(first[0]).ok());
  }
}

TEST_CASE("sealed records: the reader tells TLS records from sealed ones and refuses the rest "
          "before reserving") {
  bulk::RecordHeader h;
  const char tls_handshake[5] = {22, 3, 3, 0x01, 0x00};
  REQUIRE_FALSE(bulk::read_record_header(tls_handshake, h));
  CHECK_FALSE(h.sealed);
  CHECK(h.body == 256);
  const char sealed[5] = {static_cast<char>(0xC5), 0x00, 0x00, 0x10, 0x00}; // 1 MiB
  REQUIRE_FALSE(bulk::read_record_header(sealed, h));
  CHECK(h.sealed);
  CHECK(h.body == (std::size_t{1} << 20) + bulk::kSealTagBytes);
  const char too_long_tls[5] = {23, 3, 3, static_cast<char>(0xff), static_cast<char>(0xff)};
  auto bad = bulk::read_record_header(too_long_tls, h);
  REQUIRE(bad);
  CHECK(bad->find("TLS record of 65535 bytes") != std::string::npos);
  const char too_long_sealed[5] = {static_cast<char>(0xC5), 0x00, 0x00, 0x00,
                                   static_cast<char>(0x90)};
  bad = bulk::read_record_header(too_long_sealed, h);
  REQUIRE(bad);
  CHECK(bad->find("sealed record claiming") != std::string::npos);
  const char empty_sealed[5] = {static_cast<char>(0xC5), 0, 0, 0, 0};
  CHECK(bulk::read_record_header(empty_sealed, h));
  const char plain_hello[5] = {'C', 'V', 'B', 'H', 1};
  bad = bulk::read_record_header(plain_hello, h);
  REQUIRE(bad);
  CHECK(bad->find("neither a TLS record nor a sealed record") != std::string::npos);
}

TEST_CASE("sealed records: no keys before the handshake is done") {
  Pki pki;
  TlsStream client(endpoint(files(pki), TlsEndpoint::Role::client));
  auto keys = RecordCipher::create(client);
  REQUIRE_FALSE(keys.ok());
  CHECK(keys.status().message().find("before the handshake") != std::string::npos);
}

TEST_CASE(
  "sealed records: both ends change keys at the same record, every rekey_bytes of plaintext") {
  Pki pki;
  auto tensor = std::make_shared<const std::string>(pattern(3000, 10));
  const GatherBuffer frame = frame_of(pattern(bulk::kFrameHeaderBytes, 11), tensor, "");
  SUBCASE("the same schedule: 20 frames (5 keys) open byte-exact, and no two records are alike") {
    auto keys = sealed_pair(pki, 10000, 10000); // a new key every 4 frames
    std::vector<std::vector<char>> payloads;
    for (int i = 0; i < 20; ++i) {
      auto bodies = record_bodies(seal_frame(*keys.worker, frame));
      payloads.push_back(bodies[1]);
      for (auto& body : bodies)
        REQUIRE_MESSAGE(keys.consumer->open(body).ok(), "frame " << i);
      CHECK(std::string(bodies[1].begin(), bodies[1].end()) == *tensor);
    }
    std::sort(payloads.begin(), payloads.end());
    CHECK(std::unique(payloads.begin(), payloads.end()) == payloads.end());
  }
  SUBCASE("a consumer that would not change keys fails at the first record under the new one") {
    auto keys = sealed_pair(pki, 10000, bulk::kRekeyBytes);
    int opened = 0;
    for (int i = 0; i < 5; ++i)
      for (auto& body : record_bodies(seal_frame(*keys.worker, frame))) {
        if (!keys.consumer->open(body).ok())
          break;
        ++opened;
      }
    // A key seals records until 10 000 bytes are reached: 4 frames of 3 040 bytes (the 4th
    // payload starts at 9 160); the 5th frame's header is the first record under the next key.
    CHECK(opened == 8);
  }
}
