// TlsStream (actors/tls_stream.hpp): two ends talking through memory, with certificates made by
// the openssl command (test/support/pki.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "actors/tls_stream.hpp"
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
    for (std::size_t size : {std::size_t{1}, std::size_t{16384}, std::size_t{16385}, std::size_t{(1 << 20) + 7}}) {
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
