// The consumer API: the reference's register_dataset / distribute / from_dataset_id in C++
// (003_3cbebc871b174894.txt). No CAF in this header; code that is itself a CAF actor uses
// conveyor/async.hpp instead.
//
//   auto client = Client::connect("127.0.0.1:5050");            // bounded connect
//   if (!client) return client.status();
//   DistributeOptions opts;
//   opts.policy = ShardingPolicy::dynamic;
//   auto stream = client->distribute(Dataset::range(10), opts);
//   for (const Element& e : *stream) std::cout << e.to_string() << "\n";
//   if (!stream->status().ok()) ...                              // why iteration stopped early
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "conveyor/options.hpp"
#include "conveyor/dataset.hpp"
#include "conveyor/element.hpp"
#include "conveyor/stats.hpp"
#include "conveyor/status.hpp"

namespace conveyor {

namespace detail {
class ClientContext;
class StreamContext;
} // namespace detail

struct ClientConfig {
  // Bound on connecting to the dispatcher and the version handshake: an unreachable or frozen
  // dispatcher gives unavailable / deadline_exceeded after at most this long.
  std::chrono::milliseconds connect_timeout{5000};
  // Bound on each request to the dispatcher (register_dataset, job creation).
  std::chrono::milliseconds request_timeout{10000};
  uint32_t protocol_version = 0; // 0 = this build's version
  NetworkConfig network;
};

// The elements of one job, pulled from the workers. Move-only. Destroying it leaves the job
// (a private job is then released).
class ElementStream {
public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{60000};

  ElementStream(ElementStream&&) noexcept;
  ElementStream& operator=(ElementStream&&) noexcept;
  ~ElementStream();

  // Blocks up to `timeout` for the next element. OK with end_of_sequence = false: `out` holds
  // it; OK with end_of_sequence = true: every task reached its end. deadline_exceeded: nothing
  // arrived in time (the stream stays usable: call again). Any other error is final.
  // Small elements are decoded into `out`: passing the same Element each time reuses its memory.
  Status next(Element& out, bool& end_of_sequence,
              std::chrono::milliseconds timeout = kDefaultTimeout);

  // Range-for over the elements; iteration stops at the end or at the first error
  // (see status()).
  class iterator {
  public:
    using value_type = Element;
    iterator() = default;
    const Element& operator*() const { return current_; }
    const Element* operator->() const { return &current_; }
    iterator& operator++();
    friend bool operator==(const iterator& a, const iterator& b) { return a.stream_ == b.stream_; }
    friend bool operator!=(const iterator& a, const iterator& b) { return !(a == b); }

  private:
    friend class ElementStream;
    explicit iterator(ElementStream* s) : stream_(s) { ++*this; }
    ElementStream* stream_ = nullptr;
    Element current_;
  };
  iterator begin() { return iterator{this}; }
  iterator end() { return iterator{}; }

  // Stops the stream from any thread, also while next() blocks in another: that call returns
  // `cancelled` at once, and so does every later one (elements already received are dropped).
  // The stream leaves its job as on destruction (a private job is then released; a named job's
  // other consumers read on). Idempotent. Not to be called concurrently with a move of the stream.
  void cancel();

  // A read cursor (issue 36): a small versioned blob naming exactly the elements next() has
  // handed out so far — the dataset's fingerprint, the job's split size and, per DYNAMIC split,
  // how many of its elements were consumed (splits consumed whole are kept as intervals). Store
  // it with the model; DistributeOptions::resume_from continues the epoch with exactly the
  // elements it does not cover, in a new job (also on a restarted cluster). Received but not yet
  // handed out elements are not covered: they come again. failed_precondition for a read that
  // cannot be resumed: not DYNAMIC, a named job (its elements are shared among its consumers),
  // or a pipeline whose elements do not name their split (docs/SEMANTICS.md "Resumable reads").
  Expected<std::string> checkpoint() const;
  // Elements handed out over the whole read, the resumed-from attempts' included (0 when the
  // read has no cursor).
  int64_t consumed_total() const;

  // The error that stopped range-for iteration; OK otherwise.
  const Status& status() const { return status_; }
  // The job this stream reads ("<job id>" as the dispatcher names it).
  std::string job_id() const;
  StreamStats stats() const;

private:
  friend class Client;
  explicit ElementStream(std::unique_ptr<detail::StreamContext> ctx);
  std::unique_ptr<detail::StreamContext> ctx_;
  Status status_;
};

class Client {
public:
  // Connects to the dispatcher at `address` ("host:port") and checks that it speaks this
  // protocol version. Never hangs: fails after config.connect_timeout at the latest.
  static Expected<Client> connect(const std::string& address, ClientConfig config = {});

  // Registers `dataset` (validated first: an unknown function or bad argument is an error
  // here, not in the middle of a job) and returns its id. Registering an equal definition again
  // returns the same id. With `requested_id`: that id is used; if it already names an equal
  // definition the call succeeds, if it names another definition it is already_exists.
  // `compression`: "AUTO" or "NONE". `external_state_policy`: what to do with an op with
  // external state (DistributeOptions::external_state_policy; unset = "WARN").
  Expected<std::string>
  register_dataset(const Dataset& dataset, const std::string& compression = "AUTO",
                   const std::optional<std::string>& requested_id = std::nullopt,
                   const std::optional<std::string>& external_state_policy = std::nullopt);

  // register_dataset(dataset, options.compression) + from_dataset_id.
  Expected<ElementStream> distribute(const Dataset& dataset, const DistributeOptions& options = {});

  // Reads the registered dataset `dataset_id` in a new (or, with a job_name, shared) job.
  Expected<ElementStream> from_dataset_id(const std::string& dataset_id,
                                          const DistributeOptions& options = {});

  // The element spec of the registered dataset `dataset_id` (tf.data's GetElementSpec): its
  // components and how they nest, for a reader that has only the id. not_found for an unknown
  // id; an empty spec when the dispatcher cannot tell (a function from a plugin it lacks).
  Expected<ElementSpec> element_spec(const std::string& dataset_id);

  // The dispatcher address given to connect().
  const std::string& address() const;

  // distributed_save's request (conveyor/snapshot.hpp): the dispatcher journals a snapshot of the
  // registered dataset at `path` (whose metadata the caller created) and its workers write it.
  // `compression`: "lz4" or "none".
  Status start_snapshot(const std::string& dataset_id, const std::string& path,
                        const std::string& compression, int64_t chunk_bytes);

private:
  explicit Client(std::shared_ptr<detail::ClientContext> ctx);
  std::shared_ptr<detail::ClientContext> ctx_;
};

} // namespace conveyor
