// Plugins: FunctionRegistry::load_plugin with the test_plugin library built next to the tests.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/functions/functions.hpp"
#include "pipeline/functions/plugin_info.hpp"
#include "pipeline/runtime/iterator.hpp"

using namespace conveyor;

namespace {

const std::string kPlugin = CONVEYOR_BINARY_DIR "/libtest_plugin.so";

std::vector<int64_t> run(const Dataset& d, const FunctionRegistry& registry) {
  IteratorContext ctx;
  ctx.functions = &registry;
  auto it = d.make_iterator(ctx);
  REQUIRE_MESSAGE(it.ok(), it.status().to_string());
  std::vector<int64_t> out;
  for (int i = 0; i < 1000; ++i) {
    Element e;
    bool end = false;
    Status st = (*it)->get_next(e, end);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    if (end)
      break;
    out.push_back(e[0].as_int64());
  }
  return out;
}

} // namespace

TEST_CASE("a plugin's functions are registered and usable in a map") {
  FunctionRegistry registry;
  Status st = registry.load_plugin(kPlugin);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  const FunctionDef* def = registry.find("plugin_triple");
  REQUIRE(def != nullptr);
  CHECK(def->kind == FunctionKind::map);
  Dataset d = Dataset::range(4).map("plugin_triple");
  CHECK(d.validate(&registry).ok());
  CHECK(d.validate().code() == ErrorCode::not_found); // the global registry has not loaded it
  CHECK(run(d, registry) == std::vector<int64_t>{0, 3, 6, 9});
  auto spec = d.element_spec(&registry);
  REQUIRE(spec.ok());
  CHECK(spec->to_string() == "TensorSpec(shape=(), dtype=int64)");
  // The process remembers what it loaded: unknown functions point at plugins, naming these.
  CHECK(plugin_defining("plugin_triple") == kPlugin);
  CHECK(plugin_defining("square").empty());
  const auto loaded = loaded_plugin_paths();
  CHECK(std::find(loaded.begin(), loaded.end(), kPlugin) != loaded.end());
  const std::string unknown = registry.check("nope", FunctionKind::map).message();
  CHECK(unknown.find("`--plugin LIB.so`; plugins loaded here: ") != std::string::npos);
  CHECK(unknown.find(kPlugin) != std::string::npos);
}

TEST_CASE("loading a plugin twice reports the clash and changes nothing") {
  FunctionRegistry registry;
  REQUIRE(registry.load_plugin(kPlugin).ok());
  Status again = registry.load_plugin(kPlugin);
  CHECK(again.code() == ErrorCode::already_exists);
  CHECK(again.message() ==
        "plugin `" + kPlugin + "` registers function `plugin_triple`, which is already registered");
  CHECK(registry.names() == std::vector<std::string>{"plugin_triple"});
}

TEST_CASE("missing files and libraries without the entry point are clear errors") {
  FunctionRegistry registry;
  Status missing = registry.load_plugin("/nonexistent/libnothing.so");
  CHECK(missing.code() == ErrorCode::not_found);
  CHECK(missing.message() == "plugin `/nonexistent/libnothing.so` does not exist");

  const std::string not_a_library = CONVEYOR_BINARY_DIR "/core_test_not_a_library.so";
  std::ofstream{not_a_library} << "plain text\n";
  Status garbage = registry.load_plugin(not_a_library);
  CHECK(garbage.code() == ErrorCode::io_error);
  CHECK(garbage.message().rfind("cannot load plugin `" + not_a_library + "`", 0) == 0);

  // A real shared library (the C math library) that exports no registration function.
  const std::string libm = "/lib/x86_64-linux-gnu/libm.so.6";
  if (std::ifstream{libm}.good()) {
    Status no_entry = registry.load_plugin(libm);
    CHECK(no_entry.code() == ErrorCode::invalid_argument);
    CHECK(no_entry.message().rfind(
            "plugin `" + libm + "` does not export `conveyor_register_functions`", 0) == 0);
  }
  CHECK(registry.names().empty());
}
