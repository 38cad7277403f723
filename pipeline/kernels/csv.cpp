// csv(files, column_types, header, field_delim, na_value, select_cols, record_defaults,
// use_quote_delim, compression_type): one element per record of each file, a tuple of one scalar
// per column (pipeline/io/csv.hpp). Entries of `files` may be glob patterns or URLs; under DYNAMIC
// sharding it reads the file of each split instead. A record that does not decode (a bad number,
// a missing required value) is an error for that element only: the next call goes on with the
// next record; a file whose records cannot be split (an unclosed quote) ends there.
#include "pipeline/io/csv.hpp"
#include "pipeline/io/files.hpp"
#include "pipeline/kernels/kernel.hpp"
#include "pipeline/kernels/source_sequences.hpp"

namespace conveyor::kernels {

namespace {

class CsvIterator : public Iterator {
public:
  CsvIterator(std::vector<std::string> files, SplitProvider* provider, const PathPolicy* paths,
              FileCompression compression, CsvFormat format, bool header, CsvDecoder decoder)
    : files_(std::move(files), provider, "csv", paths), compression_(compression), format_(format),
      header_(header), decoder_(std::move(decoder)) {}

  Status get_next(Element& out, bool& end_of_sequence) override {
    end_of_sequence = false;
    std::vector<std::string> fields;
    std::vector<bool> quoted;
    for (;;) {
      if (!reader_) {
        std::unique_ptr<InputStream> stream;
        CONVEYOR_RETURN_IF_ERROR(
          files_.open_next(compression_, "CSV file", stream, end_of_sequence));
        if (end_of_sequence)
          return Status::OK();
        CONVEYOR_RETURN_IF_ERROR(start(std::move(stream)));
      }
      bool end = false;
      Status st = reader_->next(fields, quoted, end);
      if (!st.ok()) { // records cannot be told apart any more: the file ends here
        reader_.reset();
        return st;
      }
      if (!end) {
        ++records_;
        return decoder_.decode(fields, quoted, reader_->name(), reader_->line(), out);
      }
      reader_.reset();
      decoder_.set_header({});
    }
  }

  // The position in a file is its record index (after the header): restore reopens the file,
  // reads the header again and skips that many records.
  Status save(IteratorStateWriter& out) override {
    const std::string file = reader_ ? reader_->name() : std::string{};
    files_.save_position(out, reader_ ? &file : nullptr, records_);
    return Status::OK();
  }

  Status restore(IteratorStateReader& in) override {
    reader_.reset();
    std::vector<std::string> fields;
    std::vector<bool> quoted;
    return files_.restore_reader(
      in, "record", records_,
      [&](const std::string& file) -> Status {
        auto stream = InputStream::open(file, compression_, "CSV file");
        if (!stream.ok())
          return stream.status().with_context("`csv`");
        return start(std::move(*stream));
      },
      [&](bool& end) { return reader_->next(fields, quoted, end); });
  }

private:
  // Reads the header of a newly opened file (when it has one).
  Status start(std::unique_ptr<InputStream> stream) {
    const std::string name = stream->path();
    reader_ = std::make_unique<CsvRecordReader>(std::move(stream), name, format_);
    records_ = 0;
    if (!header_)
      return Status::OK();
    std::vector<std::string> fields;
    std::vector<bool> quoted;
    bool end = false;
    Status st = reader_->next(fields, quoted, end);
    if (!st.ok()) {
      reader_.reset();
      return st;
    }
    decoder_.set_header(end ? std::vector<std::string>{} : fields);
    return Status::OK();
  }

  FileSequence files_;
  FileCompression compression_;
  CsvFormat format_;
  bool header_;
  CsvDecoder decoder_;
  std::unique_ptr<CsvRecordReader> reader_;
  int64_t records_ = 0; // of the open file, handed out
};

} // namespace

MakeResult make_csv(const NodePtr& node, const KernelContext& kctx) {
  auto compression = compression_from_name(node->string_attr("compression_type"),
                                           "`csv` argument `compression_type`");
  if (!compression.ok())
    return compression.status();
  auto delimiter = csv_delimiter(node->string_attr("field_delim"));
  if (!delimiter.ok())
    return delimiter.status();
  const auto& select_cols = std::get<std::vector<int64_t>>(node->attrs.at("select_cols"));
  auto columns = csv_columns(node->strings_attr("column_types"), select_cols,
                             node->element_attr("record_defaults"));
  if (!columns.ok())
    return columns.status();
  // Without select_cols every record has exactly one field per column (tf.data's check).
  const int64_t expected = select_cols.empty() ? static_cast<int64_t>(columns->size()) : -1;
  std::vector<std::string> files;
  if (kctx.split_provider() == nullptr) { // with a provider, the splits name the files
    auto expanded = expand_file_patterns("csv", node->strings_attr("files"), kctx.paths());
    if (!expanded.ok())
      return expanded.status();
    files = std::move(*expanded);
  }
  CsvFormat format{*delimiter, node->bool_attr("use_quote_delim")};
  return IteratorPtr(std::make_unique<CsvIterator>(
    std::move(files), kctx.split_provider(), kctx.paths(), *compression, format,
    node->bool_attr("header"),
    CsvDecoder(std::move(*columns), expected, node->string_attr("na_value"))));
}

} // namespace conveyor::kernels
