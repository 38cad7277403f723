// CSV/TSV records and typed columns (csv.hpp).
#include "pipeline/io/csv.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace conveyor {

namespace {

constexpr std::size_t kReadSize = std::size_t{1} << 16;

std::string shown_field(const std::string& f) {
  constexpr std::size_t kMax = 40;
  return f.size() <= kMax ? f : f.substr(0, kMax) + "...";
}

template <class T>
bool parse_number(const std::string& text, T& value) {
  const char* b = text.data();
  const char* e = b + text.size();
  if (b != e && *b == '+' && e - b > 1 && b[1] != '-')
    ++b; // from_chars takes no '+'
  auto [p, ec] = std::from_chars(b, e, value);
  return ec == std::errc() && p == e && b != e;
}

} // namespace

CsvRecordReader::CsvRecordReader(std::unique_ptr<InputStream> in, std::string name,
                                 CsvFormat format)
  : in_(std::move(in)), name_(std::move(name)), format_(format) {}

Status CsvRecordReader::fill(bool& more) {
  if (pos_ > 0 && pos_ >= buffer_.size() / 2) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  const std::size_t before = buffer_.size();
  buffer_.resize(before + kReadSize);
  std::size_t got = 0;
  Status st = in_->read(buffer_.data() + before, kReadSize, got);
  buffer_.resize(before + got);
  CONVEYOR_RETURN_IF_ERROR(st);
  eof_ = got < kReadSize;
  more = got > 0;
  return Status::OK();
}

Status CsvRecordReader::next(std::vector<std::string>& fields, std::vector<bool>& quoted,
                             bool& end) {
  end = false;
  if (!error_.ok())
    return error_;
  const char delim = format_.delimiter;
  for (;;) {
    if (pos_ == buffer_.size()) {
      if (eof_) {
        end = true;
        return Status::OK();
      }
      bool more = false;
      if (Status st = fill(more); !st.ok())
        return error_ = st;
      continue;
    }
    // Parses one record from pos_; when the buffer ends first (and the stream does not), reads
    // more and parses the record again from its start.
    fields.clear();
    quoted.clear();
    enum class State { start, unquoted, in_quotes, after_quotes } state = State::start;
    std::string field;
    bool field_quoted = false;
    std::size_t i = pos_;
    int64_t line = line_;
    bool complete = false;
    auto push = [&] {
      fields.push_back(std::move(field));
      quoted.push_back(field_quoted);
      field.clear();
      field_quoted = false;
      state = State::start;
    };
    auto fail = [&](const std::string& what) {
      return error_ = invalid_argument("`csv`: " + name_ + " line " + std::to_string(line) +
                                       " field " + std::to_string(fields.size()) + ": " + what);
    };
    while (!complete) {
      if (i == buffer_.size()) {
        if (!eof_)
          break;
        if (state == State::in_quotes)
          return fail("a quoted field is not closed before the end of the file");
        push(); // the last record, without a line break
        complete = true;
        break;
      }
      const char c = buffer_[i];
      if (state == State::start) {
        if (format_.quoting && c == '"') {
          state = State::in_quotes;
          field_quoted = true;
          ++i;
          continue;
        }
        state = State::unquoted;
      }
      if (state == State::unquoted) {
        if (c == delim) {
          push();
        } else if (c == '\n') {
          if (!field.empty() && field.back() == '\r')
            field.pop_back();
          push();
          ++line;
          complete = true;
        } else if (format_.quoting && c == '"') {
          return fail("a `\"` inside an unquoted field (quote the field and write `\"\"`)");
        } else {
          field += c;
        }
        ++i;
      } else if (state == State::in_quotes) {
        if (c == '"')
          state = State::after_quotes;
        else
          field += c;
        if (c == '\n')
          ++line;
        ++i;
      } else { // after_quotes
        if (c == '"') {
          field += '"';
          state = State::in_quotes;
        } else if (c == delim) {
          push();
        } else if (c == '\n') {
          push();
          ++line;
          complete = true;
        } else if (c == '\r' && i + 1 < buffer_.size() && buffer_[i + 1] == '\n') {
          // "\r\n" after the closing quote: the '\n' ends the record next
        } else if (c == '\r' && i + 1 == buffer_.size() && !eof_) {
          break; // cannot tell yet
        } else {
          return fail("a quoted field must be followed by the delimiter or the end of the line");
        }
        ++i;
      }
    }
    if (!complete) {
      bool more = false;
      if (Status st = fill(more); !st.ok())
        return error_ = st;
      continue;
    }
    record_line_ = line_;
    line_ = line;
    pos_ = i;
    return Status::OK();
  }
}

