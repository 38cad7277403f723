// TLS sessions of the bulk data path (net/bulk.hpp): one actor per TLS connection, which
// owns its TlsStream (net/tls_stream.hpp) and does its encryption or decryption.
//
// Why not in the brokers: every caf::io broker of a node runs on the middleman's one I/O thread,
// so with the sessions inside them one core encrypted and decrypted every connection's bytes
// (`bench service --tls`: TLS at a third of plain TCP). Session actors run on the scheduler's
// threads, so connections encrypt and decrypt in parallel, and the brokers only move bytes
// between sockets and sessions. Frames keep their order: each hop is one sender to one receiver.
//
// A connection speaks TLS until the worker's ack, then carries sealed records (net/bulk_seal.hpp):
// the worker seals each frame from its pieces into the buffer the socket writes; the consumer's
// broker reads each record whole into a buffer of its size, and the session opens it in place.
//
// Messages (all local to one node; `hdl` is the session's connection):
//   broker  -> session  (tls_in_atom, vector<char> ciphertext)           TLS bytes the socket read
//   session -> broker   (tls_out_atom, hdl, vector<char> ciphertext)     handshake records (and
//                                                                        alerts) for the socket
//   broker  -> session  (bulk_lost_atom, string why)                     the connection is gone
//   session -> broker   (bulk_lost_atom, hdl, string why)                TLS or the stream failed:
//                                                                        close the connection
//  worker side:
//   session -> broker   (tls_plain_atom, hdl, vector<char>)              the consumer's hello
//   broker  -> session  (tls_plain_atom, vector<char> ack)               the ack, the last TLS record
//   broker  -> session  (bulk_send_atom, GatherBuffer frame)             a frame, to seal
//   (the ack's record and the sealed frames go from the session straight to the worker's
//   BulkWriter, net/bulk_writer.hpp, which writes them from its own thread, in order)
//  consumer side:
//   session -> broker   (tls_sealed_atom, hdl)                           the ack is in: read sealed
//                                                                        records from now on
//   broker  -> session  (tls_sealed_atom, vector<char> body)             one sealed record's body
//   session -> broker   (bulk_ready_atom, channel, assigned)             the worker's ack
//   session -> consumer (bulk_frame_atom, ...), (bulk_lost_atom, ...): as the plain broker sends
//                       them, in the stream's order
// A session ends with its connection, or when its broker does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/io/connection_handle.hpp>

#include "net/bulk_stream_reader.hpp"

namespace caf::io {
class abstract_broker;
}

namespace conveyor::actors {

class BulkWriter;
class TlsEndpoint;

// The worker's end of a connection a consumer opened. From the ack on it hands its records
// straight to `writer` (under `writer_key`, which the broker adds before it sends the ack).
caf::actor spawn_tls_bulk_server_session(caf::io::abstract_broker* broker,
                                         caf::io::connection_handle hdl,
                                         std::shared_ptr<TlsEndpoint> tls,
                                         std::shared_ptr<BulkWriter> writer, uint64_t writer_key);
// The consumer's end: starts the handshake, sends the hello (joining the worker's channel `join`
// unless 0), then delivers the worker's frames to `consumer` on `channel`.
caf::actor spawn_tls_bulk_client_session(caf::io::abstract_broker* broker,
                                         caf::io::connection_handle hdl,
                                         std::shared_ptr<TlsEndpoint> tls, caf::actor consumer,
                                         uint64_t channel, uint64_t join);

// One complete unit of a connection's stream (the plain broker and the TLS client session share
// it): a payload becomes a bulk_frame for `consumer` that takes `unit` (the bytes become the
// elements' storage).
struct UnitResult {
  std::optional<uint64_t> ready;     // the ack: the worker's id of the channel
  std::optional<std::string> broken; // why the channel must close
};
UnitResult deliver_unit(caf::local_actor* self, const caf::actor& consumer, uint64_t channel,
                        bulk::StreamReader& reader, std::vector<char>&& unit);
// The same, reading into one buffer (plain TCP): unless `broken` is set, `unit` then holds a
// buffer for the next unit, next_size() bytes long (a payload's from the pool).
UnitResult deliver_unit(caf::local_actor* self, const caf::actor& consumer, uint64_t channel,
                        bulk::StreamReader& reader, std::vector<char>& unit);

} // namespace conveyor::actors
