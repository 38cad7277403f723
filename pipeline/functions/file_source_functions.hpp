// File sources as the function of interleave / flat_map, with no registration:
//   list_files("/data/*.tfrecord").interleave(tfrecord, cycle_length=2)
//   list_files("/logs/*.gz").flat_map(text_lines(compression_type="GZIP"))
// A FunctionRef naming `tfrecord` or `text_lines` (optionally with the parameter
// compression_type) means "that source over the file(s) the element names": the element is one
// string scalar (a file name or glob pattern) or a rank-1 string tensor of them. These names are
// reserved: FunctionRegistry::add refuses them, so a reference can never mean two things. The
// sources built this way live inside the interleave (like any function's dataset), so DYNAMIC and
// FILE sharding see the outer file source (list_files) and shard by file.
#pragma once

#include <string>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/graph/graph.hpp"

namespace conveyor {

bool is_file_source_function(const std::string& name);
// Checks the parameters (only compression_type, a string: "", "ZLIB" or "GZIP"); errors name `op`.
Status check_file_source_function(const std::string& op, const FunctionRef& ref);
// The source dataset over the files `element` names.
Expected<Dataset> file_source_dataset(const FunctionRef& ref, const Element& element);

} // namespace conveyor
