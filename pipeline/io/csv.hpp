// CSV/TSV records (RFC 4180) and their typed columns, as tf.data's CsvDataset reads them.
//
// Records: fields separated by one delimiter byte, records by "\n" or "\r\n". With quoting on, a
// field that starts with `"` is quoted: it runs to the next lone `"`, may hold delimiters and line
// breaks, and `""` inside it is one `"`; the closing quote must be followed by the delimiter or
// the end of the record. A `"` inside an unquoted field is an error (tf.data: "Unquoted fields
// cannot have quotes inside"). An empty line is a record of one empty field; a last record without
// a line break still counts.
//
// Columns: a field is missing when it is empty and unquoted, or equal to na_value (quoted `""` is
// an empty string, not a missing one). A missing field takes its column's default, or is an error
// naming the file, the line and the column. int32/int64 are decimal integers, float32/float64
// decimal or scientific notation (also inf, nan); surrounding blanks are not allowed, exactly as
// the bytes say.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/io/files.hpp"
#include "pipeline/tensor/element.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor {

struct CsvFormat {
  char delimiter = ',';
  bool quoting = true; // tf.data's use_quote_delim
};

// Splits a stream into records. Errors name `name` (the file or redacted URL) and the line.
class CsvRecordReader {
public:
  CsvRecordReader(std::unique_ptr<InputStream> in, std::string name, CsvFormat format);
  // The next record's fields, or end at a clean end of the stream. After an error every call
  // returns it again.
  Status next(std::vector<std::string>& fields, std::vector<bool>& quoted, bool& end);
  int64_t line() const { return record_line_; } // 1-based line where the last record started
  const std::string& name() const { return name_; }

private:
  Status fill(bool& more);
  std::unique_ptr<InputStream> in_;
  std::string name_;
  CsvFormat format_;
  std::string buffer_;
  std::size_t pos_ = 0;
  bool eof_ = false;
  int64_t line_ = 1; // line of buffer_[pos_]
  int64_t record_line_ = 0;
  Status error_;
};

// One output column: its type, its default (nullopt: required) and its index in the record.
struct CsvColumn {
  DType dtype = DType::string;
  std::optional<Tensor> default_value;
  int64_t index = 0;
};

// "int32", "int64", "float32", "float64" or "string"; invalid_argument naming `what` otherwise.
Expected<DType> csv_column_type(const std::string& name, const std::string& what);
// The scalar of `dtype` that `text` spells; invalid_argument with a message saying what was
// expected ("`12x` is not an int64").
Expected<Tensor> parse_csv_value(const std::string& text, DType dtype);

// The columns of csv(column_types, select_cols, record_defaults), checked; errors name the
// argument. select_cols: strictly increasing indices >= 0, one per column_types entry (empty:
// columns 0, 1, ...). record_defaults: empty (every column required) or one per column: a scalar
// (the default, converted to the column's type: an integer for int columns, a number for float
// columns, a string for string columns) or an empty list `[]` (required), as tf.data encodes them.
Expected<std::vector<CsvColumn>> csv_columns(const std::vector<std::string>& column_types,
                                             const std::vector<int64_t>& select_cols,
                                             const Element& record_defaults);
// field_delim: exactly one byte, not `"`, "\r" or "\n".
Expected<char> csv_delimiter(const std::string& field_delim);

// Turns records into elements: one scalar per column. `header` names columns in errors.
class CsvDecoder {
public:
  CsvDecoder(std::vector<CsvColumn> columns, int64_t expected_fields, std::string na_value)
    : columns_(std::move(columns)), expected_fields_(expected_fields),
      na_value_(std::move(na_value)) {}
  void set_header(std::vector<std::string> names) { header_ = std::move(names); }
  // expected_fields < 0: the record needs at least the highest column index + 1 fields.
  Status decode(const std::vector<std::string>& fields, const std::vector<bool>& quoted,
                const std::string& name, int64_t line, Element& out) const;

private:
  std::string column_name(int64_t index) const;
  std::vector<CsvColumn> columns_;
  int64_t expected_fields_;
  std::string na_value_;
  std::vector<std::string> header_;
};

} // namespace conveyor
