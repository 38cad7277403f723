// `clip(lo=0.0, hi=1.0)`: every number of every component clamped to [lo, hi], as np.clip.
// A template for your own functions: copy this directory, rename the function, keep the entry
// point. Map, filter (FunctionKind::predicate), flat_map/interleave (dataset) and source
// functions register the same way (conveyor/functions.hpp); `ramp` below is a source.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include <conveyor/functions.hpp>

namespace {

using conveyor::DType;
using conveyor::Element;
using conveyor::Expected;
using conveyor::Params;
using conveyor::Tensor;

double param(const Params& p, const char* name) {
  return std::get<double>(p.at(name)); // resolve_params filled it in with the declared kind
}

template <class T>
void clamp_all(Tensor& t, double lo, double hi) {
  T* v = t.mutable_data<T>();
  for (int64_t i = 0; i < t.num_elements(); ++i)
    v[i] = static_cast<T>(std::clamp(static_cast<double>(v[i]), lo, hi));
}

Expected<Element> clip(const Element& in, const Params& p) {
  const double lo = param(p, "lo"), hi = param(p, "hi");
  // Errors are values: they fail this element, naming the function and the argument.
  if (!(lo <= hi))
    return conveyor::invalid_argument("clip: `lo` (" + std::to_string(lo) +
                                      ") must not be above `hi` (" + std::to_string(hi) + ")");
  Element out = in; // tensors share their buffers; mutable_data copies before writing
  for (std::size_t c = 0; c < out.size(); ++c) {
    switch (out[c].dtype()) {
      case DType::float32: clamp_all<float>(out[c], lo, hi); break;
      case DType::float64: clamp_all<double>(out[c], lo, hi); break;
      case DType::int32: clamp_all<int32_t>(out[c], lo, hi); break;
      case DType::int64: clamp_all<int64_t>(out[c], lo, hi); break;
      default:
        return conveyor::invalid_argument("clip: component " + std::to_string(c) + " is " +
                                          conveyor::dtype_name(out[c].dtype()) +
                                          "; expected float32, float64, int32 or int64");
    }
  }
  return out;
}

// `ramp(start=0, stop=10)`: a source of the int64 scalars start, ..., stop-1.
class Ramp : public conveyor::Iterator {
public:
  Ramp(int64_t next, int64_t stop) : next_(next), stop_(stop) {}
  conveyor::Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = next_ >= stop_;
    if (!end_of_sequence)
      out = Element{Tensor::scalar(next_++)};
    return conveyor::Status::OK();
  }

private:
  int64_t next_;
  int64_t stop_;
};

} // namespace

// The entry point conveyor looks for (exported with default visibility).
extern "C" __attribute__((visibility("default"))) void
conveyor_register_functions(conveyor::FunctionRegistry& registry) {
  conveyor::FunctionDef def;
  def.name = "clip";
  def.kind = conveyor::FunctionKind::map;
  def.params = {{"lo", 0.0}, {"hi", 1.0}};
  def.doc = "every number clamped to [lo, hi] (examples/plugin)";
  def.map = clip;
  // Same dtypes and shapes out as in: element_spec() stays exact downstream.
  def.output_spec = [](const conveyor::ElementSpec& in,
                       const Params&) -> Expected<conveyor::ElementSpec> { return in; };
  // A name clash is the only failure; the host reports it when it loads the plugin.
  (void)registry.add(std::move(def));

  conveyor::FunctionDef ramp;
  ramp.name = "ramp";
  ramp.kind = conveyor::FunctionKind::source;
  ramp.params = {{"start", int64_t{0}}, {"stop", int64_t{10}}};
  ramp.doc = "the int64 scalars start, ..., stop-1 (examples/plugin)";
  ramp.source = [](const Params& p) -> Expected<std::unique_ptr<conveyor::Iterator>> {
    return std::unique_ptr<conveyor::Iterator>(
      std::make_unique<Ramp>(std::get<int64_t>(p.at("start")), std::get<int64_t>(p.at("stop"))));
  };
  // Checkpoints (LocalPipeline::checkpoint, a snapshot stream's resume): the same parameters
  // give the same elements, so a restore makes a new Ramp and skips the elements already read.
  // A source whose elements depend on more than its parameters overrides Iterator::save and
  // restore instead (conveyor/iterator_state.hpp) and leaves source_checkpoint at `iterator`;
  // one that does neither makes such checkpoints fail, naming it.
  ramp.source_checkpoint = conveyor::SourceCheckpoint::skip_by_count;
  (void)registry.add(std::move(ramp));
}
