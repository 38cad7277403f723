// Binary and JSON forms of the dataset graph: exact round trips of every op, values JSON cannot
// hold directly, and corrupt / wrong-version input giving errors (never crashes).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "pipeline/graph/ops.hpp"
#include "pipeline/graph/serialize.hpp"
#include "pipeline/graph/text_form.hpp"
#include "test/unit/textform/samples.hpp"

using namespace conveyor;
using conveyor::textform_test::samples;

namespace {

// Every node of a decoded graph must satisfy its schema (so kernels can trust it).
void check_all_nodes(const Node& n) {
  CHECK(check_node_schema(n).ok());
  for (const auto& in : n.inputs)
    check_all_nodes(*in);
}

// A dataset with the values JSON cannot carry as plain JSON.
Dataset awkward_dataset() {
  float nan_payload;
  uint32_t bits = 0x7fc00123; // a NaN with payload bits
  std::memcpy(&nan_payload, &bits, sizeof bits);
  double negative_nan = -std::numeric_limits<double>::quiet_NaN();
  Element e{
    {Tensor::vector<std::string>({std::string{"a\0b", 3}, "plain"}),
     Tensor::vector<float>({nan_payload, 1.5f, -0.0f, std::numeric_limits<float>::infinity()}),
     Tensor::vector<double>({negative_nan, 1e-310})}};
  return Dataset::from_tensors(e)
    .map(FunctionRef{
      "f", {{"s", std::string{"x\0y", 3}}, {"d", negative_nan}, {"big", int64_t{1} << 62}}})
    .cache(std::string{"c\0", 2});
}

uint32_t le32(const std::string& s, std::size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<std::size_t>(i)]);
  return v;
}

} // namespace

TEST_CASE("every sample survives binary and JSON exactly") {
  for (const auto& s : samples()) {
    CAPTURE(s.text);
    auto from_bin = from_binary(to_binary(s.built));
    REQUIRE_MESSAGE(from_bin.ok(), from_bin.status().to_string());
    CHECK(*from_bin == s.built);
    CHECK(to_text(*from_bin) == s.text);
    CHECK(fingerprint(*from_bin) == fingerprint(s.built));

    std::string json = to_json(s.built);
    auto from_js = from_json(json);
    REQUIRE_MESSAGE(from_js.ok(), from_js.status().to_string(), "\n", json);
    CHECK(*from_js == s.built);
    CHECK(to_text(*from_js) == s.text);
  }
}

TEST_CASE("NUL bytes, NaN payloads, -0.0 and subnormals survive both forms bit for bit") {
  Dataset d = awkward_dataset();
  // A NaN never equals itself, so the graphs are compared by their exact encodings.
  auto b = from_binary(to_binary(d));
  REQUIRE(b.ok());
  CHECK(to_binary(*b) == to_binary(d));
  std::string json = to_json(d);
  CHECK(json.find("\"encoding\": \"hex\"") != std::string::npos);
  CHECK(json.find("\"kind\": \"string_hex\"") != std::string::npos);
  CHECK(json.find("\"kind\": \"float64_hex\"") != std::string::npos);
  auto j = from_json(json);
  REQUIRE_MESSAGE(j.ok(), j.status().to_string());
  CHECK(to_binary(*j) == to_binary(d));
  CHECK(fingerprint(*j) == fingerprint(d));
}

TEST_CASE("the binary header is the magic and the little-endian format version") {
  std::string bytes = to_binary(Dataset::range(3));
  REQUIRE(bytes.size() > 8);
  CHECK(bytes.compare(0, 4, "CNVG") == 0);
  CHECK(le32(bytes, 4) == kGraphFormatVersion);
}

TEST_CASE("the JSON form is readable and names its format and version") {
  std::string json = to_json(Dataset::range(3).batch(2));
  CHECK(json.find("\"format\": \"conveyor.graph\"") != std::string::npos);
  CHECK(json.find("\"version\": 1") != std::string::npos);
  CHECK(json.find("\"op\": \"batch\"") != std::string::npos);
  CHECK(json.find("\"name\": \"batch_size\"") != std::string::npos);
  CHECK(json.find("\"kind\": \"int64\"") != std::string::npos);
}

TEST_CASE("JSON members may come in any order") {
  const char* json = R"({"version": 1, "graph": {
      "attrs": [{"value": 2, "kind": "int64", "name": "batch_size"},
                {"kind": "bool", "name": "drop_remainder", "value": true}],
      "inputs": [{"attrs": [{"name": "start", "kind": "int64", "value": 0},
                            {"name": "step", "kind": "int64", "value": 1},
                            {"name": "stop", "kind": "int64", "value": 3}],
                  "op": "range", "inputs": []}],
      "op": "batch"}, "format": "conveyor.graph"})";
  auto d = from_json(json);
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  CHECK(to_text(*d) == "range(3).batch(2, drop_remainder=true)");
}

TEST_CASE("another format version is version_mismatch naming both versions") {
  std::string bytes = to_binary(Dataset::range(3));
  bytes[4] = 7;
  auto d = from_binary(bytes);
  REQUIRE(!d.ok());
  CHECK(d.status().code() == ErrorCode::version_mismatch);
  CHECK(d.status().message() == "dataset graph has format version 7, this build reads version 1");

  std::string json = to_json(Dataset::range(3));
  json.replace(json.find("\"version\": 1"), 12, "\"version\": 9");
  auto j = from_json(json);
  REQUIRE(!j.ok());
  CHECK(j.status().code() == ErrorCode::version_mismatch);
  CHECK(j.status().message() ==
        "dataset graph JSON has format version 9, this build reads version 1");
}

