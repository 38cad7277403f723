// TLS session actors of the bulk data path (overview in net/bulk_tls.hpp).
#include "net/bulk_tls.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "net/bulk_seal.hpp"
#include "net/bulk_writer.hpp"
#include "node/home_scheduled.hpp"
#include "net/tls_stream.hpp"
#include "messages/all.hpp"
#include "pipeline/tensor/buffer_pool.hpp"

namespace conveyor::actors {

using caf::io::connection_handle;

namespace {

// Off the I/O thread (the point of a session actor; node/home_scheduled.hpp).
using Session = PoolScheduled<caf::event_based_actor>;

// Hands the TLS records the session produced (handshake, hello, ack, alerts) to the broker for
// the socket.
void flush(Session* self, const caf::actor& broker, connection_handle hdl, TlsStream& tls) {
  if (!tls.has_output())
    return;
  std::vector<char> out;
  tls.take_output(out);
  self->send(broker, msg::tls_out_atom_v, hdl, std::move(out));
}

// Ends the session for a failure of its own: the broker closes the connection.
void fail(Session* self, const caf::actor& broker, connection_handle hdl, const std::string& why) {
  self->send(broker, msg::bulk_lost_atom_v, hdl, why);
  self->quit();
}

void end_with_broker(Session* self, const caf::actor& broker) {
  self->monitor(broker);
  self->set_down_handler([self](caf::down_msg&) { self->quit(); });
}

caf::behavior server_session(Session* self, caf::actor broker, connection_handle hdl,
                             std::shared_ptr<TlsEndpoint> endpoint,
                             std::shared_ptr<BulkWriter> writer, uint64_t writer_key) {
  auto tls = std::make_shared<TlsStream>(std::move(endpoint));
  // Set once the ack went out: every frame after it is a sealed record.
  auto cipher = std::make_shared<std::unique_ptr<RecordCipher>>();
  end_with_broker(self, broker);
  return {
    [=](msg::tls_in_atom, std::vector<char>& ciphertext) {
      auto in = tls->receive(std::move(ciphertext));
      // The only plaintext a consumer sends is its hello: more than that is the broker's to refuse.
      std::vector<char> plain(bulk::kHelloBytes + 1);
      Expected<std::size_t> got = std::size_t{0};
      if (in.ok())
        got = tls->read(plain.data(), plain.size());
      flush(self, broker, hdl, *tls); // handshake records (or the alert telling the peer why)
      if (!in.ok() || !got.ok())
        return fail(self, broker, hdl, (in.ok() ? got.status() : in).message());
      if (*got > 0) {
        plain.resize(*got);
        self->send(broker, msg::tls_plain_atom_v, hdl, std::move(plain));
      }
    },
    // The ack: the last TLS record this side sends; then the keys of the sealed records.
    [=](msg::tls_plain_atom, const std::vector<char>& ack) {
      auto sent = tls->send(ack.data(), ack.size());
      GatherBuffer record;
      tls->take_output(record.own);
      writer->send(writer_key, std::move(record)); // the broker added the connection first
      auto keys =
        sent.ok() ? RecordCipher::create(*tls) : Expected<std::unique_ptr<RecordCipher>>(sent);
      if (!keys.ok())
        return fail(self, broker, hdl, keys.status().message());
      *cipher = std::move(*keys);
    },
    [=](msg::bulk_send_atom, GatherBuffer& frame) {
      if (!*cipher || frame.size() <= bulk::kFrameHeaderBytes)
        return fail(self, broker, hdl,
                    "internal error: a bulk frame before the ack or without a payload");
      // Header and payload are a record each: the consumer reads each into a buffer of its own,
      // and the payload's becomes the elements' storage. Encrypted straight from the pieces (a
      // large tensor's storage is read in place) into the buffer the socket writes.
      const std::size_t payload = frame.size() - bulk::kFrameHeaderBytes;
      const std::size_t total =
        bulk::sealed_size(bulk::kFrameHeaderBytes) + bulk::sealed_size(payload);
      std::vector<char> out = BufferPool::global().acquire(total, true);
      out.resize(total); // a recycled one is this long already: nothing zero-filled
      auto header = (*cipher)->seal(frame, 0, bulk::kFrameHeaderBytes, out.data());
      auto body = header.ok() ? (*cipher)->seal(frame, bulk::kFrameHeaderBytes, frame.size(),
                                                out.data() + *header)
                              : header;
      BufferPool::global().release(std::move(frame.own)); // large only when compressed
      if (!body.ok())
        return fail(self, broker, hdl, "cannot seal a bulk frame: " + body.status().message());
      // Straight to the writer's thread, which releases `out` to the pool once written (its
      // length kept: the next frame's acquire finds it filled, nothing to zero).
      GatherBuffer sealed;
      sealed.own = std::move(out);
      writer->send(writer_key, std::move(sealed));
    },
    [=](msg::bulk_lost_atom, const std::string&) { self->quit(); },
  };
}

struct ClientSession {
  explicit ClientSession(std::shared_ptr<TlsEndpoint> endpoint) : tls(std::move(endpoint)) {}
  TlsStream tls;
  bulk::StreamReader reader;
  std::vector<char> ack = std::vector<char>(bulk::kAckBytes); // being decrypted into
  std::size_t have = 0;
  std::unique_ptr<RecordCipher> cipher; // from the ack on
};

caf::behavior client_session(Session* self, caf::actor broker, connection_handle hdl,
                             std::shared_ptr<TlsEndpoint> endpoint, caf::actor consumer,
                             uint64_t channel, uint64_t join) {
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
  flush(self, broker, hdl, st->tls);             // the ClientHello
  if (!sent.ok()) {
    lost("TLS bulk connection: " + sent.message());
    return {};
  }
  return {
    // TLS records: the handshake and the ack.
    [=](msg::tls_in_atom, std::vector<char>& ciphertext) {
      if (st->cipher) // (no tickets, no key updates, no close_notify: the worker just closes)
        return lost("protocol error on the TLS bulk stream: a TLS record after the worker's ack");
      auto in = st->tls.receive(std::move(ciphertext));
      flush(self, broker, hdl, st->tls); // handshake records
      Expected<std::size_t> got = std::size_t{0};
      if (in.ok())
        got = st->tls.read(st->ack.data() + st->have, st->ack.size() - st->have);
      if (!in.ok() || !got.ok())
        return lost("TLS bulk connection: " + (in.ok() ? got.status() : in).message());
      st->have += *got;
      if (st->have < st->ack.size())
        return;
      auto result = deliver_unit(self, consumer, channel, st->reader, std::move(st->ack));
      if (result.broken)
        return lost(*result.broken);
      auto keys = RecordCipher::create(st->tls);
      if (!keys.ok())
        return lost("TLS bulk connection: " + keys.status().message());
      st->cipher = std::move(*keys);
      self->send(broker, msg::tls_sealed_atom_v, hdl); // the broker may read sealed records now
      self->send(broker, msg::bulk_ready_atom_v, channel, *result.ready);
    },
    // A sealed record's body (a frame header, or a payload: then it becomes the elements' storage).
    [=](msg::tls_sealed_atom, std::vector<char>& body) {
      if (!st->cipher)
        return lost(
          "protocol error on the TLS bulk stream: a sealed record before the worker's ack");
      if (auto opened = st->cipher->open(body); !opened.ok())
        return lost("TLS bulk connection: " + opened.message());
      if (body.size() != st->reader.next_size())
        return lost("protocol error on the TLS bulk stream: a sealed record of " +
                    std::to_string(body.size()) + " bytes where the frame needs " +
                    std::to_string(st->reader.next_size()));
      auto result = deliver_unit(self, consumer, channel, st->reader, std::move(body));
      if (result.broken)
        return lost(*result.broken);
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
                        bulk::StreamReader& reader, std::vector<char>&& unit) {
  UnitResult result;
  auto event = reader.apply(unit);
  if (auto* broken = std::get_if<bulk::StreamReader::Broken>(&event)) {
    result.broken = broken->why;
  } else if (auto* ready = std::get_if<bulk::StreamReader::Ready>(&event)) {
    result.ready = ready->assigned;
  } else if (auto* payload = std::get_if<bulk::StreamReader::Payload>(&event)) {
    const auto& h = payload->header;
    // Moving the unit out: the frame's bytes become the elements' storage.
    caf::send_as(caf::actor_cast<caf::actor>(self), consumer, msg::bulk_frame_atom_v, channel,
                 h.task, h.batch_seq, h.index, h.count, std::move(unit));
  }
  return result;
}

UnitResult deliver_unit(caf::local_actor* self, const caf::actor& consumer, uint64_t channel,
                        bulk::StreamReader& reader, std::vector<char>& unit) {
  auto result = deliver_unit(self, consumer, channel, reader, std::move(unit));
  if (result.broken)
    return result;
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
                                         std::shared_ptr<TlsEndpoint> tls,
                                         std::shared_ptr<BulkWriter> writer, uint64_t writer_key) {
  return broker->spawn(server_session, caf::actor_cast<caf::actor>(broker), hdl, std::move(tls),
                       std::move(writer), writer_key);
}

caf::actor spawn_tls_bulk_client_session(caf::io::abstract_broker* broker, connection_handle hdl,
                                         std::shared_ptr<TlsEndpoint> tls, caf::actor consumer,
                                         uint64_t channel, uint64_t join) {
  return broker->spawn(client_session, caf::actor_cast<caf::actor>(broker), hdl, std::move(tls),
                       std::move(consumer), channel, join);
}

} // namespace conveyor::actors
