// A DYNAMIC JobCore over range(n) cut into splits of `split_size`, for the job core's unit tests.
#pragma once

#include <doctest/doctest.h>

#include "dispatcher/job_core.hpp"
#include "pipeline/graph/dataset.hpp"

namespace conveyor::test {

inline actors::JobCore dynamic_job(int64_t n, int64_t split_size, bool per_split = true) {
  SplitOptions o;
  o.range_split_size = split_size;
  auto p = make_split_provider(Dataset::range(n), o);
  REQUIRE(p.ok());
  return actors::JobCore{std::move(p).value(), per_split};
}

} // namespace conveyor::test
