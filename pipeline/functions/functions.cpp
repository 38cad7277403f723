// FunctionRegistry: lookup, parameter checking and plugin loading.
#include "pipeline/functions/functions.hpp"

#include "pipeline/functions/file_source_functions.hpp"

#include <boost/dll/shared_library.hpp>
#include <boost/filesystem/operations.hpp>

#include "pipeline/functions/builtin_functions.hpp"
#include "pipeline/functions/plugin_info.hpp"
#include "pipeline/functions/python_functions.hpp"
#include "pipeline/graph/text_literals.hpp"

namespace conveyor {

namespace {

// With its article, for messages: "an int", "a string".
const char* scalar_kind_name(const Scalar& v) {
  switch (v.index()) {
    case 0: return "a bool";
    case 1: return "an int";
    case 2: return "a float";
    case 3: return "a string";
  }
  return "an unknown kind";
}

// An int is accepted where a float is declared (`scale(factor=2)`), as Python would.
bool param_kind_accepts(const Scalar& declared, const Scalar& given) {
  if (declared.index() == given.index())
    return true;
  return std::holds_alternative<double>(declared) && std::holds_alternative<int64_t>(given);
}

// Plugins stay loaded for the whole process: registered std::functions point into their code,
// and the registry outlives every static destructor (it is never destroyed either).
struct LoadedPlugins {
  std::mutex mu;
  std::vector<boost::dll::shared_library> libraries;
  std::vector<std::string> paths;                // as given to load_plugin, for messages
  std::map<std::string, std::string> defined_by; // function name -> plugin path
};

LoadedPlugins& loaded_plugins() {
  static auto* plugins = new LoadedPlugins;
  return *plugins;
}

std::string scalar_to_text(const Scalar& v) {
  switch (v.index()) {
    case 0: return std::get<bool>(v) ? "true" : "false";
    case 1: return std::to_string(std::get<int64_t>(v));
    case 2: return text::format_float64(std::get<double>(v));
    case 3: return text::quote_string(std::get<std::string>(v));
  }
  return "?";
}

} // namespace

const char* to_string(FunctionKind kind) {
  switch (kind) {
    case FunctionKind::map: return "map";
    case FunctionKind::predicate: return "predicate";
    case FunctionKind::dataset: return "dataset";
    case FunctionKind::source: return "source";
  }
  return "unknown";
}

FunctionRegistry& FunctionRegistry::global() {
  // Leaked on purpose: plugin functions must not be destroyed after their library is gone.
  static FunctionRegistry* registry = [] {
    auto* r = new FunctionRegistry;
    Status st = register_builtin_functions(*r);
    assert(st.ok() && "built-in functions must register cleanly");
    st = register_python_functions(*r);
    assert(st.ok() && "the Python functions' entries must register cleanly");
    (void)st;
    return r;
  }();
  return *registry;
}

Status FunctionRegistry::add(FunctionDef def) {
  if (def.name.empty())
    return invalid_argument("a function needs a non-empty name");
  if (is_file_source_function(def.name)) // see file_source_functions.hpp
    return invalid_argument(
      "`" + def.name +
      "` is reserved: interleave/flat_map use it for the file source of that name");
  std::lock_guard<std::mutex> lock{mu_};
  if (defs_.count(def.name) != 0)
    return Status{ErrorCode::already_exists, "function `" + def.name + "` is already registered"};
  std::string name = def.name;
  defs_.emplace(std::move(name), std::make_shared<const FunctionDef>(std::move(def)));
  return Status::OK();
}

const FunctionDef* FunctionRegistry::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock{mu_};
  auto it = defs_.find(name);
  // Definitions are never removed, so the pointer stays valid after the lock is released.
  return it == defs_.end() ? nullptr : it->second.get();
}

std::vector<std::string> FunctionRegistry::names() const {
  std::lock_guard<std::mutex> lock{mu_};
  std::vector<std::string> out;
  out.reserve(defs_.size());
  for (const auto& [name, def] : defs_)
    out.push_back(name);
  return out;
}

