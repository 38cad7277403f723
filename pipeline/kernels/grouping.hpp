// The part batch and padded_batch share: collect up to batch_size input elements (charged to
// the job's memory budget at their footprint while they wait, with the slots of the vector that
// holds them), keep or drop the short last group, and hand the group to a combine function
// (stacking, or padding then stacking), which checks its output's size against the budget
// (check_allocation) before allocating it. Filling checks the stop flag at every element: a
// batch of 2**63-1 elements would otherwise never return.
#pragma once

#include <functional>
#include <vector>

#include "pipeline/kernels/kernel.hpp"
#include "pipeline/runtime/memory_budget.hpp"

namespace conveyor::kernels {

class GroupingIterator : public Iterator {
public:
  using Combine = std::function<Expected<Element>(const std::vector<Element>&)>;

  GroupingIterator(IteratorPtr input, int64_t batch_size, bool drop_remainder, MemoryBudget* budget,
                   std::string op, Combine combine, StopCheck stop)
    : input_(std::move(input)), batch_size_(batch_size), drop_remainder_(drop_remainder),
      charge_(budget, std::move(op)), combine_(std::move(combine)), stop_(stop) {}

  Status get_next(Element& out, bool& end_of_sequence) override;
  Status save(IteratorStateWriter& out) override;
  Status restore(IteratorStateReader& in) override;

private:
  IteratorPtr input_;
  int64_t batch_size_;
  bool drop_remainder_;
  std::vector<Element> pending_;
  bool input_done_ = false;
  MemoryCharge charge_; // pending_ (its elements and its slots), against the job's budget
  Combine combine_;
  StopCheck stop_;
};

} // namespace conveyor::kernels
