#include <doctest/doctest.h>

#include "pipeline/tensor/element.hpp"

using namespace conveyor;

TEST_CASE("element byte size sums its components") {
  Element e{{Tensor::vector<int32_t>({1, 2, 3}), Tensor::scalar("abcd"), Tensor::scalar(true)}};
  CHECK(e.byte_size() == 12 + 4 + 1);
  CHECK(Element{}.byte_size() == 0);
}

TEST_CASE("TensorSpec prints like tf.TensorSpec") {
  CHECK(TensorSpec{DType::int64, {kUnknownDim, 3}, false}.to_string() ==
        "TensorSpec(shape=(None, 3), dtype=int64)");
  CHECK(TensorSpec{DType::float32, {}, false}.to_string() == "TensorSpec(shape=(), dtype=float32)");
  CHECK(TensorSpec{DType::string, {4}, false}.to_string() ==
        "TensorSpec(shape=(4,), dtype=string)");
  CHECK(TensorSpec{DType::boolean, {}, true}.to_string() ==
        "TensorSpec(shape=<unknown>, dtype=bool)");
}

TEST_CASE("ElementSpec prints one component bare and several as a tuple") {
  ElementSpec one{{TensorSpec{DType::int64, {}, false}}};
  CHECK(one.to_string() == "TensorSpec(shape=(), dtype=int64)");
  ElementSpec two{
    {TensorSpec{DType::int64, {}, false}, TensorSpec{DType::string, {kUnknownDim}, false}}};
  CHECK(two.to_string() ==
        "(TensorSpec(shape=(), dtype=int64), TensorSpec(shape=(None,), dtype=string))");
  CHECK(ElementSpec{}.to_string() == "()");
}

TEST_CASE("spec_of describes a concrete element exactly") {
  Element e{{Tensor::from_values<double>({2, 3}, std::vector<double>(6, 1.0)).value(),
             Tensor::scalar("a")}};
  ElementSpec spec = spec_of(e);
  REQUIRE(spec.components.size() == 2);
  CHECK(spec.components[0] == TensorSpec{DType::float64, {2, 3}, false});
  CHECK(spec.components[1] == TensorSpec{DType::string, {}, false});
  CHECK(spec.is_compatible(e));
}

TEST_CASE("is_compatible honours unknown dimensions and unknown rank") {
  Element batch{Tensor::vector<int64_t>({1, 2, 3})};
  CHECK(ElementSpec{{TensorSpec{DType::int64, {kUnknownDim}, false}}}.is_compatible(batch));
  CHECK(ElementSpec{{TensorSpec{DType::int64, {3}, false}}}.is_compatible(batch));
  CHECK_FALSE(ElementSpec{{TensorSpec{DType::int64, {4}, false}}}.is_compatible(batch));
  CHECK_FALSE(ElementSpec{{TensorSpec{DType::int64, {}, false}}}.is_compatible(batch));
  CHECK_FALSE(ElementSpec{{TensorSpec{DType::int32, {3}, false}}}.is_compatible(batch));
  CHECK(ElementSpec{{TensorSpec{DType::int64, {}, true}}}.is_compatible(batch));
  // The component count must match too.
  CHECK_FALSE(
    ElementSpec{{TensorSpec{DType::int64, {3}, false}, TensorSpec{DType::int64, {}, false}}}
      .is_compatible(batch));
}
