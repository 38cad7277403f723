// TCP brokers of the bulk data path (overview in actors/bulk.hpp, wire format in bulk_frame.hpp).
#include "actors/bulk.hpp"

#include <deque>
#include <map>
#include <memory>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/bulk_frame.hpp"
#include "actors/log.hpp"
#include "actors/tls_stream.hpp"
#include "messages/all.hpp"
#include "pipeline/buffer_pool.hpp"

namespace conveyor::actors {

namespace {

constexpr const char* kLog = "bulk";
using caf::io::connection_handle;
using caf::io::receive_policy;

// --- worker side

struct ServerConn {
  bool greeted = false;
  uint64_t channel = 0;
  std::deque<std::vector<char>> queue; // frames not yet handed to CAF
  // TLS bulk path only: the session, and the hello as it arrives in plaintext.
  std::unique_ptr<TlsStream> tls;
  std::vector<char> hello;
};

struct ServerState {
  std::shared_ptr<TlsEndpoint> tls; // null: plain TCP
  uint16_t port = 0;
  uint64_t next_channel = 0;
  caf::error listen_error;
  std::map<uint64_t, connection_handle> channels;
  std::map<connection_handle, ServerConn> conns;
  // In-process channels (target_workers LOCAL, actors/local_workers.hpp): channel -> the
  // consumer actor of this process and its id for the channel. Frames go to it as messages.
  struct Local {
    caf::actor consumer;
    uint64_t consumer_channel = 0;
  };
  std::map<uint64_t, Local> local;
};

// Hands queued frames to CAF by swapping them into the (empty) write buffer: no copy. CAF takes
// one into its write buffer at flush and one more into the offline buffer behind it. What the
// swap gives back is a frame CAF finished writing (cleared, capacity kept): it goes back to the
// buffer pool for the task's next frame.
void pump(caf::io::broker* self, ServerState& st, connection_handle hdl) {
  auto c = st.conns.find(hdl);
  if (c == st.conns.end())
    return;
  auto& q = c->second.queue;
  auto* tls = c->second.tls.get();
  while (!q.empty()) {
    auto& wb = self->wr_buf(hdl);
    if (!wb.empty())
      break;
    if (tls == nullptr) {
      wb.swap(q.front());
    } else if (auto st = tls->send(q.front().data(), q.front().size()); st.ok()) {
      tls->take_output(wb); // the encrypted frame: one copy, which TLS needs anyway
    } else {
      log::warning(kLog, "bulk channel " + std::to_string(c->second.channel) + ": " + st.message());
      break;
    }
    q.front().clear();
    BufferPool::global().release(std::move(q.front()));
    q.pop_front();
    self->flush(hdl);
  }
}

void drop_conn(ServerState& st, connection_handle hdl) {
  auto c = st.conns.find(hdl);
  if (c == st.conns.end())
    return;
  if (c->second.greeted) {
    auto ch = st.channels.find(c->second.channel);
    if (ch != st.channels.end() && ch->second == hdl)
      st.channels.erase(ch);
  }
  if (!c->second.queue.empty())
    log::warning(kLog, "bulk channel " + std::to_string(c->second.channel) + " closed with " +
                         std::to_string(c->second.queue.size()) +
                         " frame(s) unsent (the consumer fails or refetches them)");
  st.conns.erase(c);
}

constexpr std::size_t kTlsReadChunk = 256 * 1024; // TLS: ciphertext read per event

// TLS: moves what the session produced (handshake records, encrypted data) to the socket.
void flush_tls(caf::io::broker* self, ServerConn& conn, connection_handle hdl) {
  if (!conn.tls->has_output())
    return;
  conn.tls->take_output(self->wr_buf(hdl));
  self->flush(hdl);
}

// A consumer's hello (plain or decrypted): a channel number back, or the connection closed.
void on_hello(caf::io::broker* self, ServerState& st, connection_handle hdl, ServerConn& conn,
              const char* data, std::size_t size) {
  if (conn.greeted || !bulk::read_hello(data, size)) {
    // a consumer never sends anything else
    log::warning(kLog, "closing a bulk connection that sent something other than one hello");
    drop_conn(st, hdl);
    self->close(hdl);
    return;
  }
  const uint64_t channel = ++st.next_channel;
  conn.greeted = true;
  conn.channel = channel;
  st.channels[channel] = hdl;
  log::debug(kLog, std::string{conn.tls ? "TLS " : ""} + "bulk channel " + std::to_string(channel) +
                     " opened");
  char ack[bulk::kAckBytes];
  bulk::write_ack(ack, channel);
  if (conn.tls) {
    if (auto sent = conn.tls->send(ack, sizeof ack); !sent.ok())
      log::warning(kLog, "bulk channel " + std::to_string(channel) + ": " + sent.message());
    flush_tls(self, conn, hdl);
    return;
  }
  auto& wb = self->wr_buf(hdl);
  wb.insert(wb.end(), ack, ack + sizeof ack);
  self->flush(hdl);
}

caf::behavior bulk_server(caf::io::broker* self, std::string host, std::shared_ptr<TlsEndpoint> tls) {
  auto st = std::make_shared<ServerState>();
  st->tls = std::move(tls);
  self->set_down_handler([st](caf::down_msg& down) { // an in-process consumer ended
    for (auto it = st->local.begin(); it != st->local.end();)
      it = it->second.consumer.address() == down.source ? st->local.erase(it) : std::next(it);
  });
  auto listening = self->add_tcp_doorman(0, host.c_str(), true);
  if (listening)
    st->port = listening->second;
  else
    st->listen_error = listening.error();
  return {
    [=](caf::get_atom) -> caf::result<uint16_t> {
      if (st->listen_error)
        return st->listen_error;
      return st->port;
    },
    [=](const caf::io::new_connection_msg& msg) {
      auto& conn = st->conns[msg.handle];
      self->ack_writes(msg.handle, true);
      if (st->tls) {
        conn.tls = std::make_unique<TlsStream>(st->tls);
        self->configure_read(msg.handle, receive_policy::at_most(kTlsReadChunk));
      } else {
        self->configure_read(msg.handle, receive_policy::exactly(bulk::kHelloBytes));
      }
    },
    [=](caf::io::new_data_msg& msg) {
      auto c = st->conns.find(msg.handle);
      if (c == st->conns.end())
        return;
      auto& conn = c->second;
      if (!conn.tls) {
        on_hello(self, *st, msg.handle, conn, msg.buf.data(), msg.buf.size());
        return;
      }
      // TLS: decrypt; the only plaintext a consumer sends is its hello.
      auto st_in = conn.tls->receive(msg.buf.data(), msg.buf.size());
      char plain[bulk::kHelloBytes + 1];
      Expected<std::size_t> got = std::size_t{0};
      if (st_in.ok())
        got = conn.tls->read(plain, sizeof plain);
      if (!st_in.ok() || !got.ok()) {
        log::warning(kLog, "refused a TLS bulk connection: " +
                             (st_in.ok() ? got.status() : st_in).message());
        drop_conn(*st, msg.handle);
        self->close(msg.handle);
        return;
      }
      conn.hello.insert(conn.hello.end(), plain, plain + *got);
      if (conn.greeted ? *got > 0 : conn.hello.size() >= bulk::kHelloBytes)
        on_hello(self, *st, msg.handle, conn, conn.hello.data(), conn.hello.size());
      else
        flush_tls(self, conn, msg.handle); // handshake records
    },
    // A consumer of this process opens an in-process channel (no socket): the frames go to it
    // as (bulk_frame_atom, its channel, frame) messages, header included, with no copy.
    [=](msg::bulk_open_atom, const caf::actor& consumer, uint64_t consumer_channel) {
      const uint64_t channel = ++st->next_channel;
      st->local[channel] = ServerState::Local{consumer, consumer_channel};
      self->monitor(consumer);
      log::debug(kLog, "in-process bulk channel " + std::to_string(channel) + " opened");
      self->send(consumer, msg::bulk_ready_atom_v, consumer_channel, channel);
    },
    [=](msg::bulk_send_atom, uint64_t channel, std::vector<char>& frame) {
      if (auto l = st->local.find(channel); l != st->local.end()) {
        self->send(l->second.consumer, msg::bulk_frame_atom_v, l->second.consumer_channel,
                   std::move(frame));
        return;
      }
      auto ch = st->channels.find(channel);
      if (ch == st->channels.end()) {
        // The channel closed: its consumer saw that too and fails what it waited for.
        log::debug(kLog, "frame for closed bulk channel " + std::to_string(channel) + " dropped");
        return;
      }
      st->conns[ch->second].queue.push_back(std::move(frame));
      pump(self, *st, ch->second);
    },
    [=](const caf::io::data_transferred_msg& msg) { pump(self, *st, msg.handle); },
    [=](const caf::io::connection_closed_msg& msg) {
      log::debug(kLog, "bulk connection closed");
      drop_conn(*st, msg.handle);
    },
    [=](const caf::io::acceptor_closed_msg&) { self->quit(); },
  };
}

// --- consumer side

struct ClientConn {
  enum class Phase { ack, header, payload } phase = Phase::ack;
  uint64_t channel = 0;
  bulk::FrameHeader header;
  // TLS bulk path only: the session, and the unit (ack, header or payload) being decrypted into.
  std::unique_ptr<TlsStream> tls;
  std::vector<char> unit;
  std::size_t have = 0;
};

struct ClientState {
  caf::actor consumer;
  std::shared_ptr<TlsEndpoint> tls; // null: plain TCP
  std::map<connection_handle, ClientConn> conns;
};

void lost(caf::io::broker* self, ClientState& st, connection_handle hdl, const std::string& why) {
  auto c = st.conns.find(hdl);
  if (c == st.conns.end())
    return;
  self->send(st.consumer, msg::bulk_lost_atom_v, c->second.channel, why);
  st.conns.erase(c);
}

// A buffer for the next unit of `size` bytes: a payload's from the pool (it becomes the
// elements' storage), resized in place when the pooled buffer is long enough.
void next_unit(std::vector<char>& buf, const ClientConn& conn, std::size_t size) {
  if (conn.phase == ClientConn::Phase::payload) {
    auto payload = BufferPool::global().acquire(size, true);
    buf.swap(payload);
  }
  buf.resize(size);
}

// One complete unit of the stream (the ack, a frame header or a frame's payload), plain or
// decrypted: returns the size of the next unit, or nullopt once the connection was closed.
std::optional<std::size_t> on_unit(caf::io::broker* self, ClientState& st, connection_handle hdl,
                                   ClientConn& conn, std::vector<char>& unit) {
  switch (conn.phase) {
    case ClientConn::Phase::ack: {
      auto assigned = bulk::read_ack(unit.data(), unit.size());
      if (!assigned) {
        self->close(hdl);
        lost(self, st, hdl, "the worker answered the bulk hello with something else");
        return std::nullopt;
      }
      self->send(st.consumer, msg::bulk_ready_atom_v, conn.channel, *assigned);
      conn.phase = ClientConn::Phase::header;
      return bulk::kFrameHeaderBytes;
    }
    case ClientConn::Phase::header:
      if (auto bad = bulk::read_frame_header(unit.data(), unit.size(), conn.header)) {
        self->close(hdl);
        lost(self, st, hdl, "protocol error on the bulk stream: " + *bad);
        return std::nullopt;
      }
      conn.phase = ClientConn::Phase::payload;
      return static_cast<std::size_t>(conn.header.length);
    case ClientConn::Phase::payload: {
      const auto& h = conn.header;
      // Moving the unit out: the frame's bytes become the elements' storage.
      self->send(st.consumer, msg::bulk_frame_atom_v, conn.channel, h.task, h.batch_seq, h.index,
                 h.count, std::move(unit));
      conn.phase = ClientConn::Phase::header;
      return bulk::kFrameHeaderBytes;
    }
  }
  return std::nullopt;
}

// TLS: decrypts what arrived into the current unit, handling each unit as it completes.
void on_tls_data(caf::io::broker* self, ClientState& st, connection_handle hdl, ClientConn& conn,
                 const std::vector<char>& ciphertext) {
  auto in = conn.tls->receive(ciphertext.data(), ciphertext.size());
  if (conn.tls->has_output()) { // handshake records
    conn.tls->take_output(self->wr_buf(hdl));
    self->flush(hdl);
  }
  for (;;) {
    Expected<std::size_t> got = std::size_t{0};
    if (in.ok())
      got = conn.tls->read(conn.unit.data() + conn.have, conn.unit.size() - conn.have);
    if (!in.ok() || !got.ok()) {
      const std::string why = (in.ok() ? got.status() : in).message();
      self->close(hdl);
      lost(self, st, hdl, "TLS bulk connection: " + why);
      return;
    }
    if (*got == 0)
      return;
    conn.have += *got;
    if (conn.have < conn.unit.size())
      continue;
    auto next = on_unit(self, st, hdl, conn, conn.unit);
    if (!next)
      return;
    conn.have = 0;
    next_unit(conn.unit, conn, *next);
  }
}

caf::behavior bulk_client(caf::io::broker* self, caf::actor consumer,
                          std::shared_ptr<TlsEndpoint> tls) {
  auto st = std::make_shared<ClientState>();
  st->consumer = consumer;
  st->tls = std::move(tls);
  self->monitor(consumer);
  self->set_down_handler([self](caf::down_msg&) {
    self->close_all();
    self->quit();
  });
  return {
    [=](msg::bulk_open_atom, const std::string& host, uint16_t port, uint64_t channel) {
      auto hdl = self->add_tcp_scribe(host, port);
      if (!hdl) {
        self->send(st->consumer, msg::bulk_lost_atom_v, channel,
                   "cannot connect to the bulk port " + host + ":" + std::to_string(port) + ": " +
                     self->system().render(hdl.error()));
        return;
      }
      auto& conn = st->conns[*hdl];
      conn.channel = channel;
      char hello[bulk::kHelloBytes];
      bulk::write_hello(hello);
      auto& wb = self->wr_buf(*hdl);
      if (st->tls) {
        conn.tls = std::make_unique<TlsStream>(st->tls);
        auto sent = conn.tls->send(hello, sizeof hello); // held until the handshake is done
        conn.tls->take_output(wb);                        // the ClientHello
        conn.unit.resize(bulk::kAckBytes);
        self->flush(*hdl);
        self->configure_read(*hdl, receive_policy::at_most(kTlsReadChunk));
        if (!sent.ok()) {
          self->close(*hdl);
          lost(self, *st, *hdl, "TLS bulk connection: " + sent.message());
        }
        return;
      }
      wb.insert(wb.end(), hello, hello + sizeof hello);
      self->flush(*hdl);
      self->configure_read(*hdl, receive_policy::exactly(bulk::kAckBytes));
    },
    [=](caf::io::new_data_msg& msg) {
      auto c = st->conns.find(msg.handle);
      if (c == st->conns.end())
        return;
      auto& conn = c->second;
      if (conn.tls) {
        on_tls_data(self, *st, msg.handle, conn, msg.buf);
        return;
      }
      // Plain TCP: CAF reads exactly one unit per message.
      auto next = on_unit(self, *st, msg.handle, conn, msg.buf);
      if (!next)
        return;
      self->configure_read(msg.handle, receive_policy::exactly(*next));
      // CAF swaps msg.buf back in as the connection's read buffer and resizes it to the next
      // unit's length: for a payload, a pooled buffer with that capacity is resized in place (no
      // fresh pages; nothing zero-filled when it was at least that long already).
      if (conn.phase == ClientConn::Phase::payload)
        next_unit(msg.buf, conn, *next);
    },
    [=](const caf::io::connection_closed_msg& msg) {
      lost(self, *st, msg.handle, "the worker closed the bulk connection");
    },
  };
}

} // namespace

caf::expected<BulkServer> spawn_tcp_bulk_server(caf::actor_system& sys, const std::string& host,
                                                std::shared_ptr<TlsEndpoint> tls) {
  auto broker = sys.middleman().spawn_broker(bulk_server, host, std::move(tls));
  caf::scoped_actor self{sys};
  caf::expected<BulkServer> result{caf::sec::request_timeout};
  self->request(broker, std::chrono::seconds(5), caf::get_atom_v)
    .receive([&](uint16_t port) { result = BulkServer{broker, port}; },
             [&](caf::error& err) { result = std::move(err); });
  if (!result)
    caf::anon_send_exit(broker, caf::exit_reason::user_shutdown);
  return result;
}

caf::actor spawn_tcp_bulk_client(caf::actor_system& sys, const caf::actor& consumer,
                                 std::shared_ptr<TlsEndpoint> tls) {
  return sys.middleman().spawn_broker(bulk_client, consumer, std::move(tls));
}

} // namespace conveyor::actors
