// BulkWriter (net/bulk_writer.hpp): gather buffers reach the peer whole and in order, views
// included, also when the socket is full; a removed connection closes; a peer that went away
// breaks only its own connection.
#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "net/bulk_writer.hpp"
#include "test/support/socket_read.hpp"
#include "test/support/random_bytes.hpp"

using namespace conveyor;
using conveyor::actors::BulkWriter;
using conveyor::testing::random_bytes;
using conveyor::testing::read_up_to;

namespace {

struct SocketPair {
  int ours = -1;   // what the writer duplicates (the caller's own descriptor, as CAF's)
  int theirs = -1; // the peer
  SocketPair() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    ours = fds[0];
    theirs = fds[1];
  }
  ~SocketPair() {
    close_ours();
    if (theirs >= 0)
      ::close(theirs);
  }
  void close_ours() {
    if (ours >= 0)
      ::close(ours);
    ours = -1;
  }
};

// Own bytes, a view of a string only the buffer keeps alive, own bytes again.
GatherBuffer frame(int i, std::size_t view_bytes) {
  GatherBuffer g;
  const std::string head = "head " + std::to_string(i) + ";";
  g.own.assign(head.begin(), head.end());
  auto storage =
    std::make_shared<const std::string>(random_bytes(view_bytes, static_cast<unsigned>(i)));
  g.add_view(storage, storage->data(), storage->size());
  const std::string tail = ";tail " + std::to_string(i);
  g.own.insert(g.own.end(), tail.begin(), tail.end());
  return g;
}

} // namespace

TEST_CASE(
  "bulk writer: buffers arrive whole and in order, views included, while the socket fills") {
  SocketPair pair;
  const int small = 16 << 10;
  ::setsockopt(pair.ours, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  BulkWriter writer;
  REQUIRE(writer.add(1, pair.ours, "test connection").ok());
  std::string expected;
  for (int i = 0; i < 40; ++i) {
    GatherBuffer g = frame(i, 200 << 10);
    const std::vector<char> flat = g.flatten();
    expected.append(flat.begin(), flat.end());
    writer.send(1, std::move(g)); // the only owner of its view's storage is the buffer now
  }
  CHECK(read_up_to(pair.theirs, expected.size()) == expected);
  const auto stats = writer.stats();
  CHECK(stats.buffers == 40);
  CHECK(stats.bytes == static_cast<int64_t>(expected.size()));
  CHECK(stats.would_block > 0); // 8 MiB through a 16 KiB buffer: the socket filled
}

TEST_CASE("bulk writer: removing a connection closes it, whatever is left unwritten") {
  SocketPair pair;
  BulkWriter writer;
  REQUIRE(writer.add(7, pair.ours, "test connection").ok());
  for (int i = 0; i < 64; ++i)
    writer.send(7, frame(i, 1 << 20)); // far more than the socket holds: the peer reads nothing yet
  pair.close_ours();                   // as CAF closes its own descriptor
  writer.remove(7);
  bool eof = false;
  const std::string got = read_up_to(pair.theirs, std::size_t{1} << 30, &eof);
  CHECK(eof); // the duplicate went too: the peer sees the connection close
  CHECK(got.size() < std::size_t{64} << 20);
  CHECK(got.rfind("head 0;", 0) == 0); // what came is the stream's start
}

TEST_CASE("bulk writer: a peer that went away breaks only its own connection") {
  SocketPair gone, alive;
  BulkWriter writer;
  REQUIRE(writer.add(1, gone.ours, "gone").ok());
  REQUIRE(writer.add(2, alive.ours, "alive").ok());
  ::close(gone.theirs);
  gone.theirs = -1;
  std::string expected;
  for (int i = 0; i < 8; ++i) {
    writer.send(1, frame(i, 100 << 10)); // fails (EPIPE, no SIGPIPE) and is dropped
    GatherBuffer g = frame(100 + i, 100 << 10);
    const std::vector<char> flat = g.flatten();
    expected.append(flat.begin(), flat.end());
    writer.send(2, std::move(g));
  }
  CHECK(read_up_to(alive.theirs, expected.size()) == expected);
  writer.send(1, frame(9, 10)); // still dropped, quietly: the break was reported once
  writer.remove(1);
}

TEST_CASE("bulk writer: an unknown connection's buffers are dropped, a bad socket refused") {
  BulkWriter writer;
  writer.send(42, frame(0, 10)); // nothing to write to: dropped
  writer.remove(42);
  CHECK_FALSE(writer.add(3, -1, "bad").ok());
}
