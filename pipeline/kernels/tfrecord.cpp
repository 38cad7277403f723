// tfrecord(files): the raw bytes of every record of each file, as a string scalar. Under DYNAMIC
// sharding it reads the file of each split instead.
#include "pipeline/kernels/kernel.hpp"
#include "pipeline/kernels/source_sequences.hpp"
#include "pipeline/tfrecord.hpp"

namespace conveyor::kernels {

namespace {

class TFRecordIterator : public Iterator {
public:
  TFRecordIterator(std::vector<std::string> files, SplitProvider* provider,
                   const PathPolicy* paths)
      : files_(std::move(files), provider, "tfrecord", paths), paths_(paths) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    for (;;) {
      if (!reader_) {
        std::string file;
        CONVEYOR_RETURN_IF_ERROR(files_.next(file, end_of_sequence));
        if (end_of_sequence)
          return Status::OK();
        auto reader = TFRecordReader::open(file); // `file` is path-checked by files_
        if (!reader.ok()) // the next call moves on to the next file
          return reader.status().with_context("`tfrecord`");
        if (paths_)
          CONVEYOR_RETURN_IF_ERROR(paths_->check_open_file((*reader)->fd(), file, "tfrecord"));
        reader_ = std::move(*reader);
      }
      std::string record;
      bool end_of_file = false;
      Status read = reader_->read(record, end_of_file);
      if (!read.ok()) { // a corrupt file ends there; the next call moves on to the next file
        reader_.reset();
        return read.with_context("`tfrecord`");
      }
      if (!end_of_file) {
        out = Element{Tensor::scalar(std::move(record))};
        return Status::OK();
      }
      reader_.reset();
    }
  }

private:
  FileSequence files_;
  const PathPolicy* paths_;
  std::unique_ptr<TFRecordReader> reader_;
};

} // namespace

MakeResult make_tfrecord(const NodePtr& node, const KernelContext& kctx) {
  return IteratorPtr(
      std::make_unique<TFRecordIterator>(node->strings_attr("files"), kctx.split_provider(),
                                         kctx.paths()));
}

} // namespace conveyor::kernels