Expected<DType> csv_column_type(const std::string& name, const std::string& what) {
  // tf.data's CsvDataset record types; the other dtypes are a cast() after the source.
  auto dtype = dtype_from_name(name);
  if (!dtype || (*dtype != DType::int32 && *dtype != DType::int64 && *dtype != DType::float32 &&
                 *dtype != DType::float64 && *dtype != DType::string))
    return invalid_argument(what +
                            " must be \"int32\", \"int64\", \"float32\", \"float64\" or "
                            "\"string\", got \"" +
                            name + "\"");
  return *dtype;
}

Expected<Tensor> parse_csv_value(const std::string& text, DType dtype) {
  const auto bad = [&](const char* type) {
    return invalid_argument("`" + shown_field(text) + "` is not " + type);
  };
  switch (dtype) {
    case DType::int32: {
      int64_t v = 0;
      if (!parse_number(text, v))
        return bad("an int32");
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        return invalid_argument("`" + text + "` is out of the int32 range");
      return Tensor::scalar(static_cast<int32_t>(v));
    }
    case DType::int64: {
      int64_t v = 0;
      if (!parse_number(text, v))
        return bad("an int64 (or out of its range)");
      return Tensor::scalar(v);
    }
    case DType::float32: {
      float v = 0;
      if (!parse_number(text, v))
        return bad("a float32");
      return Tensor::scalar(v);
    }
    case DType::float64: {
      double v = 0;
      if (!parse_number(text, v))
        return bad("a float64");
      return Tensor::scalar(v);
    }
    case DType::string: return Tensor::scalar(text);
    default:
      return invalid_argument(std::string("csv has no columns of type ") + dtype_name(dtype));
  }
}

Expected<char> csv_delimiter(const std::string& field_delim) {
  if (field_delim.size() != 1 || field_delim == "\"" || field_delim == "\n" || field_delim == "\r")
    return invalid_argument("`csv` argument `field_delim` must be one character other than `\"`, "
                            "\\r and \\n, got \"" +
                            field_delim + "\"");
  return field_delim[0];
}

