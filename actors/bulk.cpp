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
};

struct ServerState {
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
  while (!q.empty()) {
    auto& wb = self->wr_buf(hdl);
    if (!wb.empty())
      break;
    wb.swap(q.front());
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

caf::behavior bulk_server(caf::io::broker* self, std::string host) {
  auto st = std::make_shared<ServerState>();
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
      st->conns[msg.handle];
      self->ack_writes(msg.handle, true);
      self->configure_read(msg.handle, receive_policy::exactly(bulk::kHelloBytes));
    },
    [=](caf::io::new_data_msg& msg) {
      auto c = st->conns.find(msg.handle);
      if (c == st->conns.end())
        return;
      if (c->second.greeted || !bulk::read_hello(msg.buf.data(), msg.buf.size())) {
        // a consumer never sends anything else
        log::warning(kLog, "closing a bulk connection that sent something other than one hello");
        drop_conn(*st, msg.handle);
        self->close(msg.handle);
        return;
      }
      const uint64_t channel = ++st->next_channel;
      c->second.greeted = true;
      c->second.channel = channel;
      st->channels[channel] = msg.handle;
      log::debug(kLog, "bulk channel " + std::to_string(channel) + " opened");
      auto& wb = self->wr_buf(msg.handle);
      wb.resize(bulk::kAckBytes);
      bulk::write_ack(wb.data(), channel);
      self->flush(msg.handle);
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
};

struct ClientState {
  caf::actor consumer;
  std::map<connection_handle, ClientConn> conns;
};

void lost(caf::io::broker* self, ClientState& st, connection_handle hdl, const std::string& why) {
  auto c = st.conns.find(hdl);
  if (c == st.conns.end())
    return;
  self->send(st.consumer, msg::bulk_lost_atom_v, c->second.channel, why);
  st.conns.erase(c);
}

caf::behavior bulk_client(caf::io::broker* self, caf::actor consumer) {
  auto st = std::make_shared<ClientState>();
  st->consumer = consumer;
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
      st->conns[*hdl].channel = channel;
      auto& wb = self->wr_buf(*hdl);
      wb.resize(bulk::kHelloBytes);
      bulk::write_hello(wb.data());
      self->flush(*hdl);
      self->configure_read(*hdl, receive_policy::exactly(bulk::kAckBytes));
    },
    [=](caf::io::new_data_msg& msg) {
      auto c = st->conns.find(msg.handle);
      if (c == st->conns.end())
        return;
      auto& conn = c->second;
      switch (conn.phase) {
        case ClientConn::Phase::ack: {
          auto assigned = bulk::read_ack(msg.buf.data(), msg.buf.size());
          if (!assigned) {
            self->close(msg.handle);
            lost(self, *st, msg.handle, "the worker answered the bulk hello with something else");
            return;
          }
          self->send(st->consumer, msg::bulk_ready_atom_v, conn.channel, *assigned);
          conn.phase = ClientConn::Phase::header;
          self->configure_read(msg.handle, receive_policy::exactly(bulk::kFrameHeaderBytes));
          return;
        }
        case ClientConn::Phase::header:
          if (auto bad = bulk::read_frame_header(msg.buf.data(), msg.buf.size(), conn.header)) {
            self->close(msg.handle);
            lost(self, *st, msg.handle, "protocol error on the bulk stream: " + *bad);
            return;
          }
          conn.phase = ClientConn::Phase::payload;
          self->configure_read(msg.handle,
                               receive_policy::exactly(static_cast<std::size_t>(conn.header.length)));
          // CAF swaps msg.buf back in as the connection's read buffer and resizes it to the
          // payload's length: a pooled buffer with that capacity is resized in place (no fresh
          // pages; nothing zero-filled when it was at least that long already), and becomes the
          // elements' storage below.
          {
            auto payload =
              BufferPool::global().acquire(static_cast<std::size_t>(conn.header.length), true);
            msg.buf.swap(payload);
          }
          return;
        case ClientConn::Phase::payload: {
          const auto& h = conn.header;
          // Moving CAF's read buffer out: the frame's bytes become the elements' storage.
          self->send(st->consumer, msg::bulk_frame_atom_v, conn.channel, h.task, h.batch_seq, h.index,
                     h.count, std::move(msg.buf));
          conn.phase = ClientConn::Phase::header;
          self->configure_read(msg.handle, receive_policy::exactly(bulk::kFrameHeaderBytes));
          return;
        }
      }
    },
    [=](const caf::io::connection_closed_msg& msg) {
      lost(self, *st, msg.handle, "the worker closed the bulk connection");
    },
  };
}

} // namespace

caf::expected<BulkServer> spawn_tcp_bulk_server(caf::actor_system& sys, const std::string& host) {
  auto broker = sys.middleman().spawn_broker(bulk_server, host);
  caf::scoped_actor self{sys};
  caf::expected<BulkServer> result{caf::sec::request_timeout};
  self->request(broker, std::chrono::seconds(5), caf::get_atom_v)
    .receive([&](uint16_t port) { result = BulkServer{broker, port}; },
             [&](caf::error& err) { result = std::move(err); });
  if (!result)
    caf::anon_send_exit(broker, caf::exit_reason::user_shutdown);
  return result;
}

caf::actor spawn_tcp_bulk_client(caf::actor_system& sys, const caf::actor& consumer) {
  return sys.middleman().spawn_broker(bulk_client, consumer);
}

} // namespace conveyor::actors
