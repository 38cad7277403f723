// Every dtype (bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64, complex64,
// complex128, string): names and codes, the half-float bit conversions, bit-exact codec round
// trips (NaN payloads, -0.0, subnormals), the text form, graph serialization, cast/bitcast and
// the arithmetic functions, and the kernels that only move bytes (batch, unbatch, padded_batch).
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "conveyor/functions.hpp"
#include "pipeline/kernels/cache_file.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/graph/text_form.hpp"
#include "pipeline/tensor/codec.hpp"
#include "pipeline/tensor/dtype_convert.hpp"

using namespace conveyor;

namespace {

template <class T>
Tensor vec(std::vector<T> values) {
  return Tensor::vector<T>(values);
}

template <class T, class Bits>
T from_bits(Bits b) {
  static_assert(sizeof(T) == sizeof(Bits));
  T v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// One tensor of every numeric dtype holding its awkward values: extremes, -0.0, infinities,
// subnormals and NaNs with payloads (quiet and signalling), as bit patterns.
std::vector<Tensor> awkward_tensors() {
  using c64 = std::complex<float>;
  using c128 = std::complex<double>;
  const float qnan_payload = from_bits<float>(uint32_t{0x7fc12345});
  const float snan = from_bits<float>(uint32_t{0x7f800001});
  const double nan_payload = from_bits<double>(uint64_t{0xfff0000000abcdefULL});
  return {
    vec<bool>({true, false, true}),
    vec<int8_t>({-128, -1, 0, 127}),
    vec<int16_t>({-32768, -1, 0, 32767}),
    vec<int32_t>({std::numeric_limits<int32_t>::min(), -1, 0, 2147483647}),
    vec<int64_t>({std::numeric_limits<int64_t>::min(), -1, 0, INT64_MAX}),
    vec<uint8_t>({0, 1, 128, 255}),
    vec<uint16_t>({0, 1, 32768, 65535}),
    vec<uint32_t>({0, 1, 0x80000000u, 0xffffffffu}),
    vec<uint64_t>({0, 1, 0x8000000000000000ULL, ~uint64_t{0}}),
    // float16: 1, -0, max, smallest subnormal, inf, quiet NaN with payload, signalling NaN.
    vec<float16>({{0x3c00}, {0x8000}, {0x7bff}, {0x0001}, {0x7c00}, {0x7e01}, {0xfc01}}),
    // bfloat16: 1, -0, max, smallest subnormal, -inf, NaN with payload, signalling NaN.
    vec<bfloat16>({{0x3f80}, {0x8000}, {0x7f7f}, {0x0001}, {0xff80}, {0x7fc1}, {0x7f81}}),
    vec<float>({-0.0f, std::numeric_limits<float>::denorm_min(),
                std::numeric_limits<float>::infinity(), qnan_payload, snan}),
    vec<double>({-0.0, std::numeric_limits<double>::denorm_min(),
                 -std::numeric_limits<double>::infinity(), nan_payload}),
    vec<c64>({c64{1.5f, -2.0f}, c64{-0.0f, qnan_payload}, c64{snan, 0.0f}}),
    vec<c128>({c128{1e300, -1e-300}, c128{nan_payload, -0.0}}),
    vec<std::string>({"", std::string("a\0b", 3)}),
  };
}

Element parse_ok(const std::string& text) {
  auto e = parse_element(text);
  REQUIRE_MESSAGE(e.ok(), text, " -> ", e.status().to_string());
  return std::move(e).value();
}

Expected<Element> call_map(const std::string& name, const Element& e, Params params = {}) {
  const FunctionDef* def = FunctionRegistry::global().find(name);
  REQUIRE(def != nullptr);
  FunctionRef ref{name};
  ref.params = std::move(params);
  return def->map(e, FunctionRegistry::global().resolve_params(ref));
}

} // namespace

TEST_CASE("every dtype has its tf.data name, its size and a codec byte") {
  const char* names[] = {"bool",    "int32",    "int64",     "float32",   "float64", "string",
                         "int8",    "int16",    "uint8",     "uint16",    "uint32",  "uint64",
                         "float16", "bfloat16", "complex64", "complex128"};
  const std::size_t sizes[] = {1, 4, 8, 4, 8, 0, 1, 2, 1, 2, 4, 8, 2, 2, 8, 16};
  REQUIRE(kAllDTypes.size() == 16);
  for (unsigned code = 0; code < kNumDTypes; ++code) {
    const DType d = kAllDTypes[code];
    CAPTURE(names[code]);
    CHECK(static_cast<unsigned>(d) == code); // appended: the first six keep their codes
    CHECK(std::string{dtype_name(d)} == names[code]);
    CHECK(dtype_from_name(names[code]) == d);
    CHECK(dtype_from_code(code) == d);
    CHECK(dtype_size(d) == sizes[code]);
  }
  CHECK_FALSE(dtype_from_code(16).has_value());
  CHECK_FALSE(dtype_from_code(255).has_value());
  CHECK_FALSE(dtype_from_name("complex").has_value());
  CHECK(dtype_alignment(DType::complex128) == 8);
  CHECK(dtype_alignment(DType::complex64) == 4);
  CHECK(dtype_of<uint8_t>::value == DType::uint8);
  CHECK(dtype_of<float16>::value == DType::float16);
  CHECK(dtype_of<std::complex<double>>::value == DType::complex128);
  CHECK(Tensor::scalar(uint16_t{7}).dtype() == DType::uint16);
  CHECK(Tensor::scalar(std::complex<float>{1, 2}).at<std::complex<float>>(0) ==
        std::complex<float>{1, 2});
}

TEST_CASE("float16 converts like IEEE binary16 and every bit pattern survives a round trip") {
  CHECK(float16::from_float(1.0f).bits == 0x3c00);
  CHECK(float16::from_float(-2.0f).bits == 0xc000);
  CHECK(float16::from_float(65504.0f).bits == 0x7bff);              // the largest float16
  CHECK(float16::from_float(65520.0f).bits == 0x7c00);              // rounds past it: inf
  CHECK(float16::from_float(std::ldexp(1.0f, -24)).bits == 0x0001); // smallest subnormal
  CHECK(float16::from_float(std::ldexp(1.0f, -25)).bits == 0x0000); // a tie: to even, 0
  CHECK(float16::from_float(std::ldexp(3.0f, -26)).bits == 0x0001);
  CHECK(float16::from_float(1.0f + std::ldexp(1.0f, -11)).bits == 0x3c00); // tie to even
  CHECK(float16::from_float(1.0f + std::ldexp(3.0f, -11)).bits == 0x3c02); // tie to even, up
  CHECK(float16::from_float(-0.0f).bits == 0x8000);
  CHECK(std::isnan(float16::from_bits(0x7e00).to_float()));
  CHECK(float16::from_bits(0x3555).to_float() == doctest::Approx(0.333251953125));
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto h = float16::from_bits(static_cast<uint16_t>(b));
    if (float16::from_float(h.to_float()).bits != h.bits)
      FAIL_CHECK("float16 pattern " << b << " does not round-trip");
  }
}

