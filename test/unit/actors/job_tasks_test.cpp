#include <doctest/doctest.h>

#include "actors/job_tasks.hpp"

using namespace conveyor::actors;

TEST_CASE("a job finishes when every remaining task is done, never with no tasks") {
  JobTasks j;
  CHECK_FALSE(j.finished());
  REQUIRE(j.add(1, 1, "a:1"));
  REQUIRE(j.add(2, 2, "a:2"));
  CHECK_FALSE(j.add(2, 2, "a:2"));
  auto v0 = j.version();
  CHECK(j.listed().empty()); // not listed before assigned
  CHECK_FALSE(j.assigned(1));
  CHECK_FALSE(j.assigned(2));
  CHECK(j.listed().size() == 2);
  CHECK(j.version() > v0);
  CHECK_FALSE(j.done(1, ""));
  CHECK_FALSE(j.finished());
  // Removing the unfinished task's worker finishes the job (its rest is lost).
  auto v1 = j.version();
  CHECK(j.remove(2));
  CHECK(j.finished());
  CHECK(j.version() > v1);
  CHECK_FALSE(j.add(3, 3, "a:3")); // a finished job takes no new tasks
}

TEST_CASE("removing the only task leaves the job waiting for workers") {
  JobTasks j;
  REQUIRE(j.add(1, 1, "a:1"));
  j.assigned(1);
  CHECK_FALSE(j.remove(1));
  CHECK_FALSE(j.finished());
  REQUIRE(j.add(2, 2, "a:2"));
  CHECK_FALSE(j.assigned(2));
  CHECK(j.done(2, ""));
}

TEST_CASE("a task that ends before the job learns its handle does not finish the job early") {
  JobTasks j;
  REQUIRE(j.add(1, 1, "a:1"));
  REQUIRE(j.add(2, 2, "a:2"));
  CHECK_FALSE(j.assigned(2));
  CHECK_FALSE(j.done(2, ""));
  CHECK_FALSE(j.done(1, "")); // task 1's end overtook its assignment reply
  CHECK_FALSE(j.finished());
  CHECK(j.assigned(1)); // only now can consumers see it; now the job is finished
  CHECK(j.finished());
}
