// Reading iterators to their end in the sharding tests, every loop bounded by `max_elements`.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "pipeline/runtime/iterator.hpp"

namespace conveyor::testing {

// Every element of `it` until its end of sequence.
inline std::vector<Element> read_all(Iterator& it, int max_elements) {
  std::vector<Element> out;
  for (int i = 0; i < max_elements; ++i) {
    Element e;
    bool end = false;
    Status st = it.get_next(e, end);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    if (end)
      return out;
    out.push_back(std::move(e));
  }
  FAIL("no end of sequence after " << max_elements << " elements");
  return out;
}

// Iterators that share split providers, asked for an element in turn until all ended: the way
// tasks on several workers pull splits from one job. Checks that every iterator produced
// something (the splits really were spread).
inline std::vector<Element> read_round_robin(std::vector<std::unique_ptr<Iterator>>& its,
                                             int max_elements) {
  std::vector<bool> done(its.size(), false);
  std::vector<int> per_worker(its.size(), 0);
  std::vector<Element> out;
  for (int step = 0; step < max_elements && std::count(done.begin(), done.end(), false) > 0;
       ++step) {
    const std::size_t w = static_cast<std::size_t>(step) % its.size();
    if (done[w])
      continue;
    Element e;
    bool end = false;
    Status st = its[w]->get_next(e, end);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    if (end) {
      done[w] = true;
      continue;
    }
    ++per_worker[w];
    out.push_back(std::move(e));
  }
  REQUIRE(std::count(done.begin(), done.end(), false) == 0);
  for (int n : per_worker)
    CHECK(n > 0);
  return out;
}

} // namespace conveyor::testing
