// Workers admit only token holders (docs/OPERATIONS.md "Security"): a stranger that connects
// straight to a worker's CAF port — never passing the dispatcher's admission — cannot run a pipeline on it
// (assign_task), read or acknowledge a task's elements (get_elements) or stop a task
// (stop_task) without the token; each refusal is logged on the worker, without the token.
#include <doctest/doctest.h>

#include "test/integration/cluster.hpp"
#include "test/integration/stranger.hpp"
#include "test/support/text.hpp"

using namespace conveyor;
using namespace conveyor::testing;

namespace {

constexpr const char* kSecret = "w0rker-s3cret-for-tests";

} // namespace

TEST_CASE("worker admission: a stranger at the worker's port is refused without the token") {
  const std::vector<std::string> token{"--auth-token", kSecret};
  Cluster cluster(0, token);
  ChildProcess& worker = cluster.add_worker(token);
  auto port = worker.wait_listening(kStartTimeout);
  REQUIRE_MESSAGE(port.ok(), port.status().to_string());
  Stranger stranger;
  REQUIRE_MESSAGE(stranger.connect(static_cast<uint16_t>(*port)).ok(), cluster.describe());

  // (a) assign_task without the token, or with a wrong one: refused, and the worker logs it.
  Status none = stranger.assign(9001, "range(10)", "");
  CHECK(none.code() == ErrorCode::permission_denied);
  CHECK_MESSAGE(contains(none.message(), "the worker requires an admission token"),
                none.to_string());
  CHECK(contains(none.message(), "presented none"));
  Status wrong = stranger.assign(9001, "range(10)", "guess");
  CHECK(wrong.code() == ErrorCode::permission_denied);
  CHECK(contains(wrong.message(), "a wrong one"));
  CHECK(worker.wait_for_output("refused assign_task (task 9001)", Millis{5000}));

  // (b) A running task (assigned with the token) refuses get_elements without it; the same
  // request with the token is served, so the refusal is the token's doing.
  REQUIRE_MESSAGE(stranger.assign(9002, "range(10)", kSecret).ok(), worker.describe());
  auto stolen = stranger.get_elements(77, "");
  REQUIRE(!stolen.ok());
  CHECK(stolen.status().code() == ErrorCode::permission_denied);
  CHECK(contains(stolen.status().message(), "presented none"));
  auto guessed = stranger.get_elements(77, "w0rker-s3cret-for-test"); // one character short
  REQUIRE(!guessed.ok());
  CHECK(contains(guessed.status().message(), "a wrong one"));
  CHECK(worker.wait_for_output("refused get_elements (consumer 77)", Millis{5000}));
  auto served = stranger.get_elements(77, kSecret);
  REQUIRE_MESSAGE(served.ok(), served.status().to_string());
  CHECK(*served == 10);

  // (c) stop_task without the token is refused (logged); the task goes on serving.
  stranger.stop("");
  CHECK(worker.wait_for_output("refused stop_task (task 9002)", Millis{5000}));
  auto still = stranger.get_elements(77, kSecret);
  CHECK_MESSAGE(still.ok(), still.status().to_string());
  stranger.stop(kSecret); // with the token: the worker stops it (and need not drain it at exit)
  CHECK(worker.wait_for_output("stopping task 9002", Millis{5000}));

  // (d) drain_atom (local-only, no token) from another node is refused: the worker keeps taking tasks.
  auto drained = stranger.drain();
  REQUIRE(!drained.ok());
  CHECK(drained.status().code() == ErrorCode::permission_denied);
  CHECK(worker.wait_for_output("refused drain_atom", Millis{5000}));

  // (d') The worker's and the task's other local-only messages (timers, start-up, drain steps)
  // are refused from another node too, each logged.
  REQUIRE_MESSAGE(stranger.assign(9003, "range(1000000)", kSecret).ok(), worker.describe());
  auto task_drained = stranger.send_local_only();
  REQUIRE(!task_drained.ok());
  CHECK(task_drained.status().code() == ErrorCode::permission_denied);
  for (const char* what :
       {"refused tick_atom", "refused drained_atom from", "refused connect_atom",
        "refused produce_atom to task 9003", "refused drained_atom to task 9003"})
    CHECK_MESSAGE(worker.wait_for_output(what, Millis{5000}), what);
  stranger.stop(kSecret); // (nobody reads task 9003: the worker need not drain it at exit)
  CHECK(worker.wait_for_output("stopping task 9003", Millis{5000}));
  CHECK(stranger.tick_dispatcher(cluster.port()).ok());
  CHECK(cluster.dispatcher().wait_for_output("refused tick_atom", Millis{5000}));

  // The token never appears in the worker's log.
  CHECK(!contains(worker.describe(), kSecret));

  // (e) An admitted reader still reads everything through the same worker.
  auto r = cluster.read("range(7)", token);
  CAPTURE(r.describe);
  CHECK(r.exit_code == 0);
  CHECK(r.lines.size() == 7);
}

TEST_CASE(
  "worker admission: a worker with a token is refused by a dispatcher without one, naming it") {
  // Such a worker would refuse every assign_task of that dispatcher (they carry no token).
  Cluster cluster(0);
  auto w = ChildProcess::conveyor(
    {"worker", "--dispatcher", cluster.address(), "--port", "0", "--auth-token", kSecret},
    "token-worker");
  REQUIRE(w.ok());
  auto code = (*w)->wait_exit(Millis{20000});
  CAPTURE((*w)->describe());
  CHECK(code == 1);
  CHECK(contains((*w)->describe(), "this dispatcher has none"));
  CHECK(!contains((*w)->describe(), kSecret));
  CHECK(cluster.dispatcher().wait_for_output("this dispatcher has none", Millis{5000}));
}
