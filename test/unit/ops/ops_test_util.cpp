#include "ops_test_util.hpp"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <doctest/doctest.h>

#include "conveyor/iterator_state.hpp"

namespace conveyor::test {

std::atomic<int64_t> count_calls{0};
std::atomic<int64_t> varying_length{5};

namespace {

Expected<int64_t> int_scalar(const char* fn, const Element& e) {
  if (e.size() == 0 || e[0].dtype() != DType::int64 || e[0].rank() != 0)
    return invalid_argument(std::string(fn) + ": expected an int64 scalar");
  return e[0].as_int64();
}

FunctionDef map_def(std::string name, std::vector<ParamSpec> params, MapFn fn) {
  FunctionDef d;
  d.name = std::move(name);
  d.kind = FunctionKind::map;
  d.params = std::move(params);
  d.doc = "test helper";
  d.map = std::move(fn);
  return d;
}

// Yields 0..n-1 (parameter `n`); with `saves`, its iterator saves and restores its position.
class TestCounter : public Iterator {
public:
  TestCounter(int64_t n, bool saves) : n_(n), saves_(saves) {}
  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = next_ >= n_;
    if (!end_of_sequence)
      out = Element{Tensor::scalar(next_++)};
    return Status::OK();
  }
  Status save(IteratorStateWriter& out) override {
    if (!saves_)
      return Iterator::save(out);
    out.put_tag("test_counter");
    out.put_int(next_);
    return Status::OK();
  }
  Status restore(IteratorStateReader& in) override {
    if (!saves_)
      return Iterator::restore(in);
    CONVEYOR_RETURN_IF_ERROR(in.expect_tag("test_counter"));
    next_ = in.get_int();
    return in.status();
  }

private:
  int64_t n_;
  bool saves_;
  int64_t next_ = 0;
};

FunctionDef counter_def(std::string name, bool saves) {
  FunctionDef d;
  d.name = std::move(name);
  d.kind = FunctionKind::source;
  d.params = {{"n", int64_t{5}}};
  d.doc = "test helper";
  d.source = [saves](const Params& p) -> Expected<std::unique_ptr<Iterator>> {
    return std::unique_ptr<Iterator>(
      std::make_unique<TestCounter>(std::get<int64_t>(p.at("n")), saves));
  };
  return d;
}

// Yields 0..varying_length-1, registered skip_by_count (which it breaks when the length changes).
FunctionDef varying_def() {
  FunctionDef d;
  d.name = "test_varying_source";
  d.kind = FunctionKind::source;
  d.doc = "test helper";
  d.source = [](const Params&) -> Expected<std::unique_ptr<Iterator>> {
    return std::unique_ptr<Iterator>(std::make_unique<TestCounter>(varying_length.load(), false));
  };
  d.source_checkpoint = SourceCheckpoint::skip_by_count;
  return d;
}

void add_or_fail(FunctionDef def) {
  Status st = FunctionRegistry::global().add(std::move(def));
  REQUIRE_MESSAGE(st.ok(), st.to_string());
}

} // namespace

void register_test_functions() {
  static std::once_flag once;
  std::call_once(once, [] {
    // n -> [0, 1, ..., n-1]: elements of different shapes.
    add_or_fail(map_def("test_iota", {}, [](const Element& e, const Params&) -> Expected<Element> {
      auto n = int_scalar("test_iota", e);
      if (!n.ok())
        return n.status();
      std::vector<int64_t> v;
      for (int64_t i = 0; i < *n; ++i)
        v.push_back(i);
      return Element{Tensor::vector(v)};
    }));
    add_or_fail(
      map_def("test_count_calls", {}, [](const Element& e, const Params&) -> Expected<Element> {
        ++count_calls;
        return e;
      }));
    add_or_fail(map_def("test_fail_on", {{"value", int64_t{0}}},
                        [](const Element& e, const Params& p) -> Expected<Element> {
                          auto x = int_scalar("test_fail_on", e);
                          if (!x.ok())
                            return x.status();
                          if (*x == std::get<int64_t>(p.at("value")))
                            return invalid_argument("test_fail_on: got " + std::to_string(*x));
                          return e;
                        }));
    // Sleeps longer for smaller values, so parallel calls finish out of input order.
    add_or_fail(
      map_def("test_sleep_desc", {}, [](const Element& e, const Params&) -> Expected<Element> {
        auto x = int_scalar("test_sleep_desc", e);
        if (!x.ok())
          return x.status();
        std::this_thread::sleep_for(std::chrono::microseconds(200 * (8 - *x % 8)));
        return Element{Tensor::scalar(*x * 10)};
      }));
    add_or_fail(counter_def("test_saving_source", true));
    add_or_fail(counter_def("test_unsaved_source", false));
    add_or_fail(varying_def());
  });
}

