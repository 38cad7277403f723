// TLS session actors of the bulk data path (overview in actors/bulk_tls.hpp).
#include "actors/bulk_tls.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/home_scheduled.hpp"
#include "actors/tls_stream.hpp"
#include "messages/all.hpp"
#include "pipeline/buffer_pool.hpp"

namespace conveyor::actors {

using caf::io::connection_handle;

namespace {

// Off the I/O thread (the point of a session actor; actors/home_scheduled.hpp).
using Session = PoolScheduled<caf::event_based_actor>;

// Hands what the session produced (handshake records, encrypted frames) to the broker for the
// socket. The session's output buffer takes the capacity of a pooled buffer in exchange, so the
// next frame's records fit without growing it.
void flush(Session* self, const caf::actor& broker, connection_handle hdl,
           TlsStream& tls, std::size_t expected_bytes) {
  if (!tls.has_output())
    return;
  std::vector<char> out = BufferPool::global().acquire(expected_bytes);
  out.clear();
  tls.take_output(out);
  self->send(broker, msg::tls_out_atom_v, hdl, std::move(out));
}

// Ends the session for a failure of its own: the broker closes the connection.
void fail(Session* self, const caf::actor& broker, connection_handle hdl,
          const std::string& why) {
  self->send(broker, msg::bulk_lost_atom_v, hdl, why);
  self->quit();
}

void end_with_broker(Session* self, const caf::actor& broker) {
  self->monitor(broker);
  self->set_down_handler([self](caf::down_msg&) { self->quit(); });
}

caf::behavior server_session(Session* self, caf::actor broker,
                             connection_handle hdl, std::shared_ptr<TlsEndpoint> endpoint) {
  auto tls = std::make_shared<TlsStream>(std::move(endpoint));
  auto last_frame = std::make_shared<std::size_t>(0); // sizes the next output buffer
  end_with_broker(self, broker);
  return {
    [=](msg::tls_in_atom, std::vector<char>& ciphertext) {
      auto in = tls->receive(std::move(ciphertext));
      // The only plaintext a consumer sends is its hello: more than that is the broker's to refuse.
      std::vector<char> plain(bulk::kHelloBytes + 1);
      Expected<std::size_t> got = std::size_t{0};
      if (in.ok())
        got = tls->read(plain.data(), plain.size());
      flush(self, broker, hdl, *tls, 0); // handshake records (or the alert telling the peer why)
      if (!in.ok() || !got.ok())
        return fail(self, broker, hdl, (in.ok() ? got.status() : in).message());
      if (*got > 0) {
        plain.resize(*got);
        self->send(broker, msg::tls_plain_atom_v, hdl, std::move(plain));
      }
    },
    [=](msg::bulk_send_atom, GatherBuffer& frame) {
      // Encrypted straight from the pieces: a large tensor's storage is read in place.
      Status sent;
      frame.for_each_piece([&](const char* data, std::size_t size) {
        if (sent.ok())
          sent = tls->send(data, size);
      });
      *last_frame = frame.size();
      BufferPool::global().release(std::move(frame.own)); // large only when compressed
      if (!sent.ok())
        return fail(self, broker, hdl, sent.message());
      flush(self, broker, hdl, *tls, *last_frame + *last_frame / 256 + 4096);
    },
    [=](msg::bulk_lost_atom, const std::string&) { self->quit(); },
  };
}

struct ClientSession {
  explicit ClientSession(std::shared_ptr<TlsEndpoint> endpoint) : tls(std::move(endpoint)) {}
  TlsStream tls;
  bulk::StreamReader reader;
  std::vector<char> unit = std::vector<char>(bulk::kAckBytes); // being decrypted into
  std::size_t have = 0;
};

caf::behavior client_session(Session* self, caf::actor broker,
                             connection_handle hdl, std::shared_ptr<TlsEndpoint> endpoint,
                             caf::actor consumer, uint64_t channel, uint64_t join) {
  auto st = std::make_shared<ClientSession>(std::move(endpoint));
  end_with_broker(self, broker);
  // Tells the consumer first (after every frame before the failure), then the broker.
  auto lost = [=](const std::string& why) {
    self->send(consumer, msg::bulk_lost_atom_v, channel, why);
    fail(self, broker, hdl, why);
  };
  char hello[bulk::kHelloBytes];
  bulk::write_hello(hello, join);
  auto sent = st->tls.send(hello, sizeof hello); // held until the handshake is done
  flush(self, broker, hdl, st->tls, 0);          // the ClientHello
  if (!sent.ok()) {
    lost("TLS bulk connection: " + sent.message());
    return {};
  }
  return {
    [=](msg::tls_in_atom, std::vector<char>& ciphertext) {
      auto in = st->tls.receive(std::move(ciphertext));
      flush(self, broker, hdl, st->tls, 0); // handshake records
      for (;;) {
        Expected<std::size_t> got = std::size_t{0};
        if (in.ok())
          got = st->tls.read(st->unit.data() + st->have, st->unit.size() - st->have);
        if (!in.ok() || !got.ok())
          return lost("TLS bulk connection: " + (in.ok() ? got.status() : in).message());
        if (*got == 0)
          return;
        st->have += *got;
        if (st->have < st->unit.size())
          continue;
        auto result = deliver_unit(self, consumer, channel, st->reader, st->unit);
        if (result.broken)
          return lost(*result.broken);
        if (result.ready) // the broker tells the consumer once every connection is acknowledged
          self->send(broker, msg::bulk_ready_atom_v, channel, *result.ready);
        st->have = 0;
      }
    },
    // The broker saw the connection close: the consumer hears it after every frame before.
    [=](msg::bulk_lost_atom, const std::string& why) {
      self->send(consumer, msg::bulk_lost_atom_v, channel, why);
      self->quit();
    },
  };
}

} // namespace

UnitResult deliver_unit(caf::local_actor* self, const caf::actor& consumer, uint64_t channel,
                        bulk::StreamReader& reader, std::vector<char>& unit) {
  UnitResult result;
  auto event = reader.apply(unit);
  if (auto* broken = std::get_if<bulk::StreamReader::Broken>(&event)) {
    result.broken = broken->why;
    return result;
  }
  if (auto* ready = std::get_if<bulk::StreamReader::Ready>(&event)) {
    result.ready = ready->assigned;
  } else if (auto* payload = std::get_if<bulk::StreamReader::Payload>(&event)) {
    const auto& h = payload->header;
    // Moving the unit out: the frame's bytes become the elements' storage.
    caf::send_as(caf::actor_cast<caf::actor>(self), consumer, msg::bulk_frame_atom_v, channel,
                 h.task, h.batch_seq, h.index, h.count, std::move(unit));
  }
  if (reader.payload_next()) {
    // A pooled buffer at least this long already: resizing it zero-fills nothing, and it is
    // mapped memory (no page faults).
    auto payload = BufferPool::global().acquire(reader.next_size(), true);
    unit.swap(payload);
  }
  unit.resize(reader.next_size());
  return result;
}

caf::actor spawn_tls_bulk_server_session(caf::io::abstract_broker* broker, connection_handle hdl,
                                         std::shared_ptr<TlsEndpoint> tls) {
  return broker->spawn(server_session, caf::actor_cast<caf::actor>(broker), hdl, std::move(tls));
}

caf::actor spawn_tls_bulk_client_session(caf::io::abstract_broker* broker, connection_handle hdl,
                                         std::shared_ptr<TlsEndpoint> tls, caf::actor consumer,
                                         uint64_t channel, uint64_t join) {
  return broker->spawn(client_session, caf::actor_cast<caf::actor>(broker), hdl, std::move(tls),
                       std::move(consumer), channel, join);
}

} // namespace conveyor::actors