Status FunctionRegistry::check(const FunctionRef& ref, FunctionKind kind) const {
  const FunctionDef* def = find(ref.name);
  if (def == nullptr) {
    // Name the candidates, so a typo is easy to fix.
    std::string candidates;
    {
      std::lock_guard<std::mutex> lock{mu_};
      for (const auto& [name, d] : defs_)
        if (d->kind == kind)
          candidates += (candidates.empty() ? "" : ", ") + name;
    }
    // Functions beyond the built-in ones come from plugins: say so, and which are loaded here.
    std::string plugins;
    for (const std::string& path : loaded_plugin_paths())
      plugins += (plugins.empty() ? "" : ", ") + path;
    return not_found("unknown function `" + ref.name + "` (registered " + to_string(kind) +
                     " functions: " + (candidates.empty() ? std::string{"none"} : candidates) +
                     "). Functions beyond the built-in ones come from plugins, loaded on every "
                     "worker and the dispatcher with `--plugin LIB.so`; plugins loaded here: " +
                     (plugins.empty() ? std::string{"none"} : plugins));
  }
  if (def->kind != kind)
    return invalid_argument("function `" + ref.name + "` is a " + to_string(def->kind) +
                            " function, expected a " + to_string(kind) + " function");
  for (const auto& [name, value] : ref.params) {
    const ParamSpec* declared = nullptr;
    for (const ParamSpec& p : def->params)
      if (p.name == name)
        declared = &p;
    if (declared == nullptr) {
      std::string known;
      for (const ParamSpec& p : def->params)
        known += (known.empty() ? "" : ", ") + p.name;
      return invalid_argument("function `" + ref.name + "` has no parameter `" + name +
                              "` (parameters: " + (known.empty() ? std::string{"none"} : known) +
                              ")");
    }
    if (!param_kind_accepts(declared->default_value, value))
      return invalid_argument("function `" + ref.name + "` parameter `" + name + "` must be " +
                              scalar_kind_name(declared->default_value) + ", got " +
                              scalar_kind_name(value));
  }
  return Status::OK();
}

Params FunctionRegistry::resolve_params(const FunctionRef& ref) const {
  const FunctionDef* def = find(ref.name);
  if (def == nullptr)
    return ref.params;
  Params out;
  for (const ParamSpec& p : def->params) {
    auto given = ref.params.find(p.name);
    if (given == ref.params.end())
      out.emplace(p.name, p.default_value);
    else if (std::holds_alternative<double>(p.default_value) &&
             std::holds_alternative<int64_t>(given->second))
      out.emplace(p.name, static_cast<double>(std::get<int64_t>(given->second)));
    else
      out.emplace(p.name, given->second);
  }
  // Undeclared parameters are kept (check() rejects them) so nothing is silently dropped.
  for (const auto& [name, value] : ref.params)
    out.emplace(name, value);
  return out;
}

Status FunctionRegistry::load_plugin(const std::string& path) {
  boost::system::error_code ec;
  if (!boost::filesystem::exists(path, ec))
    return not_found("plugin `" + path + "` does not exist");
  const std::string canonical = boost::filesystem::canonical(path, ec).string();
  if (ec)
    return io_error("plugin `" + path + "`: " + ec.message());

  boost::dll::shared_library library;
  library.load(canonical, ec, boost::dll::load_mode::default_mode);
  if (ec)
    return io_error("cannot load plugin `" + path + "`: " + ec.message());
  constexpr const char* kEntry = "conveyor_register_functions";
  if (!library.has(kEntry))
    return invalid_argument("plugin `" + path + "` does not export `" + kEntry +
                            "` (declare it extern \"C\" with default visibility)");

  // Register into a scratch registry first, so a plugin that clashes with an existing name
  // (loading the same plugin twice included) adds nothing and the clash is reported.
  FunctionRegistry staged;
  library.get<void(FunctionRegistry&)>(kEntry)(staged);
  {
    std::lock_guard<std::mutex> lock{mu_};
    for (const auto& [name, def] : staged.defs_)
      if (defs_.count(name) != 0)
        return Status{ErrorCode::already_exists, "plugin `" + path + "` registers function `" +
                                                   name + "`, which is already registered"};
    for (auto& [name, def] : staged.defs_)
      defs_.emplace(name, std::move(def));
  }
  auto& plugins = loaded_plugins();
  std::lock_guard<std::mutex> plugins_lock{plugins.mu};
  plugins.libraries.push_back(std::move(library));
  plugins.paths.push_back(path);
  for (const auto& [name, def] : staged.defs_)
    plugins.defined_by.emplace(name, path);
  return Status::OK();
}

std::string plugin_defining(const std::string& function_name) {
  auto& plugins = loaded_plugins();
  std::lock_guard<std::mutex> lock{plugins.mu};
  auto it = plugins.defined_by.find(function_name);
  return it == plugins.defined_by.end() ? std::string{} : it->second;
}

std::vector<std::string> loaded_plugin_paths() {
  auto& plugins = loaded_plugins();
  std::lock_guard<std::mutex> lock{plugins.mu};
  return plugins.paths;
}

std::string describe_function(const FunctionDef& def) {
  std::string out = def.name + "(";
  for (std::size_t i = 0; i < def.params.size(); ++i) {
    const ParamSpec& p = def.params[i];
    static const char* const kinds[] = {"bool", "int", "float", "string"};
    out += (i == 0 ? "" : ", ") + p.name + ": " + kinds[p.default_value.index()] + " = " +
           scalar_to_text(p.default_value);
  }
  return out + ")";
}

} // namespace conveyor