Status drain(Iterator& it, std::vector<Element>& out, int64_t limit) {
  for (int64_t i = 0; i < limit; ++i) {
    Element e;
    bool end = false;
    CONVEYOR_RETURN_IF_ERROR(it.get_next(e, end));
    if (end)
      return Status::OK();
    out.push_back(std::move(e));
  }
  return Status::OK();
}

std::vector<Element> run(const Dataset& ds) {
  register_test_functions();
  auto it = ds.make_iterator();
  REQUIRE_MESSAGE(it.ok(), it.status().to_string());
  std::vector<Element> out;
  Status st = drain(**it, out);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  return out;
}

Status first_error(const Dataset& ds) {
  register_test_functions();
  auto it = ds.make_iterator();
  if (!it.ok())
    return it.status();
  std::vector<Element> out;
  return drain(**it, out);
}

std::string str(const std::vector<Element>& elements) {
  std::string s = "[";
  for (std::size_t i = 0; i < elements.size(); ++i)
    s += (i ? ", " : "") + elements[i].to_string();
  return s + "]";
}

std::string show(const Dataset& ds) { return str(run(ds)); }

Element ints(const std::vector<int64_t>& values) { return Element{Tensor::vector(values)}; }

TempDir::TempDir() {
  static std::atomic<int> next{0};
  path_ = std::string(CONVEYOR_BINARY_DIR) + "/test-tmp/ops-" + std::to_string(::getpid()) + "-" +
          std::to_string(next++);
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary);
  f << content;
  REQUIRE(f.good());
}

FakeSplitProvider::FakeSplitProvider(std::vector<std::vector<Split>> epochs,
                                     double unavailable_probability, uint64_t seed)
  : epochs_(std::move(epochs)), probability_(unavailable_probability), rng_(seed) {}

std::vector<std::vector<Split>>
FakeSplitProvider::range_splits(int64_t num_elements, int64_t split_size, int64_t num_epochs) {
  std::vector<std::vector<Split>> epochs(num_epochs);
  for (int64_t e = 0; e < num_epochs; ++e)
    for (int64_t begin = 0, i = 0; begin < num_elements; begin += split_size, ++i)
      epochs[e].push_back(Split{e, i, begin, std::min(begin + split_size, num_elements), ""});
  return epochs;
}

Status FakeSplitProvider::get_next(Split& out, bool& end_of_splits) {
  end_of_splits = false;
  if (probability_ > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < probability_) {
    ++unavailable_count_;
    return unavailable(unavailable_message());
  }
  if (epoch_ >= static_cast<int64_t>(epochs_.size())) {
    end_of_splits = true;
    return Status::OK();
  }
  const auto& splits = epochs_[epoch_];
  if (next_ >= static_cast<int64_t>(splits.size())) {
    ++epoch_;
    next_ = 0;
    end_of_splits = true;
    return Status::OK();
  }
  out = splits[next_++];
  return Status::OK();
}

Status FakeSplitProvider::restore(const SplitPosition& pos) {
  epoch_ = pos.epoch;
  next_ = pos.next_index;
  return Status::OK();
}

} // namespace conveyor::test
