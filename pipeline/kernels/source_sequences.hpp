// What the splittable sources iterate over: element indices (range, from_tensor_slices) or files
// (list_files, text_lines, tfrecord) — either the source's whole content, or, under DYNAMIC
// sharding, only the splits the SplitProvider hands out. Both are resumable: an `unavailable`
// from the provider is returned unchanged and the next call asks the provider again.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/io/files.hpp"
#include "pipeline/io/path_policy.hpp"
#include "pipeline/sharding/split_provider.hpp"
#include "pipeline/runtime/status.hpp"
#include "pipeline/runtime/stop_flag.hpp"

namespace conveyor::kernels {

class IndexSequence {
public:
  // Indices 0..count-1, or those of the provider's splits when `provider` is set. A stopped
  // pipeline (`stop`) gets `cancelled` instead of its next index.
  IndexSequence(std::string op, int64_t count, SplitProvider* provider, StopCheck stop = {});
  Status next(int64_t& index, bool& end);

private:
  std::string op_;
  int64_t count_;
  SplitProvider* provider_;
  StopCheck stop_;
  int64_t next_ = 0;
  int64_t end_ = 0;
  bool done_ = false;
};

class FileSequence {
public:
  // `files` in order, or the files of the provider's splits when `provider` is set. Every file
  // is checked against `paths` (when set) before it is handed out: `op` names the kernel, and
  // `access` is read for readers, list for list_files.
  FileSequence(std::vector<std::string> files, SplitProvider* provider, std::string op,
               const PathPolicy* paths, PathPolicy::Access access = PathPolicy::Access::read);
  Status next(std::string& file, bool& end);
  // The next file, opened (`what` names it in errors: "CSV file") and checked again once open
  // (a link swapped in after the path check). An error opening one file is returned; the next
  // call goes on with the next file.
  Status open_next(FileCompression compression, const std::string& what,
                   std::unique_ptr<InputStream>& stream, bool& end);

private:
  Status next_unchecked(std::string& file, bool& end);
  std::string op_;
  const PathPolicy* paths_;
  PathPolicy::Access access_;
  std::vector<std::string> files_;
  SplitProvider* provider_;
  std::size_t next_ = 0;
  bool done_ = false;
};

} // namespace conveyor::kernels
