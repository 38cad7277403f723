// text_lines(files, compression_type): one string scalar per line of each file, without the line
// ending ("\n" or "\r\n"); a last line without a newline still counts. Entries of `files` may be
// glob patterns (expanded, sorted, when the iterator is made); files may be ZLIB/GZIP compressed.
// Under DYNAMIC sharding it reads the file of each split instead.
#include "pipeline/io/files.hpp"
#include "pipeline/kernels/kernel.hpp"
#include "pipeline/kernels/source_sequences.hpp"

namespace conveyor::kernels {

namespace {

constexpr std::size_t kReadSize = std::size_t{1} << 16;

class TextLinesIterator : public Iterator {
public:
  TextLinesIterator(std::vector<std::string> files, SplitProvider* provider,
                    const PathPolicy* paths, FileCompression compression)
    : files_(std::move(files), provider, "text_lines", paths), paths_(paths),
      compression_(compression) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    for (;;) {
      if (!stream_) {
        CONVEYOR_RETURN_IF_ERROR(files_.next(file_, end_of_sequence)); // path-checked
        if (end_of_sequence)
          return Status::OK();
        CONVEYOR_RETURN_IF_ERROR(open()); // on failure the next call moves on to the next file
      }
      std::string line;
      bool got_line = false;
      Status st = next_line(line, got_line);
      if (!st.ok()) { // a broken file ends there; the next call moves on to the next file
        stream_.reset();
        return st.with_context("`text_lines`");
      }
      if (got_line) {
        ++lines_;
        if (!line.empty() && line.back() == '\r')
          line.pop_back();
        out = Element{Tensor::scalar(std::move(line))};
        return Status::OK();
      }
      stream_.reset();
    }
  }

  // The position in a file is its line number (FileSequence::save_position).
  Status save(IteratorStateWriter& out) override {
    files_.save_position(out, stream_ ? &file_ : nullptr, lines_);
    return Status::OK();
  }

  Status restore(IteratorStateReader& in) override {
    stream_.reset();
    std::string line;
    return files_.restore_reader(
      in, "line", lines_,
      [&](const std::string& file) {
        file_ = file;
        return open();
      },
      [&](bool& end) {
        bool got_line = false;
        Status st = next_line(line, got_line).with_context("`text_lines`");
        end = !got_line;
        return st;
      });
  }

private:
  Status open() {
    auto stream = InputStream::open(file_, compression_);
    if (!stream.ok())
      return stream.status().with_context("`text_lines`");
    if (paths_) // what was opened, not only the name that was checked
      CONVEYOR_RETURN_IF_ERROR(paths_->check_open_file((*stream)->fd(), file_, "text_lines"));
    stream_ = std::move(*stream);
    buffer_.clear();
    pos_ = 0;
    eof_ = false;
    lines_ = 0;
    return Status::OK();
  }

  Status next_line(std::string& line, bool& got_line) {
    for (;;) {
      const std::size_t nl = buffer_.find('\n', pos_);
      if (nl != std::string::npos) {
        line.assign(buffer_, pos_, nl - pos_);
        pos_ = nl + 1;
        got_line = true;
        return Status::OK();
      }
      if (eof_) {
        got_line = pos_ < buffer_.size();
        if (got_line)
          line.assign(buffer_, pos_, std::string::npos);
        pos_ = buffer_.size();
        return Status::OK();
      }
      buffer_.erase(0, pos_);
      pos_ = 0;
      const std::size_t before = buffer_.size();
      buffer_.resize(before + kReadSize);
      std::size_t got = 0;
      Status st = stream_->read(buffer_.data() + before, kReadSize, got);
      buffer_.resize(before + got);
      CONVEYOR_RETURN_IF_ERROR(st);
      eof_ = got < kReadSize;
    }
  }

  FileSequence files_;
  const PathPolicy* paths_;
  FileCompression compression_;
  std::string file_;
  std::unique_ptr<InputStream> stream_;
  std::string buffer_;
  std::size_t pos_ = 0;
  bool eof_ = false;
  int64_t lines_ = 0; // of the open file, handed out
};

} // namespace

MakeResult make_text_lines(const NodePtr& node, const KernelContext& kctx) {
  auto compression = compression_from_name(node->string_attr("compression_type"),
                                           "`text_lines` argument `compression_type`");
  if (!compression.ok())
    return compression.status();
  std::vector<std::string> files;
  if (kctx.split_provider() == nullptr) { // with a provider, the splits name the files
    auto expanded = expand_file_patterns("text_lines", node->strings_attr("files"), kctx.paths());
    if (!expanded.ok())
      return expanded.status();
    files = std::move(*expanded);
  }
  return IteratorPtr(std::make_unique<TextLinesIterator>(std::move(files), kctx.split_provider(),
                                                         kctx.paths(), *compression));
}

} // namespace conveyor::kernels
