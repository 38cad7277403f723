// text_lines(files): one string scalar per line of each file, without the line ending ("\n" or
// "\r\n"); a last line without a newline still counts. Under DYNAMIC sharding it reads the file
// of each split instead.
#include <fstream>

#include "pipeline/kernels/kernel.hpp"
#include "pipeline/kernels/source_sequences.hpp"

namespace conveyor::kernels {

namespace {

class TextLinesIterator : public Iterator {
public:
  TextLinesIterator(std::vector<std::string> files, SplitProvider* provider,
                    const PathPolicy* paths)
      : files_(std::move(files), provider, "text_lines", paths) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    for (;;) {
      if (!stream_.is_open()) {
        CONVEYOR_RETURN_IF_ERROR(files_.next(file_, end_of_sequence)); // path-checked
        if (end_of_sequence)
          return Status::OK();
        stream_.clear();
        stream_.open(file_, std::ios::binary);
        if (!stream_.is_open()) // the next call moves on to the next file
          return not_found("`text_lines`: cannot open the file `" + file_ + "`");
      }
      std::string line;
      if (std::getline(stream_, line)) {
        if (!line.empty() && line.back() == '\r')
          line.pop_back();
        out = Element{Tensor::scalar(std::move(line))};
        return Status::OK();
      }
      const bool failed = stream_.bad();
      stream_.close();
      if (failed)
        return io_error("`text_lines`: error while reading the file `" + file_ + "`");
    }
  }

private:
  FileSequence files_;
  std::string file_;
  std::ifstream stream_;
};

} // namespace

MakeResult make_text_lines(const NodePtr& node, const KernelContext& kctx) {
  return IteratorPtr(
      std::make_unique<TextLinesIterator>(node->strings_attr("files"), kctx.split_provider(),
                                          kctx.paths()));
}

} // namespace conveyor::kernels