TEST_CASE("bfloat16 is the upper half of a float32, rounded to nearest even") {
  CHECK(bfloat16::from_float(1.0f).bits == 0x3f80);
  CHECK(bfloat16::from_bits(0x4049).to_float() == 3.140625f);
  CHECK(bfloat16::from_float(1.0f + std::ldexp(1.0f, -8)).bits == 0x3f80); // tie: even
  CHECK(bfloat16::from_float(1.0f + std::ldexp(3.0f, -8)).bits == 0x3f82);
  CHECK(std::isinf(bfloat16::from_float(std::numeric_limits<float>::max()).to_float()));
  // A NaN whose payload is only in the low 16 bits stays a NaN.
  CHECK(std::isnan(bfloat16::from_float(from_bits<float>(uint32_t{0x7f800001})).to_float()));
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto h = bfloat16::from_bits(static_cast<uint16_t>(b));
    if (bfloat16::from_float(h.to_float()).bits != h.bits)
      FAIL_CHECK("bfloat16 pattern " << b << " does not round-trip");
  }
}

TEST_CASE("every dtype round-trips bit-exact through the element and batch codecs") {
  const Element element{awkward_tensors()};
  std::string one;
  encode_element(element, one);
  auto decoded = decode_element(one);
  REQUIRE_MESSAGE(decoded.ok(), decoded.status().to_string());
  CHECK(*decoded == element); // byte for byte: NaN payloads and -0.0 included

  for (Compression c : {Compression::none, Compression::lz4}) {
    CAPTURE(to_string(c));
    const std::vector<Element> batch{element, element};
    const std::string buffer = encode_batch(batch, c);
    std::vector<Element> out;
    REQUIRE(decode_batch(buffer, out).ok());
    REQUIRE(out.size() == 2);
    CHECK(out[0] == element);
    // Zero copy: tensors view the buffer (complex128 only needs 8-byte alignment).
    auto owned = std::make_shared<std::string>(buffer);
    std::vector<Element> viewed;
    REQUIRE(decode_batch(owned, *owned, viewed).ok());
    REQUIRE(viewed.size() == 2);
    CHECK(viewed[1] == element);
  }
}

