// The built-in functions of every registry: small numeric maps and predicates for examples and
// tests, dataset functions for flat_map/interleave, and helpers the service benchmarks use
// (`bytes` for big elements, `sleep_us` for slow pipelines, `burn` for CPU-bound ones).
#include "pipeline/functions/builtin_functions.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <complex>
#include <chrono>
#include <thread>
#include <type_traits>

#include "pipeline/functions/dtype_functions.hpp"
#include "pipeline/functions/functions.hpp"
#ifdef CONVEYOR_IMAGE_OPS
#include "pipeline/functions/image_functions.hpp"
#endif
#include "pipeline/tensor/dtype_convert.hpp"
#include "pipeline/runtime/memory_budget.hpp"

namespace conveyor {

namespace {

// --- parameter and argument helpers

// Kernels pass resolved parameters; the fallback only matters to direct callers.
int64_t int_param(const Params& params, const char* name, int64_t fallback) {
  auto it = params.find(name);
  return it != params.end() && std::holds_alternative<int64_t>(it->second)
           ? std::get<int64_t>(it->second)
           : fallback;
}

double float_param(const Params& params, const char* name, double fallback) {
  auto it = params.find(name);
  if (it == params.end())
    return fallback;
  if (std::holds_alternative<double>(it->second))
    return std::get<double>(it->second);
  if (std::holds_alternative<int64_t>(it->second))
    return static_cast<double>(std::get<int64_t>(it->second));
  return fallback;
}

bool is_integer(DType d) { return dtype_is_integer(d); }
// Every dtype arithmetic is defined on: integers, floats (half floats computed in float32 and
// rounded back, as TensorFlow's CPU kernels do) and complex.
bool is_numeric(DType d) { return is_integer(d) || dtype_is_floating(d) || dtype_is_complex(d); }

Status require_components(const char* fn, const Element& e) {
  if (e.size() == 0)
    return invalid_argument(std::string{fn} +
                            ": needs an element with at least one component, got ()");
  return Status::OK();
}

// The first component as an integer scalar (predicates and dataset functions key on it).
Expected<int64_t> first_int_scalar(const char* fn, const Element& e) {
  CONVEYOR_RETURN_IF_ERROR(require_components(fn, e));
  const Tensor& t = e[0];
  if (!is_integer(t.dtype()) || t.rank() != 0)
    return invalid_argument(std::string{fn} + ": component 0 must be an integer scalar, got " +
                            dtype_name(t.dtype()) + " of rank " + std::to_string(t.rank()));
  return t.as_int64();
}

Expected<std::string> first_string_scalar(const char* fn, const Element& e) {
  CONVEYOR_RETURN_IF_ERROR(require_components(fn, e));
  const Tensor& t = e[0];
  if (t.dtype() != DType::string || t.rank() != 0)
    return invalid_argument(std::string{fn} + ": component 0 must be a string scalar, got " +
                            dtype_name(t.dtype()) + " of rank " + std::to_string(t.rank()));
  return t.strings()[0];
}

Status require_numeric(const char* fn, std::size_t index, DType d) {
  if (!is_numeric(d))
    return invalid_argument(std::string{fn} + ": component " + std::to_string(index) +
                            " has dtype " + dtype_name(d) +
                            ", expected a numeric dtype (an integer, float or complex)");
  return Status::OK();
}

FunctionDef make_def(std::string name, FunctionKind kind, std::vector<ParamSpec> params,
                     std::string doc) {
  FunctionDef d;
  d.name = std::move(name);
  d.kind = kind;
  d.params = std::move(params);
  d.doc = std::move(doc);
  return d;
}

TensorSpec scalar_spec(DType d) { return TensorSpec{d, {}, false}; }

// Integer arithmetic wraps on overflow, as TensorFlow's does, instead of being undefined. It is
// done in uint64_t: narrower unsigned types would promote to (overflowing) int.
template <class T>
T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  } else {
    return a * b;
  }
}
template <class T>
T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}

// Calls f(T{}) with the C++ type that computes on a numeric dtype's entries (float for the half
// floats, whose entries are converted on the way in and out).
template <class F>
void visit_numeric(DType d, F&& f) {
  switch (d) {
    case DType::int8: f(int8_t{}); break;
    case DType::int16: f(int16_t{}); break;
    case DType::int32: f(int32_t{}); break;
    case DType::int64: f(int64_t{}); break;
    case DType::uint8: f(uint8_t{}); break;
    case DType::uint16: f(uint16_t{}); break;
    case DType::uint32: f(uint32_t{}); break;
    case DType::uint64: f(uint64_t{}); break;
    case DType::float16:
    case DType::bfloat16:
    case DType::float32: f(float{}); break;
    case DType::float64: f(double{}); break;
    case DType::complex64: f(std::complex<float>{}); break;
    case DType::complex128: f(std::complex<double>{}); break;
    default: break;
  }
}

