// TCP brokers of the bulk data path (overview in net/bulk.hpp, wire format in bulk_frame.hpp).
#include "net/bulk.hpp"

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "net/bulk_frame.hpp"
#include "net/bulk_seal.hpp"
#include "net/bulk_stream_reader.hpp"
#include "net/bulk_tls.hpp"
#include "net/bulk_writer.hpp"
#include "node/log.hpp"
#include "messages/all.hpp"
#include "pipeline/tensor/buffer_pool.hpp"

namespace conveyor::actors {

namespace {

constexpr const char* kLog = "bulk";
using caf::io::connection_handle;
using caf::io::receive_policy;

// Bytes for the socket through CAF's write buffer: the hello, and a TLS session's records
// (handshake, alerts, the consumer's hello). Frames never go this way (BulkWriter writes them).
void write_out(caf::io::broker* self, connection_handle hdl, const char* data, std::size_t size) {
  auto& wb = self->wr_buf(hdl);
  wb.insert(wb.end(), data, data + size);
  self->flush(hdl);
}

// --- worker side

struct ServerConn {
  bool greeted = false;
  uint64_t channel = 0;
  // The writer's name for the connection (not the socket's number: a TLS session may still
  // hand the writer a record for a connection that closed while a new one got its number).
  uint64_t writer_key = 0;
  // TLS bulk path only: the session actor (net/bulk_tls.hpp), and the hello as it arrives.
  caf::actor session;
  std::vector<char> hello;
};

struct ServerState {
  std::shared_ptr<TlsEndpoint> tls; // null: plain TCP
  // Writes every greeted connection's bytes (net/bulk_writer.hpp): the plain path's frames
  // from here, TLS sessions their ack and sealed records. CAF reads them (and writes the TLS
  // handshake).
  std::shared_ptr<BulkWriter> writer;
  uint64_t writer_keys = 0;
  uint16_t port = 0;
  std::mt19937_64 ids{std::random_device{}()}; // channel ids: a hello that joins one must know it
  caf::error listen_error;
  // A channel's connections: its frames go to them in turn (bulk_frame.hpp).
  struct Channel {
    std::vector<connection_handle> conns;
    std::size_t next = 0;
  };
  std::map<uint64_t, Channel> channels;
  std::map<connection_handle, ServerConn> conns;
  // In-process channels (target_workers LOCAL, worker/local_workers.hpp): channel -> the
  // consumer actor of this process and its id for the channel. Frames go to it as messages.
  struct Local {
    caf::actor consumer;
    uint64_t consumer_channel = 0;
  };
  std::map<uint64_t, Local> local;

