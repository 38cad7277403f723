// component_of_key / resolve_component_key (include/conveyor/functions.hpp): how a map function's
// `key=` finds its component in a dict element.
#include <string>

#include "conveyor/functions.hpp"

namespace conveyor {

Expected<std::size_t> component_of_key(const std::string& fn, const std::string& key,
                                       const Structure* structure) {
  if (structure == nullptr || structure->keys().empty())
    return invalid_argument(
      fn + ": key=\"" + key + "\" names an entry of a dict element, but the input's elements are " +
      (structure == nullptr ? std::string{"a flat tuple"} : structure->to_string()) +
      " (use index=N for a tuple's component)");
  auto index = structure->index_of(key);
  if (!index.ok())
    return index.status().with_context(fn);
  return *index;
}

Expected<Params> resolve_component_key(const std::string& fn, Params params,
                                       const ElementSpec& input) {
  auto key = params.find("key");
  auto index = params.find("index");
  if (key == params.end() || index == params.end())
    return params;
  const auto* name = std::get_if<std::string>(&key->second);
  if (name == nullptr || name->empty())
    return params;
  if (const auto* i = std::get_if<int64_t>(&index->second); i == nullptr || *i != -1)
    return invalid_argument(fn + ": give `key` or `index`, not both");
  auto found = component_of_key(fn, *name, input.structure ? &*input.structure : nullptr);
  if (!found.ok())
    return found.status();
  index->second = static_cast<int64_t>(*found);
  key->second = std::string{};
  return params;
}

} // namespace conveyor
