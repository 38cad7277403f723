// `conveyor bench service`'s baselines and fixtures: the raw TCP stream of the same bytes, the
// small-dataset latency, the datasets the workers serve, and throwaway TLS certificates.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

#include "apps/bench_service_detail.hpp"
#include "apps/child_nodes.hpp"
#include "pipeline/graph/text_form.hpp"

namespace conveyor::apps::bench_service {

// --- raw TCP baseline

bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) {
      if (w < 0 && errno == EINTR)
        continue;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// Streams `elements` frames of `size` payload bytes from a sender thread to a receiver thread.
Expected<Throughput> raw_tcp(int64_t elements, int64_t size, milliseconds limit) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0)
    return io_error("raw TCP: socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listener);
    return io_error("raw TCP: cannot listen on 127.0.0.1");
  }
  const auto deadline = Clock::now() + limit;
  std::atomic<bool> sender_ok{true};
  std::thread sender([&] {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      sender_ok = false;
      if (fd >= 0)
        ::close(fd);
      return;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const std::string payload(static_cast<std::size_t>(size), 'x');
    // Small frames are packed into one buffer per send, as any buffered writer would.
    std::string buf;
    buf.reserve(1 << 18);
    const uint64_t header = static_cast<uint64_t>(size);
    for (int64_t i = 0; i < elements && sender_ok; ++i) {
      buf.append(reinterpret_cast<const char*>(&header), sizeof header);
      if (size >= (1 << 16)) {
        if (!write_all(fd, buf.data(), buf.size()) ||
            !write_all(fd, payload.data(), payload.size()))
          sender_ok = false;
        buf.clear();
      } else {
        buf.append(payload);
        if (buf.size() >= (1 << 18)) {
          sender_ok = write_all(fd, buf.data(), buf.size());
          buf.clear();
        }
      }
      if ((i & 1023) == 0 && Clock::now() > deadline)
        break;
    }
    if (!buf.empty())
      write_all(fd, buf.data(), buf.size());
    ::close(fd);
  });

  const int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ::close(listener);
  if (conn < 0) {
    sender_ok = false;
    sender.join();
    return io_error("raw TCP: accept() failed");
  }
  Throughput out;
  const auto start = Clock::now();
  std::vector<char> in(1 << 20);
  std::size_t have = 0;
  std::string element; // the receiver's copy of each payload
  while (out.elements < elements) {
    const ssize_t r = ::recv(conn, in.data() + have, in.size() - have, 0);
    if (r <= 0) {
      if (r < 0 && errno == EINTR)
        continue;
      break;
    }
    have += static_cast<std::size_t>(r);
    std::size_t at = 0;
    for (;;) {
      if (have - at < 8)
        break;
      uint64_t frame = 0;
      std::memcpy(&frame, in.data() + at, 8);
      if (have - at - 8 < frame) {
        if (frame + 8 > in.size())
          in.resize(frame + 8);
        break;
      }
      element.assign(in.data() + at + 8, frame);
      at += 8 + frame;
      ++out.elements;
      out.bytes += static_cast<int64_t>(frame);
    }
    std::memmove(in.data(), in.data() + at, have - at);
    have -= at;
  }
  out.seconds = Seconds(Clock::now() - start).count();
  ::close(conn);
  sender.join();
  if (!sender_ok && out.elements == 0)
    return io_error("raw TCP: the sender failed");
  return out;
}

// --- process memory (kB) from /proc/self/status: VmRSS now, VmHWM the peak
int64_t proc_status_kb(const char* key) { return proc_status_number("self", key); }

// --- small-dataset latency: range(100) read end to end, and the time to its first element

// OFF: every worker produces the whole dataset (100 x workers elements); DYNAMIC: 100 in all.
Expected<Latency> read_small(const std::string& dispatcher, ShardingPolicy policy, int run,
                             int64_t expected, const NetworkConfig& network) {
  auto dataset = parse_dataset("range(100)");
  if (!dataset.ok())
    return dataset.status();
  DistributeOptions opts;
  opts.policy = policy;
  opts.job_name = "bench-latency-" + std::to_string(::getpid()) + "-" + to_string(policy) + "-" +
                  std::to_string(run);
  const auto t0 = Clock::now();
  ClientConfig config;
  config.network = network;
  auto client = Client::connect(dispatcher, config);
  if (!client.ok())
    return client.status();
  auto stream = client->distribute(*dataset, opts);
  if (!stream.ok())
    return stream.status();
  Latency out;
  int64_t n = 0;
  Element e;
  for (;;) {
    bool end = false;
    CONVEYOR_RETURN_IF_ERROR(stream->next(e, end, milliseconds{10000}));
    if (end)
      break;
    if (n++ == 0)
      out.first_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }
  out.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (n != expected)
    return data_loss("range(100) gave " + std::to_string(n) + " elements, expected " +
                     std::to_string(expected));
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The data each worker serves. Producing it should cost little, so that the benchmark measures
// the service and not the pipeline: the reference's own advice for measuring the ideal input
// speed is `take(1).cache().repeat()` (002_32961d854c9a04d3.txt).
std::string dataset_for(int64_t element_size, ShardingPolicy policy, bool pixels) {
  constexpr const char* kEndless = "range(4611686018427387904)"; // 2^62: endless for a benchmark
  if (element_size == 8)
    return kEndless; // int64 scalars, 8 bytes of tensor data each
  const std::string make = std::string{pixels ? ".map(pixels(size=" : ".map(bytes(size="} +
                           std::to_string(element_size) + "))";
  // DYNAMIC needs a splittable source with many splits, so each element is generated.
  if (policy == ShardingPolicy::dynamic)
    return kEndless + make;
  return "range(1)" + make + ".cache().repeat()";
}

// A CA and one node certificate signed by it, made with the `openssl` command in a new temporary
// directory, for `--tls`.
Expected<NetworkConfig> throwaway_tls() {
  char dir[] = "/tmp/conveyor-bench-tls-XXXXXX";
  if (!::mkdtemp(dir))
    return io_error("cannot create a directory for the throwaway TLS certificates");
  const std::string d = dir;
  const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
  const std::string script =
    "cd " + d + " && openssl req -x509" + key +
    "-keyout ca.key -out ca.pem -days 1 -subj /CN=bench-ca >/dev/null 2>&1 && "
    "openssl req" +
    key +
    "-keyout node.key -out node.csr -subj /CN=bench >/dev/null 2>&1 && "
    "openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
    "-out node.pem -days 1 >/dev/null 2>&1";
  if (std::system(script.c_str()) != 0)
    return failed_precondition("`--tls`: the `openssl` command could not make certificates in " +
                               d);
  NetworkConfig n;
  n.tls_cert = d + "/node.pem";
  n.tls_key = d + "/node.key";
  n.tls_ca = d + "/ca.pem";
  return n;
}
} // namespace conveyor::apps::bench_service
