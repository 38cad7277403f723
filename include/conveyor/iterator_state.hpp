// What an iterator holds between two get_next calls, as bytes (Iterator::save / restore): the
// trainer-side pipeline's part of a checkpoint (LocalPipeline::checkpoint, issue 36). Each op
// writes a tag with its name, its own fields, then its input's state, so a checkpoint restored
// into a pipeline of other ops fails naming the op where they differ.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "conveyor/element.hpp"
#include "conveyor/status.hpp"

namespace conveyor {

class IteratorStateWriter {
public:
  void put_tag(std::string_view op) { put_bytes(op); }
  void put_int(int64_t value);
  void put_bool(bool value) { put_int(value ? 1 : 0); }
  void put_bytes(std::string_view bytes);
  void put_element(const Element& element);
  void put_elements(const std::vector<Element>& elements);
  void put_status(const Status& status);

  // The read cursor of the elements the pipeline's source has handed to the ops (the source
  // sets it, while every op above it is paused): the part a resumed read starts from.
  void set_read_cursor(std::string cursor) { read_cursor_ = std::move(cursor); }
  const std::string& read_cursor() const { return read_cursor_; }
  bool has_read_cursor() const { return !read_cursor_.empty(); }

  const std::string& bytes() const { return bytes_; }

private:
  std::string bytes_;
  std::string read_cursor_;
};

// Reads what a writer wrote, in the same order. The first problem (truncated bytes, another op's
// tag, a bad element) sticks: later reads return zeros, and status() names it.
class IteratorStateReader {
public:
  explicit IteratorStateReader(std::string_view bytes) : in_(bytes) {}

  // data_loss naming both ops when the next state is not `op`'s.
  Status expect_tag(std::string_view op);
  int64_t get_int();
  bool get_bool() { return get_int() != 0; }
  std::string get_bytes();
  Element get_element();
  std::vector<Element> get_elements();
  Status get_status();

  const Status& status() const { return status_; }
  bool at_end() const { return in_.empty(); }

private:
  void fail(std::string why);

  std::string_view in_;
  Status status_;
};

} // namespace conveyor