// Entry i of a numeric tensor as T (visit_numeric's type for its dtype), and back.
template <class T>
T get_entry(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::float16)
    return static_cast<T>(t.at<float16>(i).to_float());
  if (t.dtype() == DType::bfloat16)
    return static_cast<T>(t.at<bfloat16>(i).to_float());
  return t.at<T>(i);
}
template <class T>
void set_entry(Tensor& t, int64_t i, T v) {
  unsigned char* p = t.mutable_data<unsigned char>();
  if constexpr (std::is_same_v<T, float>) {
    if (t.dtype() == DType::float16) {
      const float16 h = float16::from_float(v);
      std::memcpy(p + static_cast<std::size_t>(i) * sizeof h, &h, sizeof h);
      return;
    }
    if (t.dtype() == DType::bfloat16) {
      const bfloat16 h = bfloat16::from_float(v);
      std::memcpy(p + static_cast<std::size_t>(i) * sizeof h, &h, sizeof h);
      return;
    }
  }
  std::memcpy(p + static_cast<std::size_t>(i) * sizeof v, &v, sizeof v);
}

// Applies `op` (a generic lambda T -> T) to every entry of every numeric component.
template <class Op>
Expected<Element> map_numeric(const char* fn, const Element& in, Op op) {
  Element out = in;
  for (std::size_t c = 0; c < out.size(); ++c) {
    Tensor& t = out[c];
    CONVEYOR_RETURN_IF_ERROR(require_numeric(fn, c, t.dtype()));
    const int64_t n = t.num_elements();
    visit_numeric(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      for (int64_t i = 0; i < n; ++i)
        set_entry<T>(t, i, op(get_entry<T>(t, i)));
    });
  }
  return out;
}

// Output spec of a dtype-preserving numeric map: the input spec, after checking the dtypes.
SpecFn same_numeric_spec(const char* fn) {
  return [fn](const ElementSpec& in, const Params&) -> Expected<ElementSpec> {
    for (std::size_t c = 0; c < in.components.size(); ++c)
      CONVEYOR_RETURN_IF_ERROR(require_numeric(fn, c, in.components[c].dtype));
    return in;
  };
}

// --- maps

FunctionDef identity() {
  FunctionDef d = make_def("identity", FunctionKind::map, {}, "returns its element unchanged");
  d.map = [](const Element& e, const Params&) -> Expected<Element> { return e; };
  d.output_spec = [](const ElementSpec& in, const Params&) -> Expected<ElementSpec> { return in; };
  return d;
}

FunctionDef square() {
  FunctionDef d =
    make_def("square", FunctionKind::map, {}, "x*x for every entry of every numeric component");
  d.map = [](const Element& e, const Params&) {
    return map_numeric("square", e, [](auto x) { return wrap_mul(x, x); });
  };
  d.output_spec = same_numeric_spec("square");
  return d;
}

FunctionDef add() {
  FunctionDef d = make_def("add", FunctionKind::map, {{"k", int64_t{1}}},
                           "x + k for every entry of every numeric component");
  d.map = [](const Element& e, const Params& p) {
    const int64_t k = int_param(p, "k", 1);
    return map_numeric("add", e, [k](auto x) { return wrap_add(x, static_cast<decltype(x)>(k)); });
  };
  d.output_spec = same_numeric_spec("add");
  return d;
}

// Floats and complex keep their dtype; integers become float32, like
// tf.cast(x, tf.float32) * factor.
DType scaled_dtype(DType d) { return is_integer(d) ? DType::float32 : d; }

FunctionDef scale() {
  FunctionDef d = make_def("scale", FunctionKind::map, {{"factor", 2.0}},
                           "x * factor for every numeric entry; integers become float32");
  d.map = [](const Element& e, const Params& p) -> Expected<Element> {
    const double factor = float_param(p, "factor", 2.0);
    Element out;
    for (std::size_t c = 0; c < e.size(); ++c) {
      const Tensor& t = e[c];
      CONVEYOR_RETURN_IF_ERROR(require_numeric("scale", c, t.dtype()));
      Tensor r{scaled_dtype(t.dtype()), t.shape()};
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        EntryValue v = load_entry(t, i);
        v.re *= factor;
        v.im *= factor;
        v.integral = false;
        store_entry(r, i, v);
      }
      out.components.push_back(std::move(r));
    }
    return out;
  };
  d.output_spec = [](const ElementSpec& in, const Params&) -> Expected<ElementSpec> {
    ElementSpec out = in;
    for (std::size_t c = 0; c < out.components.size(); ++c) {
      CONVEYOR_RETURN_IF_ERROR(require_numeric("scale", c, out.components[c].dtype));
      out.components[c].dtype = scaled_dtype(out.components[c].dtype);
    }
    return out;
  };
  return d;
}

