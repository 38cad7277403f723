#include "pipeline/kernels/source_sequences.hpp"

namespace conveyor::kernels {

IndexSequence::IndexSequence(std::string op, int64_t count, SplitProvider* provider, StopCheck stop)
  : op_(std::move(op)), count_(count), provider_(provider), stop_(stop),
    end_(provider ? 0 : count) {}

Status IndexSequence::next(int64_t& index, bool& end) {
  CONVEYOR_RETURN_IF_ERROR(stop_.check(op_.c_str()));
  while (!done_) {
    if (next_ < end_) {
      index = next_++;
      end = false;
      return Status::OK();
    }
    if (provider_ == nullptr) {
      done_ = true;
      break;
    }
    Split split;
    bool end_of_splits = false;
    CONVEYOR_RETURN_IF_ERROR(provider_->get_next(split, end_of_splits));
    if (end_of_splits) {
      done_ = true;
      break;
    }
    if (split.begin < 0 || split.begin > split.end || split.end > count_)
      return out_of_range("`" + op_ + "` got split [" + std::to_string(split.begin) + ", " +
                          std::to_string(split.end) + ") (epoch " + std::to_string(split.epoch) +
                          ", index " + std::to_string(split.index) + ") outside its elements [0, " +
                          std::to_string(count_) + ")");
    next_ = split.begin;
    end_ = split.end;
  }
  end = true;
  return Status::OK();
}

void IndexSequence::save(IteratorStateWriter& out) const {
  out.put_tag(op_);
  out.put_int(next_);
  out.put_int(end_);
  out.put_bool(done_);
}

Status IndexSequence::restore(IteratorStateReader& in) {
  CONVEYOR_RETURN_IF_ERROR(in.expect_tag(op_));
  const int64_t next = in.get_int();
  const int64_t end = in.get_int();
  const bool done = in.get_bool();
  CONVEYOR_RETURN_IF_ERROR(in.status());
  if (next < 0 || next > end || end > count_)
    return data_loss("pipeline state: `" + op_ + "` position [" + std::to_string(next) + ", " +
                     std::to_string(end) + ") is outside its elements [0, " +
                     std::to_string(count_) + ") (a checkpoint of another dataset?)");
  next_ = next;
  end_ = end;
  done_ = done;
  return Status::OK();
}

FileSequence::FileSequence(std::vector<std::string> files, SplitProvider* provider, std::string op,
                           const PathPolicy* paths, PathPolicy::Access access)
  : op_(std::move(op)), paths_(paths), access_(access), files_(std::move(files)),
    provider_(provider) {}

Status FileSequence::next(std::string& file, bool& end) {
  CONVEYOR_RETURN_IF_ERROR(next_unchecked(file, end));
  if (!end)
    return check_path(paths_, file, access_, op_);
  return Status::OK();
}

Status FileSequence::open_next(FileCompression compression, const std::string& what,
                               std::unique_ptr<InputStream>& stream, bool& end) {
  std::string file;
  CONVEYOR_RETURN_IF_ERROR(next(file, end)); // path-checked
  if (end)
    return Status::OK();
  auto opened = InputStream::open(file, compression, what);
  if (!opened.ok())
    return opened.status().with_context("`" + op_ + "`");
  if (paths_)
    CONVEYOR_RETURN_IF_ERROR(paths_->check_open_file((*opened)->fd(), file, op_));
  stream = std::move(*opened);
  return Status::OK();
}

void FileSequence::save(IteratorStateWriter& out) const {
  out.put_tag(op_ + " files");
  out.put_int(static_cast<int64_t>(files_.size()));
  for (const std::string& file : files_)
    out.put_bytes(file);
  out.put_int(static_cast<int64_t>(next_));
  out.put_bool(done_);
}

Status FileSequence::restore(IteratorStateReader& in) {
  CONVEYOR_RETURN_IF_ERROR(in.expect_tag(op_ + " files"));
  const int64_t count = in.get_int();
  std::vector<std::string> files;
  for (int64_t i = 0; i < count && in.status().ok(); ++i)
    files.push_back(in.get_bytes());
  const int64_t next = in.get_int();
  const bool done = in.get_bool();
  CONVEYOR_RETURN_IF_ERROR(in.status());
  if (next < 0 || next > count)
    return data_loss("pipeline state: `" + op_ + "` is at file " + std::to_string(next) + " of " +
                     std::to_string(count));
  files_ = std::move(files);
  next_ = static_cast<std::size_t>(next);
  done_ = done;
  return Status::OK();
}

void FileSequence::save_position(IteratorStateWriter& out, const std::string* open_file,
                                 int64_t records) const {
  save(out);
  out.put_tag(op_);
  out.put_bool(open_file != nullptr);
  if (open_file != nullptr) {
    out.put_bytes(*open_file);
    out.put_int(records);
  }
}

Status FileSequence::restore_position(IteratorStateReader& in, Position& at) {
  CONVEYOR_RETURN_IF_ERROR(restore(in));
  CONVEYOR_RETURN_IF_ERROR(in.expect_tag(op_));
  at = Position{};
  at.open = in.get_bool();
  if (at.open) {
    at.file = in.get_bytes();
    at.records = in.get_int();
  }
  CONVEYOR_RETURN_IF_ERROR(in.status());
  return at.open ? check(at.file) : Status::OK();
}

Status FileSequence::next_unchecked(std::string& file, bool& end) {
  end = false;
  if (done_) {
    end = true;
    return Status::OK();
  }
  if (provider_ == nullptr) {
    if (next_ < files_.size()) {
      file = files_[next_++];
      return Status::OK();
    }
    done_ = end = true;
    return Status::OK();
  }
  Split split;
  bool end_of_splits = false;
  CONVEYOR_RETURN_IF_ERROR(provider_->get_next(split, end_of_splits));
  if (end_of_splits) {
    done_ = end = true;
    return Status::OK();
  }
  file = split.file;
  return Status::OK();
}

} // namespace conveyor::kernels
