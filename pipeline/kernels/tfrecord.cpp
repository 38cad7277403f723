// tfrecord(files, compression_type): the raw bytes of every record of each file, as a string
// scalar. Entries of `files` may be glob patterns (expanded, sorted, when the iterator is made);
// files may be ZLIB/GZIP compressed. Under DYNAMIC sharding it reads the file of each split instead.
#include "pipeline/io/files.hpp"
#include "pipeline/kernels/kernel.hpp"
#include "pipeline/kernels/source_sequences.hpp"
#include "pipeline/io/tfrecord.hpp"

namespace conveyor::kernels {

namespace {

class TFRecordIterator : public Iterator {
public:
  TFRecordIterator(std::vector<std::string> files, SplitProvider* provider, const PathPolicy* paths,
                   FileCompression compression)
    : files_(std::move(files), provider, "tfrecord", paths), paths_(paths),
      compression_(compression) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    for (;;) {
      if (!reader_) {
        CONVEYOR_RETURN_IF_ERROR(files_.next(file_, end_of_sequence)); // path-checked
        if (end_of_sequence)
          return Status::OK();
        CONVEYOR_RETURN_IF_ERROR(open()); // on failure the next call moves on to the next file
      }
      std::string record;
      bool end_of_file = false;
      Status read = reader_->read(record, end_of_file);
      if (!read.ok()) { // a corrupt file ends there; the next call moves on to the next file
        reader_.reset();
        return read.with_context("`tfrecord`");
      }
      if (!end_of_file) {
        ++records_;
        out = Element{Tensor::scalar(std::move(record))};
        return Status::OK();
      }
      reader_.reset();
    }
  }

  // The position in a file is its record index (FileSequence::save_position), checked as the
  // records are read again, unlike a byte offset into the middle of a record.
  Status save(IteratorStateWriter& out) override {
    files_.save_position(out, reader_ ? &file_ : nullptr, records_);
    return Status::OK();
  }

  Status restore(IteratorStateReader& in) override {
    reader_.reset();
    std::string record;
    return files_.restore_reader(
      in, "record", records_,
      [&](const std::string& file) {
        file_ = file;
        return open();
      },
      [&](bool& end) { return reader_->read(record, end).with_context("`tfrecord`"); });
  }

private:
  Status open() {
    auto reader = TFRecordReader::open(file_, compression_); // path-checked by files_
    if (!reader.ok())
      return reader.status().with_context("`tfrecord`");
    if (paths_)
      CONVEYOR_RETURN_IF_ERROR(paths_->check_open_file((*reader)->fd(), file_, "tfrecord"));
    reader_ = std::move(*reader);
    records_ = 0;
    return Status::OK();
  }

  FileSequence files_;
  const PathPolicy* paths_;
  FileCompression compression_;
  std::unique_ptr<TFRecordReader> reader_;
  std::string file_;
  int64_t records_ = 0; // of the open file, handed out
};

} // namespace

MakeResult make_tfrecord(const NodePtr& node, const KernelContext& kctx) {
  auto compression = compression_from_name(node->string_attr("compression_type"),
                                           "`tfrecord` argument `compression_type`");
  if (!compression.ok())
    return compression.status();
  std::vector<std::string> files;
  if (kctx.split_provider() == nullptr) { // with a provider, the splits name the files
    auto expanded = expand_file_patterns("tfrecord", node->strings_attr("files"), kctx.paths());
    if (!expanded.ok())
      return expanded.status();
    files = std::move(*expanded);
  }
  return IteratorPtr(std::make_unique<TFRecordIterator>(std::move(files), kctx.split_provider(),
                                                        kctx.paths(), *compression));
}

} // namespace conveyor::kernels