template <class T>
std::string number_text(T v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v); // shortest form that reads back exactly
  return std::string(buf, res.ptr);
}

FunctionDef to_string_fn() {
  FunctionDef d =
    make_def("to_string", FunctionKind::map, {},
             "every numeric or bool entry as its decimal string (floats: shortest exact form)");
  d.map = [](const Element& e, const Params&) -> Expected<Element> {
    Element out;
    for (std::size_t c = 0; c < e.size(); ++c) {
      const Tensor& t = e[c];
      if (t.dtype() == DType::string)
        return invalid_argument("to_string: component " + std::to_string(c) +
                                " is already a string, expected a numeric or bool dtype");
      Tensor r{DType::string, t.shape()};
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        std::string& s = r.mutable_strings()[i];
        if (t.dtype() == DType::boolean) {
          s = t.at<unsigned char>(i) != 0 ? "true" : "false";
          continue;
        }
        visit_numeric(t.dtype(), [&](auto tag) {
          using T = decltype(tag);
          const T v = get_entry<T>(t, i);
          if constexpr (std::is_same_v<T, std::complex<float>> ||
                        std::is_same_v<T, std::complex<double>>) {
            // Python's spelling, without its parentheses: 1+2j, 1-0.5j.
            s = number_text(v.real()) + (std::signbit(v.imag()) ? "" : "+") +
                number_text(v.imag()) + "j";
          } else if constexpr (sizeof(T) == 1) {
            s = number_text(static_cast<int>(v)); // int8_t/uint8_t are numbers, not characters
          } else {
            s = number_text(v);
          }
        });
      }
      out.components.push_back(std::move(r));
    }
    return out;
  };
  d.output_spec = [](const ElementSpec& in, const Params&) -> Expected<ElementSpec> {
    ElementSpec out = in;
    for (std::size_t c = 0; c < out.components.size(); ++c) {
      if (out.components[c].dtype == DType::string)
        return invalid_argument("to_string: component " + std::to_string(c) +
                                " is already a string, expected a numeric or bool dtype");
      out.components[c].dtype = DType::string;
    }
    return out;
  };
  return d;
}

// splitmix64: a fast, well-mixed sequence from one seed, so equal values give equal bytes.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// `size` pseudo-random bytes seeded by `seed` (equal seeds, equal bytes).
void fill_pseudo_random(unsigned char* out, std::size_t size, uint64_t seed) {
  for (std::size_t i = 0; i < size; i += 8) {
    const uint64_t r = splitmix64(seed);
    std::memcpy(out + i, &r, std::min<std::size_t>(8, size - i));
  }
}

// bytes(size) as a uint8 tensor of a fixed shape (size,): an element whose byte size the
// dataset's spec says (a deterministic read's splits are sized from it), as an image's pixels.
FunctionDef pixels_fn() {
  FunctionDef d = make_def(
    "pixels", FunctionKind::map, {{"size", int64_t{1024}}},
    "int scalar -> a uint8 tensor of shape (size,) of pseudo-random bytes seeded by the value");
  d.map = [](const Element& e, const Params& p) -> Expected<Element> {
    auto value = first_int_scalar("pixels", e);
    if (!value.ok())
      return value.status();
    const int64_t size = int_param(p, "size", 1024);
    if (size < 0)
      return invalid_argument("pixels: `size` must be >= 0, got " + std::to_string(size));
    CONVEYOR_RETURN_IF_ERROR(check_allocation(size, "pixels"));
    Tensor out(DType::uint8, Shape{size});
    fill_pseudo_random(out.mutable_data<uint8_t>(), static_cast<std::size_t>(size),
                       static_cast<uint64_t>(*value));
    return Element{std::move(out)};
  };
  d.output_spec = [](const ElementSpec&, const Params& p) -> Expected<ElementSpec> {
    return ElementSpec{{TensorSpec{DType::uint8, {int_param(p, "size", 1024)}, false}}};
  };
  return d;
}

