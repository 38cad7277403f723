#include "pipeline/io/webdataset.hpp"

namespace conveyor {

Expected<Structure> webdataset_structure(const std::vector<std::string>& keys) {
  if (keys.empty())
    return invalid_argument("webdataset: `keys` must name at least one extension (e.g. "
                            "[\"jpg\", \"cls\"]), got none");
  std::vector<std::pair<std::string, Structure>> entries{{kWebDatasetKeyEntry, Structure::leaf()}};
  for (const auto& key : keys) {
    if (key.empty() || key.find('/') != std::string::npos || key == kWebDatasetKeyEntry)
      return invalid_argument("webdataset: `keys` entry \"" + key +
                              "\" is not an extension (non-empty, no '/', not \"__key__\")");
    entries.emplace_back(key, Structure::leaf());
  }
  auto structure = Structure::dict(std::move(entries));
  if (!structure.ok())
    return structure.status().with_context("webdataset: `keys`");
  return structure;
}

} // namespace conveyor