Expected<std::vector<CsvColumn>> csv_columns(const std::vector<std::string>& column_types,
                                             const std::vector<int64_t>& select_cols,
                                             const Element& record_defaults) {
  if (column_types.empty())
    return invalid_argument("`csv` argument `column_types` must name at least one column type");
  if (!select_cols.empty() && select_cols.size() != column_types.size())
    return invalid_argument("`csv` argument `select_cols` has " +
                            std::to_string(select_cols.size()) + " entries, `column_types` " +
                            std::to_string(column_types.size()) + ": they must be as many");
  if (record_defaults.size() != 0 && record_defaults.size() != column_types.size())
    return invalid_argument("`csv` argument `record_defaults` has " +
                            std::to_string(record_defaults.size()) + " entries, `column_types` " +
                            std::to_string(column_types.size()) +
                            ": give one per column (`[]` for a required one) or none");
  std::vector<CsvColumn> columns;
  for (std::size_t c = 0; c < column_types.size(); ++c) {
    CsvColumn column;
    auto dtype =
      csv_column_type(column_types[c], "`csv` argument `column_types` entry " + std::to_string(c));
    if (!dtype.ok())
      return dtype.status();
    column.dtype = *dtype;
    column.index = static_cast<int64_t>(c);
    if (!select_cols.empty()) {
      column.index = select_cols[c];
      if (column.index < 0 || (c > 0 && column.index <= select_cols[c - 1]))
        return invalid_argument("`csv` argument `select_cols` must be increasing indices >= 0, "
                                "got " +
                                std::to_string(column.index) + " at entry " + std::to_string(c));
    }
    if (record_defaults.size() != 0) {
      const Tensor& d = record_defaults[c];
      const std::string what = "`csv` argument `record_defaults` entry " + std::to_string(c);
      if (d.rank() == 1 && d.num_elements() == 0) {
        columns.push_back(std::move(column));
        continue; // required
      }
      if (d.rank() != 0)
        return invalid_argument(what + " must be a scalar or `[]` (required), got rank " +
                                std::to_string(d.rank()));
      const bool is_string = d.dtype() == DType::string;
      const bool is_int = d.dtype() == DType::int32 || d.dtype() == DType::int64;
      const bool want_string = column.dtype == DType::string;
      const bool want_int = column.dtype == DType::int32 || column.dtype == DType::int64;
      if (want_string != is_string || (want_int && !is_int) || d.dtype() == DType::boolean)
        return invalid_argument(what + " is a " + dtype_name(d.dtype()) + ", but the column is " +
                                dtype_name(column.dtype));
      switch (column.dtype) {
        case DType::int32:
          if (d.as_int64() < std::numeric_limits<int32_t>::min() ||
              d.as_int64() > std::numeric_limits<int32_t>::max())
            return invalid_argument(what + " is out of the int32 range");
          column.default_value = Tensor::scalar(static_cast<int32_t>(d.as_int64()));
          break;
        case DType::int64: column.default_value = Tensor::scalar(d.as_int64()); break;
        case DType::float32:
          column.default_value = Tensor::scalar(static_cast<float>(d.as_double()));
          break;
        case DType::float64: column.default_value = Tensor::scalar(d.as_double()); break;
        default: column.default_value = d; break;
      }
    }
    columns.push_back(std::move(column));
  }
  return columns;
}

std::string CsvDecoder::column_name(int64_t index) const {
  std::string s = "column " + std::to_string(index);
  if (index < static_cast<int64_t>(header_.size()))
    s += " (`" + shown_field(header_[static_cast<std::size_t>(index)]) + "`)";
  return s;
}

Status CsvDecoder::decode(const std::vector<std::string>& fields, const std::vector<bool>& quoted,
                          const std::string& name, int64_t line, Element& out) const {
  const std::string where = "`csv`: " + name + " line " + std::to_string(line);
  const auto n = static_cast<int64_t>(fields.size());
  if (expected_fields_ >= 0 && n != expected_fields_)
    return invalid_argument(where + " has " + std::to_string(n) + " field(s), expected " +
                            std::to_string(expected_fields_) + " (one per column_types entry)");
  std::vector<Tensor> values;
  values.reserve(columns_.size());
  for (const CsvColumn& column : columns_) {
    if (column.index >= n)
      return invalid_argument(where + " has " + std::to_string(n) +
                              " field(s), but select_cols asks for column " +
                              std::to_string(column.index));
    const auto i = static_cast<std::size_t>(column.index);
    const std::string& f = fields[i];
    const bool missing = !quoted[i] && (f.empty() || (!na_value_.empty() && f == na_value_));
    if (missing) {
      if (!column.default_value)
        return invalid_argument(where + " " + column_name(column.index) +
                                " has no value and no default (record_defaults)");
      values.push_back(*column.default_value);
      continue;
    }
    auto v = parse_csv_value(f, column.dtype);
    if (!v.ok())
      return invalid_argument(where + " " + column_name(column.index) + ": " +
                              v.status().message());
    values.push_back(std::move(*v));
  }
  out = Element(std::move(values));
  return Status::OK();
}

} // namespace conveyor
