// The image map functions on decoded tensors: resize's weights, crops, the per-element random
// stream, normalize, to_chw and the choice of component.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "conveyor/image.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/functions/image_functions.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/image/crop_region.hpp"
#include "test/unit/image/image_codecs.hpp"

namespace conveyor {
namespace {

Tensor image_of(const std::vector<unsigned char>& px, int64_t h, int64_t w, int64_t c) {
  Tensor t{DType::uint8, {h, w, c}};
  std::copy(px.begin(), px.end(), t.mutable_data<uint8_t>());
  return t;
}

Expected<Element> call(const std::string& name, const Element& e, Params params = {}) {
  const FunctionRef ref{name, std::move(params)};
  auto& registry = FunctionRegistry::global();
  CONVEYOR_RETURN_IF_ERROR(registry.check(ref, FunctionKind::map));
  return registry.find(name)->map(e, registry.resolve_params(ref));
}

Tensor call_ok(const std::string& name, const Element& e, Params params = {}) {
  auto out = call(name, e, std::move(params));
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  return (*out)[0];
}

std::vector<float> floats(const Tensor& t) {
  REQUIRE(t.dtype() == DType::float32);
  return {t.data<float>(), t.data<float>() + t.num_elements()};
}

TEST_CASE(
  "resize: tf.image.resize's weights for bilinear (with and without antialias), area, nearest") {
  const Tensor row = image_of({0, 10, 20, 30}, 1, 4, 1);
  const Params half{{"height", int64_t{1}}, {"width", int64_t{2}}};
  Params plain = half;
  plain["antialias"] = false;
  CHECK(floats(call_ok("resize", row, plain)) == std::vector<float>{5, 25});
  // Antialiased: the triangle widened to radius 2 around the centers 1.0 and 3.0.
  const auto aa = floats(call_ok("resize", row, half));
  CHECK(aa[0] == doctest::Approx((0 * 0.75 + 10 * 0.75 + 20 * 0.25) / 1.75));
  CHECK(aa[1] == doctest::Approx((10 * 0.25 + 20 * 0.75 + 30 * 0.75) / 1.75));
  Params area = half;
  area["method"] = std::string{"area"};
  CHECK(floats(call_ok("resize", row, area)) == std::vector<float>{5, 25});
  Params nearest{{"height", int64_t{1}},
                 {"width", int64_t{8}},
                 {"method", std::string{"nearest"}},
                 {"antialias", false}};
  CHECK(floats(call_ok("resize", row, nearest)) ==
        std::vector<float>{0, 0, 10, 10, 20, 20, 30, 30});
  // Upsampling bilinear: half-pixel centers, edges clamped.
  Params up{{"height", int64_t{1}}, {"width", int64_t{8}}};
  CHECK(floats(call_ok("resize", row, up)) ==
        std::vector<float>{0, 2.5, 7.5, 12.5, 17.5, 22.5, 27.5, 30});
  Params keep = up;
  keep["dtype"] = std::string{"uint8"};
  const Tensor u8 = call_ok("resize", row, keep);
  CHECK(u8.dtype() == DType::uint8);
  CHECK(test::pixels_of(u8) == std::vector<unsigned char>{0, 3, 8, 13, 18, 23, 28, 30});
}

TEST_CASE(
  "resize: a constant image stays constant, channels are kept apart and float input works") {
  const Tensor flat = image_of(std::vector<unsigned char>(5 * 7 * 3, 77), 5, 7, 3);
  for (const char* m : {"bilinear", "area", "nearest"}) {
    CAPTURE(m);
    const Tensor out = call_ok("resize", flat,
                               {{"height", int64_t{3}},
                                {"width", int64_t{11}},
                                {"method", std::string{m}},
                                {"antialias", std::string{m} != "nearest"}});
    CHECK(out.shape() == Shape{3, 11, 3});
    for (float v : floats(out))
      CHECK(v == doctest::Approx(77));
  }
  Tensor f{DType::float32, {1, 2, 2}};
  float* p = f.mutable_data<float>();
  p[0] = 1, p[1] = 100, p[2] = 3, p[3] = 300;
  CHECK(floats(call_ok("resize", f, {{"height", int64_t{1}}, {"width", int64_t{1}}})) ==
        std::vector<float>{2, 200});
}

TEST_CASE("resize: bad arguments are errors naming them") {
  const Tensor img = image_of(test::test_pixels(4, 4, 3), 4, 4, 3);
  auto no_size = call("resize", img);
  REQUIRE_FALSE(no_size.ok());
  CHECK(no_size.status().message() == "resize: the output size must be positive, got 0x0");
  auto method =
    call("resize", img,
         {{"height", int64_t{2}}, {"width", int64_t{2}}, {"method", std::string{"cubic"}}});
  REQUIRE_FALSE(method.ok());
  CHECK(method.status().message() ==
        "resize: `method` must be \"bilinear\", \"area\" or \"nearest\", got \"cubic\"");
  // tf.image.resize ignores antialias for these methods; a value that contradicts them is refused.
  auto nearest_aa =
    call("resize", img,
         {{"height", int64_t{2}}, {"width", int64_t{2}}, {"method", std::string{"nearest"}}});
  REQUIRE_FALSE(nearest_aa.ok());
  CHECK(nearest_aa.status().message() ==
        "resize: `antialias=true` has no effect with method=\"nearest\" (it takes one input "
        "pixel); pass antialias=false");
  auto area_plain = call("resize", img,
                         {{"height", int64_t{2}},
                          {"width", int64_t{2}},
                          {"method", std::string{"area"}},
                          {"antialias", false}});
  REQUIRE_FALSE(area_plain.ok());
  CHECK(area_plain.status().message().find("method=\"area\" always anti-aliases") !=
        std::string::npos);
  CHECK(image::resize(2, 2, "nearest").params.at("antialias") == Scalar{false});
  CHECK(image::resize(2, 2, "area").params.at("antialias") == Scalar{true});
  auto bytes =
    call("resize", Element{Tensor::scalar("x")}, {{"height", int64_t{2}}, {"width", int64_t{2}}});
  REQUIRE_FALSE(bytes.ok());
  CHECK(bytes.status().message().find("expected a uint8 or float32 image") != std::string::npos);
}

TEST_CASE("center_crop and random_crop cut windows, random_crop is fixed per (seed, element)") {
  const Tensor img = image_of(test::test_pixels(6, 8, 2), 6, 8, 2);
  const Tensor c = call_ok("center_crop", img, {{"height", int64_t{2}}, {"width", int64_t{4}}});
  REQUIRE(c.shape() == Shape{2, 4, 2});
  for (int64_t y = 0; y < 2; ++y)
    for (int64_t x = 0; x < 4; ++x)
      CHECK(c.data<uint8_t>()[(y * 4 + x) * 2] == img.data<uint8_t>()[((y + 2) * 8 + x + 2) * 2]);
  auto too_big = call("center_crop", img, {{"height", int64_t{7}}, {"width", int64_t{4}}});
  REQUIRE_FALSE(too_big.ok());
  CHECK(too_big.status().message() == "center_crop: a 7x4 crop does not fit in a 6x8 image");

  const Params p{{"height", int64_t{3}}, {"width", int64_t{3}}, {"seed", int64_t{7}}};
  const Tensor a = call_ok("random_crop", img, p);
  CHECK(a.shape() == Shape{3, 3, 2});
  CHECK(call_ok("random_crop", img, p) == a);
  std::set<std::vector<unsigned char>> seen;
  for (int64_t seed = 0; seed < 20; ++seed)
    seen.insert(test::pixels_of(call_ok(
      "random_crop", img, {{"height", int64_t{3}}, {"width", int64_t{3}}, {"seed", seed}})));
  CHECK(seen.size() > 5); // 24 possible offsets
}

TEST_CASE("random_resized_crop: torchvision's region, fallback and output size") {
  // A 2x200 strip: no try fits the ratio range, so the fallback takes the central 2x3.
  image::ElementRandom rng{1, "t", Element{Tensor::scalar(int64_t{1})}};
  const image::Region r =
    image::resized_crop_region(2, 200, {0.08, 1.0, 3.0 / 4.0, 4.0 / 3.0}, rng);
  CHECK(r.top == 0);
  CHECK(r.height == 2);
  CHECK(r.width == 3);
  CHECK(r.left == 98);
  for (int i = 0; i < 200; ++i) {
    image::ElementRandom g{i, "t", Element{Tensor::scalar(int64_t{i})}};
    const image::Region q = image::resized_crop_region(100, 80, {0.08, 1.0, 0.75, 4.0 / 3.0}, g);
    CHECK(q.top >= 0);
    CHECK(q.left >= 0);
    CHECK(q.top + q.height <= 100);
    CHECK(q.left + q.width <= 80);
    CHECK(q.height * q.width >= 0.08 * 8000 * 0.9);
  }
  const Tensor img = image_of(test::test_pixels(40, 30, 3), 40, 30, 3);
  const Params p{{"size", int64_t{16}}, {"seed", int64_t{3}}};
  const Tensor out = call_ok("random_resized_crop", img, p);
  CHECK(out.shape() == Shape{16, 16, 3});
  CHECK(out.dtype() == DType::float32);
  CHECK(call_ok("random_resized_crop", img, p) == out);
  auto bad = call("random_resized_crop", img, {{"scale_min", 0.5}, {"scale_max", 0.2}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("expected 0 < scale_min <= scale_max <= 1") !=
        std::string::npos);
}

TEST_CASE("random_flip_left_right: mirrors about half the elements, the same ones every time") {
  int flipped = 0;
  for (int i = 0; i < 200; ++i) {
    const Tensor img = image_of(test::test_pixels(3, 5, 1, i), 3, 5, 1);
    const Tensor out = call_ok("random_flip_left_right", img, {{"seed", int64_t{11}}});
    CHECK(call_ok("random_flip_left_right", img, {{"seed", int64_t{11}}}) == out);
    if (out == img)
      continue;
    ++flipped;
    for (int64_t y = 0; y < 3; ++y)
      for (int64_t x = 0; x < 5; ++x)
        CHECK(out.data<uint8_t>()[y * 5 + x] == img.data<uint8_t>()[y * 5 + 4 - x]);
  }
  CHECK(flipped > 70);
  CHECK(flipped < 130);
}

TEST_CASE("normalize: (x * scale - mean) / std per channel, as float32 or float16") {
  const Tensor img = image_of({0, 255, 51, 102}, 1, 2, 2);
  const Tensor f = call_ok(
    "normalize", img,
    {{"mean", std::string{"0.5, 0.25"}}, {"std", std::string{"0.5"}}, {"scale", 1.0 / 255}});
  const auto v = floats(f);
  CHECK(v[0] == doctest::Approx(-1.0));
  CHECK(v[1] == doctest::Approx(1.5));
  CHECK(v[2] == doctest::Approx(-0.6));
  CHECK(v[3] == doctest::Approx(0.3));
  const Tensor h = call_ok("normalize", img, {{"dtype", std::string{"float16"}}});
  CHECK(h.dtype() == DType::float16);
  CHECK(h.data<float16>()[1].to_float() == 255.0f);
  auto counts = call("normalize", img, {{"mean", std::string{"1,2,3"}}});
  REQUIRE_FALSE(counts.ok());
  CHECK(counts.status().message() ==
        "normalize: `mean` has 3 values, expected 1 or one per channel (2)");
  auto zero = call("normalize", img, {{"std", std::string{"1,0"}}});
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.status().message() == "normalize: `std` must not contain 0");
  auto text = call("normalize", img, {{"mean", std::string{"a"}}});
  REQUIRE_FALSE(text.ok());
  CHECK(text.status().message().find("`mean` must be comma-separated numbers") !=
        std::string::npos);
}

TEST_CASE("to_chw moves channels first") {
  const Tensor img = image_of({1, 2, 3, 4, 5, 6}, 1, 2, 3);
  const Tensor chw = call_ok("to_chw", img);
  CHECK(chw.shape() == Shape{3, 1, 2});
  CHECK(test::pixels_of(chw) == std::vector<unsigned char>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("image ops: index= picks a tuple's component, key= waits for dict elements") {
  const Tensor img = image_of(test::test_pixels(4, 4, 3), 4, 4, 3);
  const Element pair{{img, Tensor::scalar(int64_t{5})}};
  auto out = call("to_chw", pair, {{"index", int64_t{0}}});
  REQUIRE(out.ok());
  CHECK((*out)[0].shape() == Shape{3, 4, 4});
  CHECK((*out)[1] == Tensor::scalar(int64_t{5}));
  auto none = call("to_chw", pair);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message() ==
        "to_chw: the element has 2 components; say which is the image with index=N");
  auto range = call("to_chw", pair, {{"index", int64_t{2}}});
  REQUIRE_FALSE(range.ok());
  CHECK(range.status().message() ==
        "to_chw: index=2 is out of range for an element of 2 components");
  auto key = call("decode_image", pair, {{"key", std::string{"jpg"}}});
  REQUIRE_FALSE(key.ok());
  CHECK(key.status().message() ==
        "decode_image: key=\"jpg\" names an entry of a dict element, but the input's elements "
        "are a flat tuple (use index=N for a tuple's component)");
}

TEST_CASE("image ops: key= names the entry of a dict element (resolved against the structure)") {
  using namespace conveyor::test;
  const auto px = test_pixels(6, 5, 3);
  auto structure = Structure::dict({{"jpg", Structure::leaf()}, {"cls", Structure::leaf()}});
  REQUIRE(structure.ok());
  // Sorted keys: "cls" is component 0, "jpg" component 1.
  const Element sample{
    std::vector<Tensor>{Tensor::scalar(int64_t{7}), Tensor::scalar(encode_png(px, 6, 5, 3))}};
  const Dataset ds = Dataset::from_tensors(sample, *structure)
                       .map(FunctionRef{"decode_image", {{"key", std::string{"jpg"}}}});
  auto spec = ds.element_spec();
  REQUIRE_MESSAGE(spec.ok(), spec.status().to_string());
  CHECK(spec->components[1].dtype == DType::uint8);
  CHECK(spec->components[0].dtype == DType::int64);
  auto it = ds.make_iterator();
  REQUIRE_MESSAGE(it.ok(), it.status().to_string());
  Element got;
  bool end = false;
  REQUIRE((*it)->get_next(got, end).ok());
  REQUIRE_FALSE(end);
  CHECK(got[0] == Tensor::scalar(int64_t{7}));
  CHECK(got[1].shape() == Shape{6, 5, 3});
  CHECK(pixels_of(got[1]) == px);
  // A key the dict lacks, and key= with index=, are errors naming the function.
  auto missing = Dataset::from_tensors(sample, *structure)
                   .map(FunctionRef{"decode_image", {{"key", std::string{"png"}}}})
                   .make_iterator();
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("decode_image") != std::string::npos);
  CHECK(missing.status().message().find("png") != std::string::npos);
  auto both =
    Dataset::from_tensors(sample, *structure)
      .map(FunctionRef{"decode_image", {{"key", std::string{"jpg"}}, {"index", int64_t{1}}}})
      .make_iterator();
  REQUIRE_FALSE(both.ok());
  CHECK(both.status().message().find("not both") != std::string::npos);
}

TEST_CASE("image ops: output specs for element_spec()") {
  Tensor files{DType::string, {2}};
  files.mutable_strings() = {"a", "b"};
  const Dataset ds = Dataset::from_tensor_slices(Element{files})
                       .map(FunctionRef{"decode_image", {{"channels", int64_t{3}}}})
                       .map(FunctionRef{"random_resized_crop", {{"size", int64_t{8}}}})
                       .map(FunctionRef{"normalize", {{"dtype", std::string{"float16"}}}})
                       .map(FunctionRef{"to_chw"});
  auto spec = ds.element_spec(&FunctionRegistry::global());
  REQUIRE(spec.ok());
  REQUIRE(spec->components.size() == 1);
  CHECK(spec->components[0].dtype == DType::float16);
  CHECK(spec->components[0].shape == PartialShape{3, 8, 8});
}

TEST_CASE("image ops: bad parameters are refused by element_spec(), before any element") {
  Tensor files{DType::string, {1}};
  files.mutable_strings() = {"a"};
  const Dataset decoded = Dataset::from_tensor_slices(Element{files})
                            .map(FunctionRef{"decode_image", {{"channels", int64_t{3}}}});
  const std::pair<FunctionRef, const char*> bad[] = {
    {FunctionRef{"normalize", {{"mean", std::string{"a"}}}}, "`mean` must be comma-separated"},
    {FunctionRef{"normalize", {{"dtype", std::string{"int8"}}}}, "`dtype` must be \"float32\""},
    {FunctionRef{"center_crop", {{"height", int64_t{0}}, {"width", int64_t{4}}}},
     "center_crop: `height` and `width` must be positive"},
    {FunctionRef{"random_crop", {{"height", int64_t{4}}}}, "random_crop: `height` and `width`"},
    {FunctionRef{
       "resize",
       {{"height", int64_t{4}}, {"width", int64_t{4}}, {"method", std::string{"nearest"}}}},
     "`antialias=true` has no effect"},
    {FunctionRef{"random_resized_crop", {{"scale_min", 0.5}, {"scale_max", 0.25}}},
     "expected 0 < scale_min <= scale_max <= 1"},
  };
  for (const auto& [ref, expected] : bad) {
    CAPTURE(ref.name);
    auto spec = decoded.map(ref).element_spec(&FunctionRegistry::global());
    REQUIRE_FALSE(spec.ok());
    CHECK(spec.status().message().find(expected) != std::string::npos);
  }
}

TEST_CASE("conveyor/image.hpp builds the references the text form names") {
  const Dataset ds = Dataset::range(1)
                       .map(image::on(image::decode(3), 0))
                       .map(image::random_resized_crop(224, 1))
                       .map(image::normalize("0.5", "0.25", 0.5, "float16"))
                       .map(image::to_chw());
  const std::string text = ds.to_text();
  CHECK(text.find("map(decode_image(channels=3, index=0))") != std::string::npos);
  CHECK(text.find("random_resized_crop(") != std::string::npos);
  CHECK(text.find("map(to_chw)") != std::string::npos);
  auto parsed = parse_dataset(text);
  REQUIRE(parsed.ok());
  CHECK(parsed->to_text() == text);
  for (const char* t :
       {"map(resize(height=8, width=8, method=\"area\"))", "map(center_crop(height=2, width=2))",
        "map(random_crop(height=2, width=2, seed=3))", "map(random_flip_left_right(seed=1))"}) {
    CAPTURE(t);
    CHECK(parse_dataset(std::string{"range(1)."} + t).ok());
  }
}

} // namespace
} // namespace conveyor