TEST_CASE("the codec refuses a dtype byte it does not know, naming it") {
  for (int code : {16, 17, 200, 255}) {
    std::string bytes = {'\x01', static_cast<char>(code), '\x00', '\x00'};
    auto e = decode_element(bytes);
    REQUIRE_FALSE(e.ok());
    CHECK(e.status().code() == ErrorCode::data_loss);
    CHECK(e.status().message() == "element codec: component 0 of 1: unknown dtype code " +
                                    std::to_string(code) + ", expected 0..15 (at byte offset 2)");
  }
}

TEST_CASE("every dtype prints as a literal that parses back to the same tensor") {
  for (const Tensor& t : awkward_tensors()) {
    if (t.dtype() == DType::float32 || t.dtype() == DType::float64 || dtype_is_complex(t.dtype()) ||
        t.dtype() == DType::float16 || t.dtype() == DType::bfloat16)
      continue; // their NaN payloads have no text form (below: the same dtypes without NaNs)
    CAPTURE(t.to_string());
    CHECK(parse_ok(t.to_string())[0] == t);
  }
  const std::vector<Tensor> no_nan = {
    vec<float16>({{0x3c00}, {0x8000}, {0x7bff}, {0x0001}, {0x7c00}, {0x3555}}),
    vec<bfloat16>({{0x3f80}, {0x8000}, {0x7f7f}, {0x0001}, {0xff80}, {0x4049}}),
    vec<std::complex<float>>({{1.5f, -2.0f}, {-0.0f, 1e-45f}}),
    vec<std::complex<double>>({{1e300, -1e-300}, {0.1, 3}}),
  };
  for (const Tensor& t : no_nan) {
    CAPTURE(t.to_string());
    CHECK(parse_ok(t.to_string())[0] == t);
  }
  CHECK(vec<uint8_t>({0, 255}).to_string() == "uint8([0, 255])");
  CHECK(Tensor::scalar(float16::from_float(0.5f)).to_string() == "float16(0.5)");
  CHECK(vec<std::complex<float>>({{1, -2}}).to_string() == "complex64([complex(1.0, -2.0)])");
  CHECK(parse_ok("complex(1, 2)")[0] == Tensor::scalar(std::complex<double>{1, 2}));
  CHECK(parse_ok("complex64([1, complex(0, -1.5)])")[0] ==
        vec<std::complex<float>>({{1, 0}, {0, -1.5f}}));
  CHECK(parse_ok("uint64(18446744073709551615)")[0] == Tensor::scalar(~uint64_t{0}));
}

TEST_CASE("literals that do not fit their dtype are refused, naming the dtype") {
  const std::pair<const char*, const char*> cases[] = {
    {"uint8(256)", "int literal `256` does not fit in uint8"},
    {"uint16(-1)", "int literal `-1` does not fit in uint16"},
    {"int8([1, -129])", "int literal `-129` does not fit in int8"},
    {"float16(70000.0)", "float literal `70000.0` is out of range for float16"},
    {"uint8(1.5)", "`uint8(...)` cannot hold a float `1.5`"},
    {"complex64(complex(1))", "`complex(...)` takes two numbers"},
  };
  for (const auto& [text, message] : cases) {
    CAPTURE(text);
    auto e = parse_element(text);
    REQUIRE_FALSE(e.ok());
    CHECK(e.status().code() == ErrorCode::invalid_argument);
    CHECK(e.status().message().find(message) != std::string::npos);
  }
}

