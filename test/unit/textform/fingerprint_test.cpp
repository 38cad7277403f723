// Fingerprints: 16 lowercase hex digits, equal for equal definitions (builder or text), different
// for different ones, and the same in another process — checked by re-running this test binary
// as a child that writes its fingerprints to a file. Pinned values catch any change to the
// canonical encoding (which would split the service's dataset ids across versions).
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include "pipeline/graph/serialize.hpp"
#include "pipeline/graph/text_form.hpp"
#include "test/support/child_process.hpp"
#include "test/unit/textform/samples.hpp"

using namespace conveyor;
using conveyor::textform_test::samples;

namespace {

constexpr const char* kChildOutputVariable = "CONVEYOR_TEXTFORM_FINGERPRINT_OUT";
constexpr const char* kChildCase =
  "fingerprint child: writes the sample fingerprints to a file when asked";

// "<fingerprint> <canonical text>" for every sample, one per line.
std::map<std::string, std::string> own_fingerprints() {
  std::map<std::string, std::string> out;
  for (const auto& s : samples())
    out[s.text] = fingerprint(s.built);
  return out;
}

Dataset parse_ok(const std::string& text) {
  auto d = parse_dataset(text);
  REQUIRE_MESSAGE(d.ok(), text, " -> ", d.status().to_string());
  return std::move(d).value();
}

bool is_lower_hex16(const std::string& s) {
  return s.size() == 16 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

} // namespace

// Does nothing unless the parent test below runs this binary with kChildOutputVariable set.
TEST_CASE("fingerprint child: writes the sample fingerprints to a file when asked") {
  const char* path = std::getenv(kChildOutputVariable);
  if (path == nullptr)
    return;
  std::ofstream out(path);
  for (const auto& [text, fp] : own_fingerprints())
    out << fp << ' ' << text << '\n';
  REQUIRE(out.good());
}

TEST_CASE("fingerprints are the same in a separate process") {
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  REQUIRE(n > 0);
  exe[n] = '\0';
  std::string path =
    testing::test_log_dir() + "/textform-fingerprints-" + std::to_string(::getpid()) + ".txt";
  std::remove(path.c_str());

  ::setenv(kChildOutputVariable, path.c_str(), 1);
  auto result = testing::run_to_completion({exe, std::string{"--test-case="} + kChildCase},
                                           testing::Millis{60000}, "textform-fingerprint-child",
                                           testing::test_log_dir());
  ::unsetenv(kChildOutputVariable);
  REQUIRE_MESSAGE(result.exit_code == 0, result.describe);

  std::map<std::string, std::string> theirs;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto space = line.find(' ');
    REQUIRE(space == 16);
    theirs[line.substr(space + 1)] = line.substr(0, space);
  }
  std::remove(path.c_str());
  CHECK(theirs.size() == samples().size());
  CHECK(theirs == own_fingerprints());
}

TEST_CASE("fingerprints are pinned: a change to the canonical encoding must be deliberate") {
  const std::vector<std::pair<std::string, std::string>> pinned = {
    {"range(10)", "d0d73e813f1581d6"},
    {"range(100).map(square).shuffle(16, seed=3).batch(8)", "d49807e914cc9165"},
    {"zip(range(3), from_tensor_slices([\"a\", \"b\", \"c\"])).map(scale(factor=2.5))",
     "63173ac285074192"},
    {"from_tensor_slices((int32([1, 2, 3]), [\"x\", \"y\", \"z\"]))", "e4ebf05dc64b9518"},
    {"range(5).map(f(b=true, i=-3, s=\"x\\ny\", x=1.0), num_parallel_calls=4)", "d2531018668576bc"},
    {"from_tensors(float32([], shape=[0, 3]))", "de4bb45654ea5157"},
    {"list_files(\"/d/*\", shuffle=false, seed=7)", "019b6fe401d43df0"},
  };
  for (const auto& [text, expected] : pinned) {
    CAPTURE(text);
    CHECK(fingerprint(parse_ok(text)) == expected);
  }
}

TEST_CASE("fingerprints are 16 lowercase hex digits, equal for equal definitions") {
  for (const auto& s : samples()) {
    CAPTURE(s.text);
    std::string fp = fingerprint(s.built);
    CHECK(is_lower_hex16(fp));
    CHECK(s.built.fingerprint() == fp);
    CHECK(fingerprint(parse_ok(s.text)) == fp); // the text form builds the same graph
    CHECK(fingerprint(Dataset{s.built.node()}) == fp);
  }
}

TEST_CASE("different definitions have different fingerprints") {
  CHECK(fingerprint(Dataset::range(10).shuffle(8, 3)) !=
        fingerprint(Dataset::range(10).shuffle(8, 4)));
  CHECK(fingerprint(Dataset::range(10)) != fingerprint(Dataset::range(11)));
  CHECK(fingerprint(Dataset::range(10).map("square")) !=
        fingerprint(Dataset::range(10).map("scale")));
  CHECK(fingerprint(Dataset::range(10).map(FunctionRef{"scale", {{"factor", 2.0}}})) !=
        fingerprint(Dataset::range(10).map(FunctionRef{"scale", {{"factor", int64_t{2}}}})));
  CHECK(fingerprint(Dataset::from_tensors(Element{Tensor::scalar(int64_t{1})})) !=
        fingerprint(Dataset::from_tensors(Element{Tensor::scalar(int32_t{1})})));
  CHECK(fingerprint(Dataset::from_tensors(Element{Tensor::vector<int64_t>({1, 2})})) !=
        fingerprint(Dataset::from_tensors(
          Element{std::move(Tensor::from_values<int64_t>({2, 1}, {1, 2})).value()})));
  CHECK(fingerprint(Dataset::text_lines({"ab", "c"})) !=
        fingerprint(Dataset::text_lines({"a", "bc"})));
  std::set<std::string> all;
  for (const auto& s : samples())
    all.insert(fingerprint(s.built));
  CHECK(all.size() == samples().size());
}

TEST_CASE("fingerprint_without_pickles: a function's pickle is left out, all else counts") {
  auto with = [](const std::string& pickle, const std::string& qualname) {
    return Dataset::range(10).map(
      FunctionRef{"python_map", {{"pickle", pickle}, {"qualname", qualname}}});
  };
  // Two runs' cloudpickles of one lambda differ: the file fingerprint must not.
  CHECK(fingerprint(with("AAAA", "__main__.<lambda>")) !=
        fingerprint(with("BBBB", "__main__.<lambda>")));
  CHECK(fingerprint_without_pickles(with("AAAA", "__main__.<lambda>")) ==
        fingerprint_without_pickles(with("BBBB", "__main__.<lambda>")));
  CHECK(fingerprint_without_pickles(with("AAAA", "__main__.<lambda>")) !=
        fingerprint_without_pickles(with("AAAA", "__main__.other")));
  // Without pickles it is the fingerprint itself (files of such graphs keep their identity).
  for (const auto& s : samples())
    CHECK(fingerprint_without_pickles(s.built) == fingerprint(s.built));
}
