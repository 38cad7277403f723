// Reads a dataset from a conveyor cluster with the blocking C++ client.
//   cpp-consumer                    starts a dispatcher and two workers in this process, then reads
//   cpp-consumer HOST:PORT          reads from the cluster whose dispatcher listens there
// The dataset uses a map function this program registers itself ("cube"): in-process workers
// find it in the same registry; a separate worker process needs it from a plugin
// (conveyor worker --plugin ...), so the address form uses the built-in "square".
// Exits non-zero unless every element arrived exactly once.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <conveyor/client.hpp>
#include <conveyor/functions.hpp>
#include <conveyor/server.hpp>
#include <conveyor/version.hpp>

namespace {

constexpr int64_t kElements = 100;

conveyor::Status register_cube() {
  conveyor::FunctionDef def;
  def.name = "cube";
  def.kind = conveyor::FunctionKind::map;
  def.doc = "x -> x*x*x (int64 scalars)";
  def.map = [](const conveyor::Element& in,
               const conveyor::Params&) -> conveyor::Expected<conveyor::Element> {
    if (in.size() != 1)
      return conveyor::invalid_argument("cube takes one component, got " +
                                        std::to_string(in.size()));
    int64_t x = in[0].as_int64();
    return conveyor::Element{conveyor::Tensor::scalar(x * x * x)};
  };
  return conveyor::FunctionRegistry::global().add(std::move(def));
}

int fail(const std::string& what, const conveyor::Status& s) {
  std::fprintf(stderr, "cpp-consumer: %s: %s\n", what.c_str(), s.to_string().c_str());
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  std::printf("conveyor %s (protocol %u)\n", conveyor::version(), conveyor::protocol_version());
  std::string address = argc > 1 ? argv[1] : "";
  std::string fn = address.empty() ? "cube" : "square";

  // Without an address: a local cluster (tf.data service's DispatchServer / WorkerServer).
  std::unique_ptr<conveyor::DispatchServer> dispatcher;
  std::vector<std::unique_ptr<conveyor::WorkerServer>> workers;
  if (address.empty()) {
    if (auto s = register_cube(); !s.ok())
      return fail("register cube", s);
    dispatcher = std::make_unique<conveyor::DispatchServer>();
    if (auto s = dispatcher->start(); !s.ok())
      return fail("start dispatcher", s);
    address = dispatcher->target();
    for (int i = 0; i < 2; ++i) {
      conveyor::WorkerConfig wc;
      wc.dispatcher_address = address;
      workers.push_back(std::make_unique<conveyor::WorkerServer>(wc));
      if (auto s = workers.back()->start(); !s.ok())
        return fail("start worker", s);
    }
  }

  auto client = conveyor::Client::connect(address);
  if (!client.ok())
    return fail("connect to " + address, client.status());
  conveyor::DistributeOptions options;
  options.policy = conveyor::ShardingPolicy::dynamic; // each element once across the workers
  auto stream = client->distribute(conveyor::Dataset::range(kElements).map(fn), options);
  if (!stream.ok())
    return fail("distribute", stream.status());

  std::map<int64_t, int> seen;
  for (const conveyor::Element& e : *stream)
    ++seen[e[0].as_int64()];
  if (!stream->status().ok())
    return fail("read", stream->status());

  int64_t bad = 0;
  for (int64_t i = 0; i < kElements; ++i) {
    int64_t want = fn == "cube" ? i * i * i : i * i;
    auto it = seen.find(want);
    if (it == seen.end() || it->second != 1)
      ++bad;
  }
  std::printf(
    "read %zu distinct elements of range(%lld).map(%s) from %s; %lld missing or repeated\n",
    seen.size(), static_cast<long long>(kElements), fn.c_str(), address.c_str(),
    static_cast<long long>(bad));
  return bad == 0 && seen.size() == static_cast<std::size_t>(kElements) ? 0 : 1;
}
