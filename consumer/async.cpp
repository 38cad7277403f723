// The asynchronous consumer API (conveyor/async.hpp): a consumer actor that bootstraps itself
// and pushes to the caller's sink actor.
#include "conveyor/async.hpp"

#include <caf/send.hpp>

#include "consumer/consumer_actor.hpp"
#include "consumer/element_sink.hpp"
#include "net/transport.hpp"
#include "messages/all.hpp"
#include "pipeline/graph/serialize.hpp"

namespace conveyor {

namespace {

class ActorSink : public actors::ElementSink {
public:
  explicit ActorSink(msg::stream_sink_actor sink) : sink_(std::move(sink)) {}

  void attach(const msg::stream_actor& stream) override { stream_ = stream; }

  Status push(actors::ReadyElements&& ready, const msg::stream_stats&) override {
    std::vector<Element> elements;
    Status decoded = ready.take(elements); // (on the consumer actor's thread)
    if (!elements.empty())
      caf::anon_send(sink_, msg::stream_batch{std::move(elements), false, Status::OK(), stream_});
    return decoded;
  }

  void finish(Status status) override {
    bool end = status.ok();
    caf::anon_send(sink_, msg::stream_batch{{}, end, std::move(status), stream_});
  }

private:
  msg::stream_sink_actor sink_;
  msg::stream_actor stream_;
};

} // namespace

msg::stream_actor spawn_element_stream(caf::actor_system& sys, msg::stream_sink_actor sink,
                                       const std::string& dispatcher_address, StreamSource source,
                                       DistributeOptions options, ClientConfig client) {
  auto fail_now = [&](Status s) {
    caf::anon_send(sink, msg::stream_batch{{}, false, std::move(s), {}});
    return msg::stream_actor{};
  };
  if (auto s = validate(options); !s.ok())
    return fail_now(s);
  if (options.deterministic) // the blocking ElementStream reorders; a sink actor gets arrivals
    return fail_now(invalid_argument("`deterministic` is read through the blocking "
                                     "ElementStream (Client::distribute), not a sink actor"));
  if (auto s = validate_security(client.network); !s.ok())
    return fail_now(s);
  auto start = actors::consumer_start(options, actors::make_transport(sys, client.network),
                                      client.connect_timeout, client.protocol_version);
  start.auth_token = client.network.auth_token;
  if (source.dataset) {
    if (auto s = source.dataset->validate(); !s.ok())
      return fail_now(s);
    start.definition = to_binary(*source.dataset);
  } else if (source.dataset_id.empty()) {
    return fail_now(invalid_argument("`dataset_id` must not be empty"));
  }
  start.sink = std::make_shared<ActorSink>(std::move(sink));
  start.dispatcher_address = dispatcher_address;
  start.job_request.dataset = source.dataset_id;
  return actors::spawn_consumer(sys, std::move(start));
}

} // namespace conveyor