FunctionDef bytes_fn() {
  FunctionDef d =
    make_def("bytes", FunctionKind::map, {{"size", int64_t{1024}}},
             "int scalar -> a string scalar of `size` pseudo-random bytes seeded by the value");
  d.map = [](const Element& e, const Params& p) -> Expected<Element> {
    auto value = first_int_scalar("bytes", e);
    if (!value.ok())
      return value.status();
    const int64_t size = int_param(p, "size", 1024);
    if (size < 0)
      return invalid_argument("bytes: `size` must be >= 0, got " + std::to_string(size));
    // Asked before allocating: an element larger than the job's budget fails before it is built.
    CONVEYOR_RETURN_IF_ERROR(check_allocation(size, "bytes"));
    std::string out(static_cast<std::size_t>(size), '\0');
    fill_pseudo_random(reinterpret_cast<unsigned char*>(out.data()), out.size(),
                       static_cast<uint64_t>(*value));
    return Element{Tensor::scalar(std::move(out))};
  };
  d.output_spec = [](const ElementSpec&, const Params&) -> Expected<ElementSpec> {
    return ElementSpec{{scalar_spec(DType::string)}};
  };
  return d;
}

FunctionDef sleep_us() {
  FunctionDef d = make_def("sleep_us", FunctionKind::map, {{"us", int64_t{100}}},
                           "returns its element unchanged after sleeping `us` microseconds");
  d.map = [](const Element& e, const Params& p) -> Expected<Element> {
    const int64_t us = int_param(p, "us", 100);
    if (us < 0)
      return invalid_argument("sleep_us: `us` must be >= 0, got " + std::to_string(us));
    std::this_thread::sleep_for(std::chrono::microseconds{us});
    return e;
  };
  d.output_spec = [](const ElementSpec& in, const Params&) -> Expected<ElementSpec> { return in; };
  return d;
}

// A fixed amount of arithmetic, not a time: a pipeline of `burn` slows down when its threads
// share a core, as real preprocessing does (a spin on the clock would not), so worker scaling
// measured with it is honest.
FunctionDef burn() {
  FunctionDef d =
    make_def("burn", FunctionKind::map, {{"rounds", int64_t{1000}}},
             "returns its element unchanged after `rounds` rounds of integer mixing (CPU work)");
  d.map = [](const Element& e, const Params& p) -> Expected<Element> {
    const int64_t rounds = int_param(p, "rounds", 1000);
    if (rounds < 0)
      return invalid_argument("burn: `rounds` must be >= 0, got " + std::to_string(rounds));
    uint64_t state = static_cast<uint64_t>(rounds);
    uint64_t mixed = 0;
    for (int64_t i = 0; i < rounds; ++i)
      mixed ^= splitmix64(state);
    volatile uint64_t sink = mixed; // the result is written, so the loop cannot be dropped
    (void)sink;
    return e;
  };
  d.output_spec = [](const ElementSpec& in, const Params&) -> Expected<ElementSpec> { return in; };
  return d;
}

// --- predicates

// Python's (and tf.math.floormod's) x % m: the result has the sign of m.
int64_t floor_mod(int64_t x, int64_t m) {
  if (m == -1)
    return 0; // INT64_MIN % -1 overflows
  const int64_t r = x % m;
  return (r != 0 && ((r < 0) != (m < 0))) ? r + m : r;
}

FunctionDef mod_eq() {
  FunctionDef d =
    make_def("mod_eq", FunctionKind::predicate, {{"m", int64_t{2}}, {"r", int64_t{0}}},
             "keeps elements whose component 0 (an int scalar) x has x % m == r");
  d.predicate = [](const Element& e, const Params& p) -> Expected<bool> {
    auto x = first_int_scalar("mod_eq", e);
    if (!x.ok())
      return x.status();
    const int64_t m = int_param(p, "m", 2);
    if (m == 0)
      return invalid_argument("mod_eq: `m` must not be 0");
    return floor_mod(*x, m) == int_param(p, "r", 0);
  };
  return d;
}

FunctionDef is_even() {
  FunctionDef d = make_def("is_even", FunctionKind::predicate, {},
                           "keeps elements whose component 0 (an int scalar) is even");
  d.predicate = [](const Element& e, const Params&) -> Expected<bool> {
    auto x = first_int_scalar("is_even", e);
    if (!x.ok())
      return x.status();
    return floor_mod(*x, 2) == 0;
  };
  return d;
}

// --- dataset functions (flat_map / interleave); output_spec is the spec of the returned
// dataset's elements.

FunctionDef range_fn() {
  FunctionDef d = make_def("range_fn", FunctionKind::dataset, {}, "int scalar n -> range(n)");
  d.dataset = [](const Element& e, const Params&) -> Expected<Dataset> {
    auto n = first_int_scalar("range_fn", e);
    if (!n.ok())
      return n.status();
    return Dataset::range(*n);
  };
  d.output_spec = [](const ElementSpec&, const Params&) -> Expected<ElementSpec> {
    return ElementSpec{{scalar_spec(DType::int64)}};
  };
  return d;
}