TEST_CASE("garbage binary is data_loss") {
  auto check_loss = [](const std::string& bytes, const std::string& expected) {
    auto d = from_binary(bytes);
    REQUIRE(!d.ok());
    CHECK(d.status().code() == ErrorCode::data_loss);
    CHECK(d.status().message() == expected);
  };
  check_loss("", "dataset graph is 0 bytes, too short for its 8-byte header");
  check_loss("not a graph at all",
             "bytes are not a conveyor dataset graph (the magic \"CNVG\" is missing)");
  std::string bytes = to_binary(Dataset::range(3));
  check_loss(bytes + "x", "dataset graph has 1 unexpected bytes after its end");

  // The op name's length claims 2^60 bytes: refused before allocating.
  std::string huge = bytes.substr(0, 9);
  for (int i = 0; i < 8; ++i)
    huge += static_cast<char>(i == 7 ? 0x10 : 0);
  auto d = from_binary(huge);
  REQUIRE(!d.ok());
  CHECK(d.status().code() == ErrorCode::data_loss);
  CHECK(d.status().message().find("exceeds the 0 bytes left") != std::string::npos);
}

TEST_CASE("every truncation of every sample's binary is data_loss") {
  for (const auto& s : samples()) {
    CAPTURE(s.text);
    std::string bytes = to_binary(s.built);
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      auto d = from_binary(std::string_view{bytes}.substr(0, n));
      REQUIRE(!d.ok());
      CHECK(d.status().code() == ErrorCode::data_loss);
    }
  }
}

TEST_CASE("random byte corruption never crashes and never yields an invalid graph") {
  std::mt19937 rng(7);
  std::vector<std::string> originals;
  for (const auto& s : samples())
    originals.push_back(to_binary(s.built));
  originals.push_back(to_binary(awkward_dataset()));
  int decoded = 0, refused = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string bytes = originals[rng() % originals.size()];
    int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f)
      bytes[8 + rng() % (bytes.size() - 8)] = static_cast<char>(rng());
    auto d = from_binary(bytes);
    if (d.ok()) {
      ++decoded;
      check_all_nodes(*d->node());
    } else {
      ++refused;
      CHECK(d.status().code() == ErrorCode::data_loss);
    }
  }
  CHECK(refused > 0);
  MESSAGE("corrupted graphs: ", decoded, " still decoded (a changed value), ", refused, " refused");
}

TEST_CASE("garbage JSON is data_loss") {
  auto loss = [](const std::string& json) {
    auto d = from_json(json);
    REQUIRE_MESSAGE(!d.ok(), json);
    CHECK(d.status().code() == ErrorCode::data_loss);
    return d.status().message();
  };
  loss("");
  loss("not json");
  loss("[1, 2, 3]");
  loss("{\"format\": \"conveyor.graph\"}");
  CHECK(loss(R"({"format": "other", "version": 1})") ==
        "JSON has \"format\": \"other\", expected \"conveyor.graph\"");
  CHECK(loss(std::string(100000, '[')) == "dataset graph JSON is nested deeper than 2016 levels");
  const std::string head = R"({"format": "conveyor.graph", "version": 1, "graph": )";
  loss(head + R"({"op": "range", "inputs": [], "attrs": []}})"); // missing attributes
  loss(head + R"({"op": "nope", "inputs": [], "attrs": []}})");  // unknown op
  loss(head + R"({"op": "range", "inputs": {}, "attrs": []}})"); // wrong type
  loss(
    head +
    R"({"op": "take", "inputs": [], "attrs": [{"name": "count", "kind": "int64", "value": 1}]}})");
  loss(
    head +
    R"({"op": "from_tensors", "inputs": [], "attrs": [{"name": "element", "kind": "element", "value": [
      {"dtype": "int64", "shape": [3], "encoding": "plain", "values": [1, 2]}]}]}})"); // count vs shape
  loss(
    head +
    R"({"op": "from_tensors", "inputs": [], "attrs": [{"name": "element", "kind": "element", "value": [
      {"dtype": "int64", "shape": [4611686018427387904, 4], "encoding": "plain", "values": []}]}]}})");
  loss(
    head +
    R"({"op": "from_tensors", "inputs": [], "attrs": [{"name": "element", "kind": "element", "value": [
      {"dtype": "int32", "shape": [], "encoding": "plain", "values": [4294967296]}]}]}})"); // int32 range
  loss(
    head +
    R"({"op": "from_tensors", "inputs": [], "attrs": [{"name": "element", "kind": "element", "value": [
      {"dtype": "int64", "shape": [], "encoding": "hex", "values": ["zz"]}]}]}})");
  loss(
    head +
    R"({"op": "cache", "inputs": [], "attrs": [{"name": "filename", "kind": "strange", "value": 1}]}})");

  // Every truncation of a real JSON document.
  std::string json = to_json(textform_test::samples().back().built);
  for (std::size_t n = 0; n + 1 < json.size(); n += 7)
    loss(json.substr(0, n));
}
