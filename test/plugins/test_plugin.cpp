// A plugin for the registry tests: FunctionRegistry::load_plugin finds this entry point with
// boost.dll and lets it register `plugin_triple`.
#include <boost/config.hpp>

#include "pipeline/functions/functions.hpp"

namespace {

// x * 3 for an int64 scalar element.
conveyor::Expected<conveyor::Element> triple(const conveyor::Element& e, const conveyor::Params&) {
  if (e.size() != 1 || e[0].dtype() != conveyor::DType::int64 || e[0].rank() != 0)
    return conveyor::invalid_argument("plugin_triple: expected one int64 scalar component");
  return conveyor::Element{conveyor::Tensor::scalar(e[0].as_int64() * 3)};
}

} // namespace

extern "C" BOOST_SYMBOL_EXPORT void
conveyor_register_functions(conveyor::FunctionRegistry& registry) {
  conveyor::FunctionDef def;
  def.name = "plugin_triple";
  def.kind = conveyor::FunctionKind::map;
  def.doc = "x * 3 for an int64 scalar (from test_plugin)";
  def.map = triple;
  def.output_spec = [](const conveyor::ElementSpec& in,
                       const conveyor::Params&) -> conveyor::Expected<conveyor::ElementSpec> {
    return in;
  };
  // A name clash is the only failure; the host reports it when it merges the registration.
  (void)registry.add(std::move(def));
}
