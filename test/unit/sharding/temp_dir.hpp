// A fresh directory under the system temp dir, removed with everything in it at scope exit.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace conveyor::testing {

class TempDir {
public:
  TempDir() {
    std::string pattern =
      (std::filesystem::temp_directory_path() / "conveyor-shard-XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr)
      path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty())
      std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

  // Writes `lines` (each followed by '\n') to <dir>/<name> and returns the full path.
  std::string write(const std::string& name, const std::vector<std::string>& lines) const {
    const std::string file = path_ + "/" + name;
    std::ofstream out(file, std::ios::binary);
    for (const auto& line : lines)
      out << line << '\n';
    return file;
  }

private:
  std::string path_;
};

} // namespace conveyor::testing
