// Dataset graph serialization with cereal: a compact binary form for the wire, JSON for humans.
// Both carry kGraphFormatVersion; reading another version is a version_mismatch error.
// The fingerprint is a stable hash of the canonical binary form: equal definitions give equal
// fingerprints in every process and on every machine (the service deduplicates by it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "pipeline/graph/dataset.hpp"

namespace conveyor {

inline constexpr uint32_t kGraphFormatVersion = 1;

std::string to_binary(const Dataset& dataset);
Expected<Dataset> from_binary(std::string_view bytes);

std::string to_json(const Dataset& dataset);
Expected<Dataset> from_json(std::string_view json);

// 16 lowercase hex digits.
std::string fingerprint(const Dataset& dataset);
// The same, with each function's `pickle` parameter left out (the function is then known by its
// other parameters, e.g. a Python callable's `qualname`): a cloudpickle differs from run to run
// (classes pickled by value get a random id), so a file that must be recognised by a later run
// (a `cache` file) records this one. Equal to fingerprint() for a graph without pickles.
std::string fingerprint_without_pickles(const Dataset& dataset);

} // namespace conveyor
