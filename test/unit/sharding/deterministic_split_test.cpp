// A deterministic job's split size from its elements' static size: hold budget / (window x
// element bytes), within [1, 8192]; unknown sizes (strings, unknown dims or rank, unknown specs)
// keep the default 1024.
#include <doctest/doctest.h>

#include <optional>

#include "conveyor/dataset.hpp"
#include "conveyor/options.hpp"
#include "pipeline/sharding/deterministic_split.hpp"

using namespace conveyor;

namespace {
TensorSpec spec(DType d, PartialShape shape = {}) { return TensorSpec{d, std::move(shape), false}; }
} // namespace

TEST_CASE("deterministic split: static element bytes from fixed dtypes and known shapes") {
  CHECK(static_element_bytes(ElementSpec{{spec(DType::int64)}}) == std::optional<int64_t>{8});
  CHECK(static_element_bytes(ElementSpec{{spec(DType::uint8, {1 << 20})}}) ==
        std::optional<int64_t>{1 << 20});
  CHECK(static_element_bytes(ElementSpec{{spec(DType::float32, {2, 3}), spec(DType::int64)}}) ==
        std::optional<int64_t>{32});
  CHECK(static_element_bytes(ElementSpec{{spec(DType::float32, {0})}}) ==
        std::optional<int64_t>{0});
  // what the spec does not fix
  CHECK_FALSE(static_element_bytes(ElementSpec{}));
  CHECK_FALSE(static_element_bytes(ElementSpec{{spec(DType::string)}}));
  CHECK_FALSE(static_element_bytes(ElementSpec{{spec(DType::int64), spec(DType::string)}}));
  CHECK_FALSE(static_element_bytes(ElementSpec{{spec(DType::int64, {kUnknownDim, 3})}}));
  CHECK_FALSE(static_element_bytes(ElementSpec{{TensorSpec{DType::int64, {}, true}}}));
}

TEST_CASE("deterministic split: the cap keeps window x split bytes near the hold budget") {
  const int64_t budget = kDefaultDeterministicHoldBytes; // 64 MiB
  const int64_t window = kDeterministicWindow;           // 16 splits: 4 MiB a split
  CHECK(deterministic_split_cap(std::nullopt, window, budget) == kDeterministicDefaultSplit);
  CHECK(deterministic_split_cap(8, window, budget) == kDeterministicLargestSplit);
  CHECK(deterministic_split_cap(1024, window, budget) == 4096);
  CHECK(deterministic_split_cap(1 << 20, window, budget) == 4);
  CHECK(deterministic_split_cap(int64_t{64} << 20, window, budget) == 1); // never below 1
  CHECK(deterministic_split_cap(0, window, budget) == kDeterministicLargestSplit);
  CHECK(deterministic_split_cap(8, window, 1) == 1); // a tiny budget
}

TEST_CASE("deterministic split: the element bytes of datasets' inferred specs") {
  auto bytes_of = [](const Dataset& d) -> std::optional<int64_t> {
    auto spec = d.element_spec();
    REQUIRE(spec.ok());
    return static_element_bytes(*spec);
  };
  CHECK(bytes_of(Dataset::range(100)) == std::optional<int64_t>{8});
  CHECK_FALSE(bytes_of(Dataset::range(100).map(FunctionRef("bytes", {{"size", int64_t{1024}}}))));
}
