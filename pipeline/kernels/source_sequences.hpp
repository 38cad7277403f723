// What the splittable sources iterate over: element indices (range, from_tensor_slices) or files
// (list_files, text_lines, tfrecord) — either the source's whole content, or, under DYNAMIC
// sharding, only the splits the SplitProvider hands out. Both are resumable: an `unavailable`
// from the provider is returned unchanged and the next call asks the provider again.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conveyor/iterator_state.hpp"
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
  // Checkpoints: where it stands in its indices or in the current split. The provider's own
  // position is its owner's to save (the worker's snapshot stream saves its feed).
  void save(IteratorStateWriter& out) const;
  Status restore(IteratorStateReader& in);

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
  // Checkpoints: the files (list_files' shuffled order too) and how many were handed out.
  void save(IteratorStateWriter& out) const;
  Status restore(IteratorStateReader& in);
  // A file handed out before a checkpoint, checked again as it is reopened by a restore.
  Status check(const std::string& file) const { return check_path(paths_, file, access_, op_); }

  // A record reader's checkpoint: this sequence, then its open file (null: none) and how many
  // records of it were read. A restore reopens the file and reads those records again, which
  // works for compressed files too, where a byte offset would not.
  void save_position(IteratorStateWriter& out, const std::string* open_file, int64_t records) const;
  // A record reader's restore: reads the position, and when a file was open reopens it with
  // `reopen(file)` and reads its records again with `read_one(bool& end)`; data_loss naming the
  // op and the file when the file ends first (it changed since the checkpoint). `records` is
  // set to the count read again (0 when no file was open).
  template <class Reopen, class ReadOne>
  Status restore_reader(IteratorStateReader& in, const char* unit, int64_t& records, Reopen reopen,
                        ReadOne read_one) {
    records = 0;
    Position at;
    CONVEYOR_RETURN_IF_ERROR(restore_position(in, at));
    if (!at.open)
      return Status::OK();
    CONVEYOR_RETURN_IF_ERROR(reopen(at.file));
    for (int64_t i = 0; i < at.records; ++i) { // bounded by the checkpoint's count
      bool end = false;
      CONVEYOR_RETURN_IF_ERROR(read_one(end));
      if (end)
        return data_loss("`" + op_ + "`: the checkpoint is at " + unit + " " +
                         std::to_string(at.records) + " of " + at.file + ", which now has only " +
                         std::to_string(i) + " (the file changed since)");
    }
    records = at.records;
    return Status::OK();
  }

private:
  struct Position {
    bool open = false;
    std::string file; // checked again (check())
    int64_t records = 0;
  };
  Status restore_position(IteratorStateReader& in, Position& at);
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