  uint64_t new_channel_id() {
    for (;;) {
      const uint64_t id = ids();
      if (id != 0 && channels.count(id) == 0 && local.count(id) == 0)
        return id;
    }
  }
};

void forget_conn(caf::io::broker* self, ServerState& st, connection_handle hdl) {
  auto c = st.conns.find(hdl);
  if (c == st.conns.end())
    return;
  if (c->second.session)
    self->send(c->second.session, msg::bulk_lost_atom_v, std::string{"connection closed"});
  if (c->second.greeted && st.writer)
    st.writer->remove(c->second.writer_key); // it warns of frames left unwritten
  st.conns.erase(c);
}

// The connection is gone (closed by the peer, or to be closed by the caller). A channel that lost
// one of its connections lost some of its frames: its other connections close too, and the
// consumer sees the channel break.
void drop_conn(caf::io::broker* self, ServerState& st, connection_handle hdl) {
  auto c = st.conns.find(hdl);
  if (c == st.conns.end())
    return;
  const bool greeted = c->second.greeted;
  const uint64_t channel = c->second.channel;
  forget_conn(self, st, hdl);
  auto ch = greeted ? st.channels.find(channel) : st.channels.end();
  if (ch == st.channels.end())
    return;
  for (auto other : ch->second.conns)
    if (other != hdl) {
      forget_conn(self, st, other);
      self->close(other);
    }
  st.channels.erase(ch);
}

// TLS (worker side): bytes read per event. A consumer sends only its handshake and its hello,
// so one TLS record's worth; the frames go the other way, as sealed records.
constexpr std::size_t kTlsReadChunk = bulk::kRecordHeaderBytes + bulk::kMaxTlsRecordBody;

// TLS (worker side): hands what the socket read to the connection's session (CAF resizes the
// emptied read buffer for the next bytes).
void to_session(caf::io::broker* self, const caf::actor& session, std::vector<char>& buf) {
  std::vector<char> ciphertext;
  ciphertext.swap(buf);
  self->send(session, msg::tls_in_atom_v, std::move(ciphertext));
}

// A consumer's hello (plain or decrypted): the channel's id back, or the connection closed.
void on_hello(caf::io::broker* self, ServerState& st, connection_handle hdl, ServerConn& conn,
              const char* data, std::size_t size) {
  auto join = conn.greeted ? std::nullopt : bulk::read_hello(data, size);
  auto joined = join && *join != 0 ? st.channels.find(*join) : st.channels.end();
  if (!join || (*join != 0 && joined == st.channels.end())) {
    // a consumer never sends anything else
    log::warning(kLog, join ? "closing a bulk connection that asked to join a channel this worker "
                              "does not have"
                            : "closing a bulk connection that sent something other than one hello");
    drop_conn(self, st, hdl);
    self->close(hdl);
    return;
  }
  const uint64_t channel = *join != 0 ? *join : st.new_channel_id();
  conn.greeted = true;
  conn.channel = channel;
  st.channels[channel].conns.push_back(hdl);
  log::debug(kLog, std::string{conn.session ? "TLS " : ""} + "bulk channel " +
                     std::to_string(channel) + (*join != 0 ? " joined" : " opened"));
  // From here on the writer writes everything this connection gets, the ack first. (TLS: CAF
  // wrote the whole handshake already, since the consumer needed it to send its hello.)
  // CAF 0.17: the handle's id is the socket.
  if (auto added = st.writer->add(conn.writer_key, static_cast<int>(hdl.id()),
                                  "bulk channel " + std::to_string(channel));
      !added.ok()) {
    log::warning(kLog, added.message());
    drop_conn(self, st, hdl);
    self->close(hdl);
    return;
  }
  GatherBuffer ack;
  ack.own.resize(bulk::kAckBytes);
  bulk::write_ack(ack.own.data(), channel);
  if (conn.session) // the ack is the session's last TLS record; frames are sealed records
    self->send(conn.session, msg::tls_plain_atom_v, std::move(ack.own));
  else
    st.writer->send(conn.writer_key, std::move(ack));
}

caf::behavior bulk_server(caf::io::broker* self, std::string host, uint16_t port,
                          std::shared_ptr<TlsEndpoint> tls) {
  auto st = std::make_shared<ServerState>();
  st->tls = std::move(tls);
  st->writer = std::make_shared<BulkWriter>();
  // CAF closes the broker's sockets when it ends; the writer's duplicates must close with them
  // (once the TLS sessions, which end with the broker, let go of it too), or the consumers
  // would not see the worker go.
  self->attach_functor([st] { st->writer.reset(); });
  self->set_down_handler([st](caf::down_msg& down) { // an in-process consumer ended
    for (auto it = st->local.begin(); it != st->local.end();)
      it = it->second.consumer.address() == down.source ? st->local.erase(it) : std::next(it);
  });
  auto listening = self->add_tcp_doorman(port, host.c_str(), true);
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
      conn.writer_key = ++st->writer_keys;
      if (st->tls) {
        conn.session =
          spawn_tls_bulk_server_session(self, msg.handle, st->tls, st->writer, conn.writer_key);
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
      if (conn.session)
        to_session(self, conn.session, msg.buf);
      else
        on_hello(self, *st, msg.handle, conn, msg.buf.data(), msg.buf.size());
    },
    // TLS: the session decrypted part of the hello (or, after it, something a consumer never sends).
    [=](msg::tls_plain_atom, connection_handle hdl, const std::vector<char>& plain) {
      auto c = st->conns.find(hdl);
      if (c == st->conns.end())
        return;
      auto& conn = c->second;
      conn.hello.insert(conn.hello.end(), plain.begin(), plain.end());
      if (conn.greeted || conn.hello.size() >= bulk::kHelloBytes)
        on_hello(self, *st, hdl, conn, conn.hello.data(), conn.hello.size());
    },
    // TLS: the handshake's records (or an alert) for the socket.
    [=](msg::tls_out_atom, connection_handle hdl, const std::vector<char>& ciphertext) {
      if (st->conns.count(hdl) > 0)
        write_out(self, hdl, ciphertext.data(), ciphertext.size());
    },
    [=](msg::bulk_lost_atom, connection_handle hdl, const std::string& why) {
      auto c = st->conns.find(hdl);
      if (c == st->conns.end())
        return;
      if (c->second.greeted)
        log::warning(kLog, "bulk channel " + std::to_string(c->second.channel) + ": " + why);
      else
        log::warning(kLog, "refused a TLS bulk connection: " + why);
      c->second.session = nullptr; // it ended itself
      drop_conn(self, *st, hdl);
      self->close(hdl);
    },
    // A consumer of this process opens an in-process channel (no socket): the frames go to it
    // as (bulk_frame_atom, its channel, frame) messages, header included, each in one buffer
    // (the consumer decodes in place: one copy of the payload).
    [=](msg::bulk_open_atom, const caf::actor& consumer, uint64_t consumer_channel) {
      const uint64_t channel = st->new_channel_id();
      st->local[channel] = ServerState::Local{consumer, consumer_channel};
      self->monitor(consumer);
      log::debug(kLog, "in-process bulk channel " + std::to_string(channel) + " opened");
      self->send(consumer, msg::bulk_ready_atom_v, consumer_channel, channel);
    },
    [=](msg::bulk_send_atom, uint64_t channel, GatherBuffer& frame) {
      if (auto l = st->local.find(channel); l != st->local.end()) {
        self->send(l->second.consumer, msg::bulk_frame_atom_v, l->second.consumer_channel,
                   frame.flatten());
        return;
      }
      auto ch = st->channels.find(channel);
      if (ch == st->channels.end()) {
        // The channel closed: its consumer saw that too and fails what it waited for.
        log::debug(kLog, "frame for closed bulk channel " + std::to_string(channel) + " dropped");
        return;
      }
      auto& group = ch->second;
      const connection_handle hdl = group.conns[group.next++ % group.conns.size()];
      auto& conn = st->conns[hdl];
      if (conn.session) {
        self->send(conn.session, msg::bulk_send_atom_v, std::move(frame)); // to encrypt
        return;
      }
      st->writer->send(conn.writer_key, std::move(frame));
    },
    [=](const caf::io::connection_closed_msg& msg) {
      log::debug(kLog, "bulk connection closed");
      drop_conn(self, *st, msg.handle);
    },
    [=](const caf::io::acceptor_closed_msg&) { self->quit(); },
  };
}

// --- consumer side

// Connections per channel: TLS spreads a channel over several, each its own session (so several
// threads encrypt and decrypt one worker's frames); plain TCP needs one (its cost is the kernel's
// copy, which one connection keeps up with). 16-core machine, 1 MiB elements, 2 workers: one
// TLS connection per worker moved ~1.3 GB/s each, its two sessions the limit.
constexpr std::size_t kTlsConnectionsPerChannel = 4;

struct ClientConn {
  uint64_t channel = 0;
  bulk::StreamReader reader; // plain TCP (TLS: the session has its own)
  caf::actor session;        // TLS bulk path only (net/bulk_tls.hpp)
  // TLS: the socket is read one whole record at a time (net/bulk_seal.hpp).
  std::optional<bulk::RecordHeader> body;   // reading this record's body (else the next header)
  bool sealed_ok = false;                   // the session has the ack: sealed records may come
  std::optional<bulk::RecordHeader> parked; // a sealed record's header that came before that
};

// A channel to one worker: its connections, the first opening it, the others joining it.
struct ClientChannel {
  std::string host;
  uint16_t port = 0;
  std::vector<connection_handle> conns;
  uint64_t server_channel = 0; // the worker's id, from the first ack
  std::size_t acked = 0;
};

struct ClientState {
  caf::actor consumer;
  std::shared_ptr<TlsEndpoint> tls; // null: plain TCP
  std::map<connection_handle, ClientConn> conns;
  std::map<uint64_t, ClientChannel> channels; // by the consumer's channel id
  std::size_t connections_per_channel() const { return tls ? kTlsConnectionsPerChannel : 1; }
};

// The channel is gone, with all its connections: the consumer hears it (from each TLS session,
// after the frames it still decrypts; the consumer takes the first).
void lost_channel(caf::io::broker* self, ClientState& st, uint64_t channel,
                  const std::string& why) {
  auto ch = st.channels.find(channel);
  if (ch == st.channels.end())
    return;
  bool told = false;
  for (auto hdl : ch->second.conns) {
    auto c = st.conns.find(hdl);
    if (c == st.conns.end())
      continue;
    if (c->second.session) {
      self->send(c->second.session, msg::bulk_lost_atom_v, why);
      told = true;
    }
    self->close(hdl);
    st.conns.erase(c);
  }
  if (!told)
    self->send(st.consumer, msg::bulk_lost_atom_v, channel, why);
  st.channels.erase(ch);
}

void lost(caf::io::broker* self, ClientState& st, connection_handle hdl, const std::string& why) {
  auto c = st.conns.find(hdl);
  if (c != st.conns.end())
    lost_channel(self, st, c->second.channel, why);
}

// One more connection of `channel`: opens the channel (join 0) or joins the worker's.
void connect(caf::io::broker* self, ClientState& st, uint64_t channel, uint64_t join) {
  auto& ch = st.channels[channel];
  auto hdl = self->add_tcp_scribe(ch.host, ch.port);
  if (!hdl) {
    lost_channel(self, st, channel,
                 "cannot connect to the bulk port " + ch.host + ":" + std::to_string(ch.port) +
                   ": " + self->system().render(hdl.error()));
    return;
  }
  ch.conns.push_back(*hdl);
  auto& conn = st.conns[*hdl];
  conn.channel = channel;
  if (st.tls) {
    // The session sends the ClientHello, and the hello once the handshake is done.
    conn.session = spawn_tls_bulk_client_session(self, *hdl, st.tls, st.consumer, channel, join);
    self->configure_read(*hdl, receive_policy::exactly(bulk::kRecordHeaderBytes));
    return;
  }
  char hello[bulk::kHelloBytes];
  bulk::write_hello(hello, join);
  write_out(self, *hdl, hello, sizeof hello);
  self->configure_read(*hdl, receive_policy::exactly(conn.reader.next_size()));
}

// A connection of `channel` was acknowledged: after the first, the others join the worker's
// channel; once all are in, the consumer may use it.
void on_ack(caf::io::broker* self, ClientState& st, uint64_t channel, uint64_t assigned) {
  auto ch = st.channels.find(channel);
  if (ch == st.channels.end())
    return;
  if (ch->second.acked > 0 && assigned != ch->second.server_channel)
    return lost_channel(self, st, channel,
                        "the worker put a joining bulk connection on another channel");
  ch->second.server_channel = assigned;
  const std::size_t want = st.connections_per_channel();
  if (++ch->second.acked == want) {
    self->send(st.consumer, msg::bulk_ready_atom_v, channel, assigned);
    return;
  }
  if (ch->second.acked == 1) // (connect() drops the channel when a connection cannot open)
    for (std::size_t i = 1; i < want && st.channels.count(channel) > 0; ++i)
      connect(self, st, channel, assigned);
}

// TLS: reads the body of the record `h` announced. A sealed record's body goes into a pooled
// buffer of its size (mapped memory, nothing zero-filled) that the session decrypts in place and
// hands on as the elements' storage.
void read_record_body(caf::io::broker* self, connection_handle hdl, ClientConn& conn,
                      const bulk::RecordHeader& h, std::vector<char>& buf) {
  conn.body = h;
  if (h.sealed)
    buf = BufferPool::global().acquire(h.body, true);
  self->configure_read(hdl, receive_policy::exactly(h.body));
}

// TLS: a record's header or body arrived. A sealed record before the session has the worker's
// ack (and with it the keys) waits, the connection halted, so that nothing unauthenticated
// makes this node reserve a frame's buffer.
void on_tls_bytes(caf::io::broker* self, ClientState& st, connection_handle hdl, ClientConn& conn,
                  std::vector<char>& buf) {
  if (conn.body) {
    const bool sealed = conn.body->sealed;
    conn.body.reset();
    std::vector<char> bytes;
    bytes.swap(buf);
    if (sealed)
      self->send(conn.session, msg::tls_sealed_atom_v, std::move(bytes));
    else
      self->send(conn.session, msg::tls_in_atom_v, std::move(bytes));
    self->configure_read(hdl, receive_policy::exactly(bulk::kRecordHeaderBytes));
    return;
  }
  bulk::RecordHeader h;
  if (auto bad = bulk::read_record_header(buf.data(), h))
    return lost(self, st, hdl, "protocol error on the TLS bulk stream: " + *bad);
  if (!h.sealed) // OpenSSL reads the record whole: its header first
    self->send(conn.session, msg::tls_in_atom_v, std::vector<char>(buf.begin(), buf.end()));
  if (h.sealed && !conn.sealed_ok) {
    conn.parked = h;
    self->halt(hdl);
    return;
  }
  read_record_body(self, hdl, conn, h, buf);
}

caf::behavior bulk_client(caf::io::broker* self, caf::actor consumer,
                          std::shared_ptr<TlsEndpoint> tls) {
  auto st = std::make_shared<ClientState>();
  st->consumer = consumer;
  st->tls = std::move(tls);
  self->monitor(consumer);
  // The consumer ended: close on the multiplexer's next turn, not now. It may have asked for a
  // connection in the message just before, and CAF 0.17.6 leaks a connection that is opened and
  // closed before the multiplexer registered it (its read registration is merged away, so the
  // stream never drops its reference to the connection).
  self->set_down_handler([self](caf::down_msg&) {
    auto me = caf::actor_cast<caf::actor>(self);
    self->backend().post([me] { caf::anon_send_exit(me, caf::exit_reason::user_shutdown); });
  }); // (a broker's exit closes its connections; the TLS sessions end with it)
  return {
    [=](msg::bulk_open_atom, const std::string& host, uint16_t port, uint64_t channel) {
      auto& ch = st->channels[channel];
      ch.host = host;
      ch.port = port;
      connect(self, *st, channel, 0);
    },
    [=](caf::io::new_data_msg& msg) {
      auto c = st->conns.find(msg.handle);
      if (c == st->conns.end())
        return;
      auto& conn = c->second;
      if (conn.session)
        return on_tls_bytes(self, *st, msg.handle, conn, msg.buf);
      // Plain TCP: CAF reads exactly one unit per message. CAF swaps msg.buf back in as the
      // connection's read buffer: for a payload, deliver_unit left a pooled buffer of that
      // length there (no fresh pages, nothing zero-filled).
      const uint64_t channel = conn.channel;
      auto result = deliver_unit(self, st->consumer, channel, conn.reader, msg.buf);
      if (result.broken)
        return lost(self, *st, msg.handle, *result.broken);
      self->configure_read(msg.handle, receive_policy::exactly(conn.reader.next_size()));
      if (result.ready)
        on_ack(self, *st, channel, *result.ready);
    },
    // TLS: a session's ack.
    [=](msg::bulk_ready_atom, uint64_t channel, uint64_t assigned) {
      on_ack(self, *st, channel, assigned);
    },
    // TLS: the session has the worker's ack: sealed records may come (and one may be waiting).
    [=](msg::tls_sealed_atom, connection_handle hdl) {
      auto c = st->conns.find(hdl);
      if (c == st->conns.end())
        return;
      auto& conn = c->second;
      conn.sealed_ok = true;
      if (!conn.parked)
        return;
      std::vector<char> buf;
      read_record_body(self, hdl, conn, *conn.parked, buf); // (CAF reads into its own buffer)
      conn.parked.reset();
      self->trigger(hdl);
    },
    // TLS: the session's records (handshake, the hello) for the socket.
    [=](msg::tls_out_atom, connection_handle hdl, const std::vector<char>& ciphertext) {
      if (st->conns.count(hdl) > 0)
        write_out(self, hdl, ciphertext.data(), ciphertext.size());
    },
    // TLS: a session failed (it told the consumer) and ended: the channel's other connections go.
    [=](msg::bulk_lost_atom, connection_handle hdl, const std::string& why) {
      auto c = st->conns.find(hdl);
      if (c == st->conns.end())
        return;
      c->second.session = nullptr;
      lost(self, *st, hdl, why);
    },
    [=](const caf::io::connection_closed_msg& msg) {
      lost(self, *st, msg.handle, "the worker closed the bulk connection");
    },
  };
}

} // namespace

caf::expected<BulkServer> spawn_tcp_bulk_server(caf::actor_system& sys, const std::string& host,
                                                uint16_t port, std::shared_ptr<TlsEndpoint> tls) {
  auto broker = sys.middleman().spawn_broker(bulk_server, host, port, std::move(tls));
  caf::scoped_actor self{sys};
  caf::expected<BulkServer> result{caf::sec::request_timeout};
  self->request(broker, std::chrono::seconds(5), caf::get_atom_v)
    .receive(
      [&](uint16_t port) {
        result = BulkServer{broker, port};
      },
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
