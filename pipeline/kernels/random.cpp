// random(seed): pseudo-random int64 scalars forever, as tf.data's Dataset.random. Element i is
// splitmix64 of (the seed's key + i), a counter-based generator fully specified here, so a seeded dataset
// yields the same sequence on every worker, platform and standard library.
#include "pipeline/kernels/kernel.hpp"

namespace conveyor::kernels {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class RandomIterator : public Iterator {
public:
  RandomIterator(uint64_t key, StopCheck stop) : key_(key), stop_(stop) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    // Infinite: only a stopped pipeline ends it.
    CONVEYOR_RETURN_IF_ERROR(stop_.check("random"));
    end_of_sequence = false;
    out = Element{Tensor::scalar(static_cast<int64_t>(splitmix64(key_ + next_++)))};
    return Status::OK();
  }

  // The key too: an unseeded iterator drew it, and the restored one goes on with the same.
  Status save(IteratorStateWriter& out) override {
    out.put_tag("random");
    out.put_int(static_cast<int64_t>(key_));
    out.put_int(static_cast<int64_t>(next_));
    return Status::OK();
  }
  Status restore(IteratorStateReader& in) override {
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("random"));
    key_ = static_cast<uint64_t>(in.get_int());
    next_ = static_cast<uint64_t>(in.get_int());
    return in.status();
  }

private:
  uint64_t key_;
  StopCheck stop_;
  uint64_t next_ = 0;
};

} // namespace

MakeResult make_random(const NodePtr& node, const KernelContext& kctx) {
  // Unseeded: one seed drawn per iterator tree (as shuffle does); the same sequence each
  // repetition, as tf.data's rerandomize_each_iteration=False default.
  const uint64_t key = iteration_seed(node.get(), node->int_attr("seed"), false, kctx);
  return IteratorPtr(std::make_unique<RandomIterator>(key, kctx.stop()));
}

} // namespace conveyor::kernels