TEST_CASE("graphs holding every dtype survive binary and JSON serialization") {
  const Dataset ds = Dataset::from_tensors(Element{awkward_tensors()});
  auto binary = from_binary(to_binary(ds));
  REQUIRE_MESSAGE(binary.ok(), binary.status().to_string());
  auto json = from_json(to_json(ds));
  REQUIRE_MESSAGE(json.ok(), json.status().to_string());
  const auto want = ds.collect();
  REQUIRE(want.ok());
  CHECK(*binary->collect() == *want);
  CHECK(*json->collect() == *want);
  // Equal graphs of different dtypes are different datasets.
  CHECK(fingerprint(Dataset::from_tensors(Element{vec<uint16_t>({1})})) !=
        fingerprint(Dataset::from_tensors(Element{vec<int16_t>({1})})));
}

TEST_CASE("cast converts like tf.cast and bitcast reinterprets like tf.bitcast") {
  auto cast = [](const Tensor& t, const char* to) {
    auto out = call_map("cast", Element{t}, {{"dtype", std::string{to}}});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    return (*out)[0];
  };
  CHECK(cast(vec<uint8_t>({0, 255}), "float32") == vec<float>({0, 255}));
  CHECK(cast(vec<float>({-1.5f, 300.0f, NAN, 2.9f}), "uint8") == vec<uint8_t>({0, 255, 0, 2}));
  CHECK(cast(vec<int64_t>({300, -1}), "int8") == vec<int8_t>({44, -1})); // wraps
  CHECK(cast(vec<int64_t>({-1}), "uint64") == vec<uint64_t>({~uint64_t{0}}));
  CHECK(cast(vec<uint64_t>({~uint64_t{0}}), "int64") == vec<int64_t>({-1}));
  CHECK(cast(vec<std::complex<double>>({{2.5, -1}}), "float32") == vec<float>({2.5f}));
  CHECK(cast(vec<double>({0.5}), "complex64") == vec<std::complex<float>>({{0.5f, 0}}));
  CHECK(cast(vec<float>({1.0f, 0.1f}), "float16") ==
        vec<float16>({{0x3c00}, float16::from_float(0.1f)}));
  CHECK(cast(vec<bfloat16>({{0x4049}}), "float64") == vec<double>({3.140625}));
  CHECK(cast(vec<int32_t>({0, 7}), "bool") == vec<bool>({false, true}));
  auto bad = call_map("cast", Element{Tensor::scalar("x")}, {{"dtype", std::string{"uint8"}}});
  CHECK(bad.status().message() ==
        "cast: component 0: cannot convert string to uint8 (only numeric and bool dtypes convert)");
  auto unknown = call_map("cast", Element{Tensor::scalar(1.0)}, {{"dtype", std::string{"int4"}}});
  CHECK(unknown.status().message().find("cast: `dtype` must name a numeric or bool dtype") == 0);

  auto bitcast = call_map("bitcast", Element{vec<uint16_t>({0x7e01, 0x3c00})},
                          {{"dtype", std::string{"float16"}}});
  REQUIRE(bitcast.ok());
  CHECK((*bitcast)[0] == vec<float16>({{0x7e01}, {0x3c00}}));
  auto narrower = call_map("bitcast", Element{Tensor::scalar(uint32_t{0x3f800000})},
                           {{"dtype", std::string{"uint16"}}});
  REQUIRE(narrower.ok());
  CHECK((*narrower)[0] == vec<uint16_t>({0x0000, 0x3f80}));
  auto wider = call_map("bitcast", Element{vec<uint32_t>({0, 0x3ff00000})},
                        {{"dtype", std::string{"float64"}}});
  REQUIRE(wider.ok());
  CHECK((*wider)[0] == Tensor::scalar(1.0));
  auto wrong =
    call_map("bitcast", Element{vec<uint32_t>({1, 2, 3})}, {{"dtype", std::string{"float64"}}});
  CHECK(wrong.status().message() == "bitcast: component 0: a uint32 tensor read as float64 needs a "
                                    "last dimension of 2, got a last dimension of 3");
}

