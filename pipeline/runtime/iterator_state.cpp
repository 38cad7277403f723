#include "conveyor/iterator_state.hpp"

#include <cstring>

#include "conveyor/iterator.hpp"
#include "pipeline/tensor/codec.hpp"

namespace conveyor {

namespace {

// The default, for iterators that do not override save: a registered source function's (the
// source kernel names the function) unless its registration says skip_by_count.
constexpr const char* kCannotSave =
  "an op of this pipeline cannot save its state (ops that can: the sources range, "
  "from_tensors, from_tensor_slices, list_files, text_lines, tfrecord, csv, webdataset, load, "
  "random, a LocalPipeline's source, and a registered source function whose iterator overrides "
  "Iterator::save/restore or whose FunctionDef says source_checkpoint = skip_by_count; map, "
  "filter, flat_map, interleave, batch, padded_batch, unbatch, shuffle, take, skip, shard, "
  "repeat, concatenate, zip, enumerate, ignore_errors, parse_example, prefetch, cache)";

} // namespace

Status Iterator::save(IteratorStateWriter&) { return failed_precondition(kCannotSave); }
Status Iterator::restore(IteratorStateReader&) { return failed_precondition(kCannotSave); }

void IteratorStateWriter::put_int(int64_t value) {
  char raw[sizeof value];
  std::memcpy(raw, &value, sizeof value);
  bytes_.append(raw, sizeof raw);
}

void IteratorStateWriter::put_bytes(std::string_view bytes) {
  put_int(static_cast<int64_t>(bytes.size()));
  bytes_.append(bytes.data(), bytes.size());
}

void IteratorStateWriter::put_element(const Element& element) {
  std::string encoded;
  encode_element(element, encoded);
  put_bytes(encoded);
}

void IteratorStateWriter::put_elements(const std::vector<Element>& elements) {
  put_int(static_cast<int64_t>(elements.size()));
  for (const Element& element : elements)
    put_element(element);
}

void IteratorStateWriter::put_status(const Status& status) {
  put_int(static_cast<int64_t>(status.code()));
  put_bytes(status.message());
}

void IteratorStateReader::fail(std::string why) {
  if (status_.ok())
    status_ = data_loss("pipeline state: " + std::move(why));
  in_ = {};
}

Status IteratorStateReader::expect_tag(std::string_view op) {
  const std::string tag = get_bytes();
  if (status_.ok() && tag != op)
    fail("it holds the state of `" + tag + "` where this pipeline has `" + std::string(op) +
         "` (a checkpoint restores only into a pipeline of the same ops)");
  return status_;
}

int64_t IteratorStateReader::get_int() {
  int64_t value = 0;
  if (in_.size() < sizeof value) {
    fail("truncated");
    return 0;
  }
  std::memcpy(&value, in_.data(), sizeof value);
  in_.remove_prefix(sizeof value);
  return value;
}

std::string IteratorStateReader::get_bytes() {
  const int64_t size = get_int();
  if (size < 0 || static_cast<uint64_t>(size) > in_.size()) {
    fail("truncated");
    return {};
  }
  std::string bytes(in_.substr(0, static_cast<std::size_t>(size)));
  in_.remove_prefix(static_cast<std::size_t>(size));
  return bytes;
}

Element IteratorStateReader::get_element() {
  const std::string encoded = get_bytes();
  if (!status_.ok())
    return {};
  auto element = decode_element(encoded);
  if (!element.ok()) {
    fail("an element: " + element.status().message());
    return {};
  }
  return std::move(*element);
}

std::vector<Element> IteratorStateReader::get_elements() {
  const int64_t count = get_int();
  std::vector<Element> elements;
  // Each element takes at least its length field: a count past that is corrupt, not a size to
  // reserve.
  if (count < 0 || static_cast<uint64_t>(count) > in_.size() / sizeof(int64_t)) {
    fail("truncated");
    return elements;
  }
  elements.reserve(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count && status_.ok(); ++i)
    elements.push_back(get_element());
  return elements;
}

Status IteratorStateReader::get_status() {
  const int64_t code = get_int();
  std::string message = get_bytes();
  if (code < 0 || code > static_cast<int64_t>(ErrorCode::resource_exhausted)) {
    fail("an error code out of range");
    return Status::OK();
  }
  if (code == 0)
    return Status::OK();
  return Status(static_cast<ErrorCode>(code), std::move(message));
}

} // namespace conveyor
