#include "pipeline/functions/file_source_functions.hpp"

#include "pipeline/io/files.hpp"

namespace conveyor {

bool is_file_source_function(const std::string& name) {
  return name == "tfrecord" || name == "text_lines";
}

Status check_file_source_function(const std::string& op, const FunctionRef& ref) {
  for (const auto& [key, value] : ref.params) {
    const std::string what = op + ": `" + ref.name + "` parameter `" + key + "`";
    if (key != "compression_type")
      return invalid_argument(op + ": `" + ref.name +
                              "` as a function takes only `compression_type`, got `" + key + "`");
    if (!std::holds_alternative<std::string>(value))
      return invalid_argument(what + " must be a string");
    auto c = compression_from_name(std::get<std::string>(value), what);
    if (!c.ok())
      return c.status();
  }
  return Status::OK();
}

Expected<Dataset> file_source_dataset(const FunctionRef& ref, const Element& element) {
  if (element.size() != 1 || element[0].dtype() != DType::string || element[0].rank() > 1)
    return invalid_argument("`" + ref.name +
                            "` as a function takes elements that are one file name (a string "
                            "scalar) or a list of them, got " +
                            spec_of(element).to_string());
  std::vector<std::string> files = element[0].strings();
  std::string compression;
  auto it = ref.params.find("compression_type");
  if (it != ref.params.end() && std::holds_alternative<std::string>(it->second))
    compression = std::get<std::string>(it->second);
  if (ref.name == "tfrecord")
    return Dataset::tfrecord(std::move(files), compression);
  if (ref.name == "text_lines")
    return Dataset::text_lines(std::move(files), compression);
  return invalid_argument("`" + ref.name + "` is not a file source");
}

} // namespace conveyor