TEST_CASE("arithmetic functions compute on every numeric dtype and refuse the others") {
  auto square = [](const Tensor& t) {
    auto out = call_map("square", Element{t});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    return (*out)[0];
  };
  CHECK(square(vec<uint8_t>({16, 3})) == vec<uint8_t>({0, 9})); // wraps
  CHECK(square(vec<uint16_t>({65535})) == vec<uint16_t>({1}));  // no int overflow
  CHECK(square(vec<int8_t>({-12})) == vec<int8_t>({static_cast<int8_t>(144)}));
  CHECK(square(vec<float16>({float16::from_float(1.5f)})) ==
        vec<float16>({float16::from_float(2.25f)}));
  CHECK(square(vec<std::complex<float>>({{0, 1}})) == vec<std::complex<float>>({{-1, 0}}));
  auto scaled =
    call_map("scale", Element{vec<bfloat16>({bfloat16::from_float(2.0f)})}, {{"factor", 0.5}});
  REQUIRE(scaled.ok());
  CHECK((*scaled)[0] == vec<bfloat16>({bfloat16::from_float(1.0f)}));
  const std::vector<Tensor> numbers = {vec<int8_t>({-5}), vec<std::complex<double>>({{1, -2}}),
                                       vec<float16>({float16::from_float(0.5f)})};
  auto text = call_map("to_string", Element{numbers});
  REQUIRE(text.ok());
  CHECK((*text)[0].strings() == std::vector<std::string>{"-5"});
  CHECK((*text)[1].strings() == std::vector<std::string>{"1-2j"});
  CHECK((*text)[2].strings() == std::vector<std::string>{"0.5"});
  auto refused = call_map("add", Element{vec<bool>({true})});
  CHECK(refused.status().message() ==
        "add: component 0 has dtype bool, expected a numeric dtype (an integer, float or complex)");
}

TEST_CASE("batch, unbatch and padded_batch move every dtype's bytes unchanged") {
  const Element element{awkward_tensors()};
  auto batched = Dataset::from_tensors(element).repeat(3).batch(2).unbatch().collect();
  REQUIRE_MESSAGE(batched.ok(), batched.status().to_string());
  REQUIRE(batched->size() == 3);
  for (const Element& e : *batched)
    CHECK(e == element);

  // Padding values of another dtype convert to the component's (as tf.cast).
  auto rows = Dataset::from_tensors(Element{vec<uint8_t>({7})})
                .padded_batch(1, {{3}}, {Tensor::scalar(int64_t{255})})
                .collect();
  REQUIRE_MESSAGE(rows.ok(), rows.status().to_string());
  CHECK((*rows)[0][0] == std::move(Tensor::from_values<uint8_t>({1, 3}, {7, 255, 255})).value());
  auto halves = Dataset::from_tensors(Element{vec<float16>({float16::from_float(1.0f)})})
                  .padded_batch(1, {{2}}, {Tensor::scalar(0.5)})
                  .collect();
  REQUIRE_MESSAGE(halves.ok(), halves.status().to_string());
  CHECK((*halves)[0][0] ==
        std::move(Tensor::from_values<float16>(
                    {1, 2}, {float16::from_float(1.0f), float16::from_float(0.5f)}))
          .value());
}

TEST_CASE("cache files of every dtype are format version 3, versions 2 and 4 are refused") {
  char dir[] = "/tmp/conveyor_dtypes_XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string prefix = std::string(dir) + "/c";
  const std::string fingerprint = "0123456789abcdef";
  const Element element{awkward_tensors()};
  {
    auto writer = kernels::CacheFileWriter::create(prefix, fingerprint);
    REQUIRE_MESSAGE(writer.ok(), writer.status().to_string());
    REQUIRE((*writer)->append(element).ok());
    REQUIRE((*writer)->commit().ok());
  }
  const std::string path = kernels::cache_file_path(prefix);
  auto set_version = [&](char v) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(7);
    f.put(v);
  };
  auto read_back = [&]() -> Expected<Element> {
    auto reader = kernels::CacheFileReader::open(prefix, fingerprint);
    if (!reader.ok())
      return reader.status();
    Element e;
    bool end = false;
    CONVEYOR_RETURN_IF_ERROR((*reader)->read(e, end));
    return e;
  };
  std::ifstream in(path, std::ios::binary);
  std::string magic(8, '\0');
  in.read(&magic[0], 8);
  CHECK(magic == "CVYCACH3");
  auto v3 = read_back();
  REQUIRE_MESSAGE(v3.ok(), v3.status().to_string());
  CHECK(*v3 == element);
  for (char v : {'2', '4'}) { // an older build's (no identity), a newer one's
    set_version(v);
    auto refused = read_back();
    CHECK(refused.status().code() == ErrorCode::version_mismatch);
    CHECK(refused.status().message() ==
          "`cache`: the file `" + path + "` is a conveyor cache file of format version " +
            std::string(1, v) +
            ", this build reads version 3 only (remove the file: the next complete pass writes "
            "it again)");
  }
  std::remove(path.c_str());
  ::rmdir(dir);
}
