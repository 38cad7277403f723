// Shared by the unit_formats tests: fixture paths, scratch directories, running datasets.
#pragma once

#include <string>
#include <vector>

#include "pipeline/graph/dataset.hpp"
#include "pipeline/functions/functions.hpp"

namespace conveyor::formats_test {

// test/data/<name>: fixtures written by test/data/make_tfrecord_fixtures.py (the reference writer).
std::string fixture(const std::string& name);

// A fresh directory under the build tree, removed with its content by the destructor.
class ScratchDir {
public:
  ScratchDir();
  ~ScratchDir();
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

void write_bytes(const std::string& path, const std::string& bytes);
std::string read_bytes(const std::string& path);

// Every element, or the first error (as a failed Status); `registry` null = the global one.
Expected<std::vector<Element>> collect(const Dataset& ds,
                                       const FunctionRegistry* registry = nullptr);
// "[a, b, ...]" of the elements' literals.
std::string show(const std::vector<Element>& elements);
// collect() that must succeed, shown.
std::string show(const Dataset& ds, const FunctionRegistry* registry = nullptr);

} // namespace conveyor::formats_test
