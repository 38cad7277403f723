// WebDataset samples as elements: which dict a `webdataset(files, keys)` source yields.
#pragma once

#include <string>
#include <vector>

#include "conveyor/structure.hpp"

namespace conveyor {

inline constexpr const char* kWebDatasetKeyEntry = "__key__"; // the sample's key

// The dict {"__key__": _, EXT: _ for EXT in keys} (keys sorted). `keys` must be non-empty
// extensions ("jpg", "seg.png"), each once, none "__key__" and none with a '/'.
Expected<Structure> webdataset_structure(const std::vector<std::string>& keys);

} // namespace conveyor
