// ReadyElements hands out numeric tensors that view their inline batch buffer (zero copy), and
// bounds the buffers kept alive that way (consumer/ready_elements.hpp).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "consumer/ready_elements.hpp"
#include "pipeline/tensor/codec.hpp"

using namespace conveyor;
using conveyor::actors::ReadyElements;

namespace {

// int64s per element: about the iterator benchmark's 8 KiB, but not 1024: copies (malloc's
// 8 KiB chunks) may lie 8 208 bytes apart as that batch's entries do.
constexpr int64_t kRow = 1001;

std::vector<Element> rows(int64_t first, int64_t n) {
  std::vector<Element> out;
  for (int64_t i = 0; i < n; ++i)
    out.emplace_back(Tensor::vector<int64_t>(std::vector<int64_t>(kRow, first + i)));
  return out;
}

// Consecutive elements of one batch view it: their payloads are one entry apart (an entry
// prefix and pad of 8 bytes, the element's head and pad of 8, the payload).
bool consecutive_in_one_buffer(const Element& a, const Element& b) {
  return b[0].bytes().data() - a[0].bytes().data() == 8 + 8 + 8 * kRow;
}

} // namespace

TEST_CASE("inline batches: elements view their buffer, which outlives the reader") {
  std::vector<Element> kept;
  {
    ReadyElements ready;
    ready.add_encoded(encode_batch(rows(0, 3), Compression::none), 3, {}, "worker a");
    for (;;) {
      Element e;
      bool got = false;
      REQUIRE(ready.next(e, got).ok());
      if (!got)
        break;
      kept.push_back(std::move(e));
    }
    CHECK(ready.pinned_bytes() > 3 * 8 * kRow);
  }
  REQUIRE(kept.size() == 3);
  CHECK(consecutive_in_one_buffer(kept[0], kept[1]));
  CHECK(consecutive_in_one_buffer(kept[1], kept[2]));
  for (int64_t i = 0; i < 3; ++i) {
    CHECK(reinterpret_cast<std::uintptr_t>(kept[i][0].bytes().data()) % 8 == 0);
    CHECK(kept[i][0].data<int64_t>()[kRow - 1] == i);
  }
  // A write copies first (the tensor's storage is shared): the neighbours keep their values.
  kept[1][0].mutable_data<int64_t>()[0] = -1;
  CHECK(kept[0][0].data<int64_t>()[0] == 0);
  CHECK(kept[2][0].data<int64_t>()[0] == 2);
}

TEST_CASE("inline batches: buffers held by kept elements are bounded, then elements are copies") {
  ReadyElements ready;
  constexpr int64_t kPerBatch = 128; // ~1 MiB batches
  const std::size_t batch_bytes = encode_batch(rows(0, kPerBatch), Compression::none).size();
  const auto batches = static_cast<int64_t>(ReadyElements::kMaxPinnedBytes / batch_bytes) + 8;
  std::vector<Element> kept; // one element of each batch: each pins its whole buffer
  for (int64_t b = 0; b < batches; ++b) {
    ready.add_encoded(encode_batch(rows(b * kPerBatch, kPerBatch), Compression::none), kPerBatch,
                      {}, "worker a");
    Element first, second;
    bool got = false;
    REQUIRE(ready.next(first, got).ok());
    REQUIRE(got);
    REQUIRE(ready.next(second, got).ok());
    REQUIRE(got);
    const bool viewed = consecutive_in_one_buffer(first, second);
    CHECK(viewed == (b + 1 <= static_cast<int64_t>(ReadyElements::kMaxPinnedBytes / batch_bytes)));
    for (int64_t rest = 2; rest < kPerBatch; ++rest) { // the rest are read and dropped
      Element e;
      REQUIRE(ready.next(e, got).ok());
      REQUIRE(got);
    }
    CHECK(first[0].data<int64_t>()[0] == b * kPerBatch);
    kept.push_back(std::move(first));
    CHECK(ready.pinned_bytes() <= ReadyElements::kMaxPinnedBytes);
  }
  // Once the kept elements go, their buffers do: batches are viewed again.
  kept.clear();
  CHECK(ready.pinned_bytes() == 0);
  ready.add_encoded(encode_batch(rows(0, 2), Compression::none), 2, {}, "worker a");
  Element a, b;
  bool got = false;
  REQUIRE(ready.next(a, got).ok());
  REQUIRE(ready.next(b, got).ok());
  CHECK(consecutive_in_one_buffer(a, b));
}

TEST_CASE("inline batches: a small batch is copied, and a reader that drops its elements views "
          "every batch however many went through") {
  ReadyElements ready;
  // Small: copied, nothing pinned while the element is kept.
  ready.add_encoded(encode_batch({Element{Tensor::scalar(int64_t{7})}}, Compression::none), 1, {},
                    "worker a");
  Element small;
  bool got = false;
  REQUIRE(ready.next(small, got).ok());
  REQUIRE(got);
  CHECK(small[0].at<int64_t>(0) == 7);
  CHECK(ready.pinned_bytes() == 0);
  // Twice the bound's worth of ~1 MiB batches, each read whole and dropped: the buffers let go
  // are counted out when the bound is reached, so every batch is still viewed.
  constexpr int64_t kPerBatch = 128;
  const std::size_t batch_bytes = encode_batch(rows(0, kPerBatch), Compression::none).size();
  const auto batches = static_cast<int64_t>(2 * ReadyElements::kMaxPinnedBytes / batch_bytes);
  int64_t viewed = 0;
  for (int64_t b = 0; b < batches; ++b) {
    ready.add_encoded(encode_batch(rows(b * kPerBatch, kPerBatch), Compression::none), kPerBatch,
                      {}, "worker a");
    Element first, second;
    REQUIRE(ready.next(first, got).ok());
    REQUIRE(ready.next(second, got).ok());
    viewed += consecutive_in_one_buffer(first, second) ? 1 : 0;
    for (int64_t rest = 2; rest < kPerBatch; ++rest) {
      Element e;
      REQUIRE(ready.next(e, got).ok());
    }
  }
  CHECK(viewed == batches);
}
