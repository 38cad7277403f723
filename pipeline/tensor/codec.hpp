// Element codec: the compact binary form in which elements cross the network.
//
// One element: component count, then per component dtype, rank, dims, payload (numeric bytes,
// or length-prefixed strings). A batch buffer holds many elements behind a small header
// (magic, format version, flags, element count, uncompressed size) and is optionally lz4
// compressed as a whole. In a batch, numeric payloads are 8-aligned from the buffer's start
// (format version 2), so that a decoder given an owner views them instead of copying. Decoding never trusts the buffer: any malformed input gives a
// data_loss Status (version_mismatch for a buffer of another format
// version) and never reads out of bounds.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/tensor/element.hpp"
#include "pipeline/tensor/gather_buffer.hpp"
#include "pipeline/runtime/status.hpp"

namespace conveyor {

// The reference's compression argument: "AUTO" lets the service decide (lz4 for batches where
// it pays), "NONE" never compresses. `lz4` forces compression.
enum class Compression : unsigned char { none, lz4, automatic };
const char* to_string(Compression c); // "NONE", "LZ4", "AUTO"
std::optional<Compression> compression_from_string(std::string_view name);

// Appends one element's encoding to `out`.
void encode_element(const Element& element, std::string& out);
// Decodes exactly one element occupying all of `in`.
Expected<Element> decode_element(std::string_view in);

// Encodes many elements into one buffer (automatic = compress if the data is large enough
// and lz4 shrinks it).
std::string encode_batch(const std::vector<Element>& elements, Compression compression);
// The same bytes for elements held elsewhere (a task's buffer) whose encoded sizes
// (encoded_element_size) the caller has: nothing is moved or measured again.
std::string encode_batch(const std::vector<const Element*>& elements,
                         const std::vector<std::size_t>& element_sizes, Compression compression);
// The same into a frame buffer: `out` ends up as its first `prefix` bytes (kept; e.g. a frame
// header the caller fills) followed by the batch buffer. One pass over the payload bytes: the
// buffer can then be sent without another copy (actors/bulk).
void encode_batch_into(const std::vector<Element>& elements, Compression compression,
                       std::vector<char>& out, std::size_t prefix);
// The same bytes as encode_batch_into, in pieces: numeric payloads and strings of
// kGatherViewMinBytes or more
// become views of their tensors' storage instead of copies (pipeline/tensor/gather_buffer.hpp), unless
// the batch is compressed (lz4, or AUTO where a probe of the body compresses), which needs the
// bytes in one place. `out.own` starts with `prefix` bytes of room.
inline constexpr std::size_t kGatherViewMinBytes = 4096;
void encode_batch_gather(const std::vector<Element>& elements, Compression compression,
                         GatherBuffer& out, std::size_t prefix);
// Bytes (at most) of the uncompressed batch buffer for `elements`, so that batches can be packed by their
// encoded size; entry_size is one element's share (its length prefix + encoding) and
// header_size the fixed part.
std::size_t encoded_batch_size(const std::vector<Element>& elements);
// An entry's size; at most that for an element with aligned payloads: its pad depends on where
// it lands (codec.cpp).
std::size_t encoded_batch_entry_size(const Element& element);
// The same from its encoded_element_size.
std::size_t encoded_batch_entry_size(const Element& element, std::size_t element_size);
// Inside a batch (its payload pads), not as encode_element writes it alone.
std::size_t encoded_element_size(const Element& element);
std::size_t encoded_batch_header_size();

// Appends the decoded elements to `out`; on error `out` is left as it was. The tensors own
// copies of their bytes (or view the inflated body of a compressed batch).
Status decode_batch(std::string_view in, std::vector<Element>& out);
// Zero copy: the decoded tensors view `in` (numeric ones where aligned), and `owner` — which
// must keep `in` alive and unchanged — becomes their storage's owner.
Status decode_batch(StorageOwner owner, std::string_view in, std::vector<Element>& out);

// A batch buffer read one element at a time (decode_batch reads all of it with one): decoding
// each element into the caller's Element reuses that Element's memory. `in` must outlive the
// reader and stay unchanged; `owner` as for decode_batch.
class BatchReader {
public:
  // Checks the header and inflates an lz4 body: decode_batch's errors for those.
  static Expected<BatchReader> open(std::string_view in, StorageOwner owner = nullptr);
  uint64_t count() const { return count_; }
  uint64_t read() const { return index_; } // elements read or skipped so far
  bool done() const { return index_ == count_; }
  // The next element into `out` (its components replaced), or stepped over undecoded. The last
  // one also checks that no bytes trail it. Errors name the element; read no further after one.
  Status next(Element& out) { return advance(&out); }
  Status skip() { return advance(nullptr); }

private:
  BatchReader() = default;
  Status advance(Element* out);          // the next element, then a prefetch of one further on
  Status decode_next(Element* out);      // any element, or an error naming what is wrong
  bool next_single_string(Element& out); // the common one fast (codec.cpp)
  StorageOwner owner_; // of the bytes tensors may view (the inflated body, for lz4)
  std::string_view body_;
  std::size_t offset_ = 0;
  uint64_t count_ = 0;
  uint64_t index_ = 0;
  bool pads_ = false; // format version 2: aligned payloads (codec.cpp)
};

} // namespace conveyor