// Coordinated reads' check (README): element x -> the group x*n, ..., x*n + n - 1.
FunctionDef group_fn() {
  FunctionDef d = make_def("group_fn", FunctionKind::dataset, {{"n", int64_t{2}}},
                           "int scalar x -> range(x*n, x*n + n): a group of n consecutive ints");
  d.dataset = [](const Element& e, const Params& p) -> Expected<Dataset> {
    auto x = first_int_scalar("group_fn", e);
    if (!x.ok())
      return x.status();
    const int64_t n = int_param(p, "n", 2);
    if (n <= 0)
      return invalid_argument("group_fn: `n` must be positive, got " + std::to_string(n));
    return Dataset::range(*x * n, *x * n + n);
  };
  d.output_spec = [](const ElementSpec&, const Params&) -> Expected<ElementSpec> {
    return ElementSpec{{scalar_spec(DType::int64)}};
  };
  return d;
}

FunctionDef repeat_fn() {
  FunctionDef d = make_def("repeat_fn", FunctionKind::dataset, {{"count", int64_t{2}}},
                           "element -> from_tensors(element).repeat(count)");
  d.dataset = [](const Element& e, const Params& p) -> Expected<Dataset> {
    const int64_t count = int_param(p, "count", 2);
    if (count < 0)
      return invalid_argument("repeat_fn: `count` must be >= 0, got " + std::to_string(count));
    return Dataset::from_tensors(e).repeat(count);
  };
  d.output_spec = [](const ElementSpec& in, const Params&) -> Expected<ElementSpec> { return in; };
  return d;
}

FunctionDef file_fn(const char* name, const char* doc,
                    Dataset (*make)(std::vector<std::string>, std::string)) {
  FunctionDef d = make_def(name, FunctionKind::dataset, {}, doc);
  d.dataset = [name, make](const Element& e, const Params&) -> Expected<Dataset> {
    auto file = first_string_scalar(name, e);
    if (!file.ok())
      return file.status();
    return make({std::move(file).value()}, "");
  };
  d.output_spec = [](const ElementSpec&, const Params&) -> Expected<ElementSpec> {
    return ElementSpec{{scalar_spec(DType::string)}};
  };
  return d;
}

// --- sources

class CounterIterator final : public Iterator {
public:
  CounterIterator(int64_t next, int64_t stop) : next_(next), stop_(stop) {}
  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = next_ >= stop_;
    if (!end_of_sequence)
      out = Element{Tensor::scalar(next_++)};
    return Status::OK();
  }

private:
  int64_t next_;
  int64_t stop_;
};

FunctionDef counter() {
  FunctionDef d =
    make_def("counter", FunctionKind::source, {{"start", int64_t{0}}, {"stop", int64_t{10}}},
             "yields the int64 scalars start, start+1, ..., stop-1");
  d.source = [](const Params& p) -> Expected<std::unique_ptr<Iterator>> {
    return std::unique_ptr<Iterator>{
      std::make_unique<CounterIterator>(int_param(p, "start", 0), int_param(p, "stop", 10))};
  };
  d.source_spec = ElementSpec{{scalar_spec(DType::int64)}};
  // The count depends on the parameters, which a FunctionDef's fixed cardinality cannot say.
  d.source_cardinality = kUnknownCardinality;
  d.source_checkpoint = SourceCheckpoint::skip_by_count; // a function of its parameters
  return d;
}

} // namespace

Status register_builtin_functions(FunctionRegistry& registry) {
  FunctionDef defs[] = {
    identity(),
    square(),
    add(),
    scale(),
    to_string_fn(),
    cast_function(),
    bitcast_function(),
    bytes_fn(),
    pixels_fn(),
    sleep_us(),
    burn(),
    is_even(),
    mod_eq(),
    range_fn(),
    repeat_fn(),
    group_fn(),
    file_fn("text_lines_fn", "string scalar filename -> text_lines([filename])",
            &Dataset::text_lines),
    file_fn("tfrecord_fn", "string scalar filename -> tfrecord([filename])", &Dataset::tfrecord),
    counter(),
  };
  for (FunctionDef& d : defs)
    CONVEYOR_RETURN_IF_ERROR(registry.add(std::move(d)));
#ifdef CONVEYOR_IMAGE_OPS
  CONVEYOR_RETURN_IF_ERROR(register_image_functions(registry));
#endif
  return Status::OK();
}

} // namespace conveyor
