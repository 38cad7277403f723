#include "test/unit/formats/formats_util.hpp"

#include <stdlib.h>

#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pipeline/runtime/iterator.hpp"

namespace conveyor::formats_test {

std::string fixture(const std::string& name) {
  return std::string(CONVEYOR_SOURCE_DIR) + "/test/data/" + name;
}

ScratchDir::ScratchDir() {
  std::string tmpl = std::string(CONVEYOR_BINARY_DIR) + "/formats_test_XXXXXX";
  char* made = ::mkdtemp(tmpl.data());
  REQUIRE(made != nullptr);
  path_ = made;
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  REQUIRE(out.good());
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Expected<std::vector<Element>> collect(const Dataset& ds, const FunctionRegistry* registry) {
  IteratorContext ctx;
  ctx.functions = registry;
  auto it = ds.make_iterator(ctx);
  if (!it.ok())
    return it.status();
  std::vector<Element> out;
  for (int i = 0; i < 100000; ++i) { // bounded: every test dataset here is small
    Element e;
    bool end = false;
    CONVEYOR_RETURN_IF_ERROR((*it)->get_next(e, end));
    if (end)
      return out;
    out.push_back(std::move(e));
  }
  return internal_error("collect: more than 100000 elements");
}

std::string show(const std::vector<Element>& elements) {
  std::string s = "[";
  for (std::size_t i = 0; i < elements.size(); ++i)
    s += (i ? ", " : "") + elements[i].to_string();
  return s + "]";
}

std::string show(const Dataset& ds, const FunctionRegistry* registry) {
  auto got = collect(ds, registry);
  if (!got.ok())
    return "error: " + got.status().to_string();
  return show(*got);
}

} // namespace conveyor::formats_test
