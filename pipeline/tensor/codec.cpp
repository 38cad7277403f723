// Element codec (format overview in codec.hpp).
//
// Element encoding; every integer is an unsigned LEB128 varint except the dtype byte:
//   num_components, then per component:
//     dtype (1 byte, DType's value) | rank | dims[rank] | payload
//     payload of a numeric tensor: num_entries * dtype_size raw little-endian bytes
//       (bool: one byte per entry, 0 or 1; float16/bfloat16: their 16-bit patterns; complex:
//       real then imaginary part)
//     payload of a string tensor: per entry, length | bytes
//
// Batch buffer (format version 2; version 1 is still read):
//   header, 24 bytes, integers little-endian:
//     magic "CVEB" | format version (u8) | flags (u8) | element count (u64) | raw body size (u64)
//     | 2 zero bytes (version 1: none, a 22-byte header)
//   body: per element, entry | element encoding — raw_size bytes in all; when flags has
//   kFlagLz4 the body is stored as one lz4 block that decompresses to exactly raw_size bytes.
//   Version 2 aligns numeric payloads, so that a reader can view them in the received buffer
//   (zero copy) instead of copying each: inside a batch, a numeric payload of more than
//   Tensor::kInlineBytes is preceded by a pad (u8 p, then p zero bytes, p < 8) that puts it at a
//   multiple of 8 bytes from its element's start; the entry is varint(2 * length + a), and where
//   a = 1 (the element has such a payload) a pad follows (u8 q, q zero bytes, q < 8) that puts
//   the element at a multiple of 8 bytes from the body's start (version 1: the entry is
//   varint(length), no pads anywhere). Standalone elements (encode_element) have no pads.
//
// Decoding trusts nothing: every count is checked against the bytes that remain before anything
// is allocated for it, so a short or hostile buffer can only produce a data_loss Status.
#include "pipeline/tensor/codec.hpp"

#include <lz4.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <type_traits>

#include "pipeline/tensor/buffer_pool.hpp"
#include "pipeline/tensor/tensor_internals.hpp"

namespace conveyor {
namespace {

constexpr char kMagic[4] = {'C', 'V', 'E', 'B'};
// The dtypes of codes 6..15 did not change the version: a reader without them refuses their
// codes by name (decode_tensor), and peers of another protocol version never exchange batches.
// 2: aligned numeric payloads (above). Version 1 buffers (snapshot files written before) are read.
constexpr uint8_t kFormatVersion = 2;
constexpr uint8_t kFlagLz4 = 1;
constexpr std::size_t kHeaderSizeV1 = 4 + 1 + 1 + 8 + 8;
constexpr std::size_t kHeaderSize = kHeaderSizeV1 + 2; // the body starts 8-aligned
// Numeric payloads sit at multiples of this from the body's start (format version 2), which
// is dtype_alignment of every dtype.
constexpr std::size_t kPayloadAlign = 8;

// TensorFlow's own limit on the rank of a tensor.
constexpr uint64_t kMaxRank = 254;
// Bound on the product of the non-zero dims of an (empty) tensor, so that num_elements() of any
// decoded shape cannot overflow int64. Non-empty tensors are bounded by the payload bytes anyway.
constexpr uint64_t kMaxEntries = uint64_t{1} << 40;
// lz4 expands at most ~255x (a run of length 255 per extra byte); a larger claim is a lie.
constexpr uint64_t kMaxLz4Ratio = 255;

// `automatic` compresses a body only from this size on, and keeps the compressed form only when
// it saves at least 1/16 of the bytes: below that, decompressing costs more than it saves.
constexpr std::size_t kAutoCompressMinBytes = 4096;
// Bodies larger than twice this are first probed: `automatic` compresses the whole body only if
// its first kAutoProbeBytes shrink by 1/16, so incompressible megabytes cost one small lz4 pass
// instead of a full one plus a discarded buffer.
constexpr std::size_t kAutoProbeBytes = 64 * 1024;

bool saves_enough(std::size_t raw, std::size_t packed) { return packed <= raw - raw / 16; }

// --- writing

std::size_t varint_size(uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Where encoding appends: std::string (the classic API) or std::vector<char> (a frame buffer
// that a bulk connection sends as is). Appending never zero-fills first.
struct VecOut {
  std::vector<char>& v;
  void push_back(char c) { v.push_back(c); }
  void append(const char* p, std::size_t n) { v.insert(v.end(), p, p + n); }
  void append(std::string_view s) { append(s.data(), s.size()); }
};
struct StrOut {
  std::string& s;
  void push_back(char c) { s.push_back(c); }
  void append(const char* p, std::size_t n) { s.append(p, n); }
  void append(std::string_view v) { s.append(v.data(), v.size()); }
};

// Where encode_batch_gather appends: large payloads (numeric bytes, strings) become views of
// their tensors' storage (no copy).
struct GatherOut {
  GatherBuffer& g;
  void push_back(char c) { g.own.push_back(c); }
  void append(const char* p, std::size_t n) { g.own.insert(g.own.end(), p, p + n); }
  void append(std::string_view s) { append(s.data(), s.size()); }
  // Bytes of `t`'s storage (its numeric bytes, or one of its strings).
  void append_stored(const Tensor& t, const char* p, std::size_t n) {
    StorageOwner keep = n >= kGatherViewMinBytes ? t.storage_owner() : nullptr;
    if (keep)
      g.add_view(std::move(keep), p, n);
    else
      append(p, n);
  }
};

template <class Out>
void put_varint(Out& out, uint64_t v) {
  if (v < 0x80) { // the common case: counts, ranks, small dims and lengths
    out.push_back(static_cast<char>(v));
    return;
  }
  char buf[10];
  std::size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out.append(buf, n);
}

// Whether a tensor's payload is aligned inside a batch (format version 2): numeric ones that are
// not kept inline by Tensor (those are copied anyway).
bool aligned_payload(DType dtype, std::size_t bytes) {
  return dtype != DType::string && bytes > Tensor::kInlineBytes;
}
bool has_aligned_payload(const Element& e) {
  for (const Tensor& t : e.components)
    if (aligned_payload(t.dtype(), t.bytes().size()))
      return true;
  return false;
}
// The pad count p that puts what follows the pad's count byte, written at `at`, at a multiple
// of kPayloadAlign.
std::size_t pad_after(std::size_t at) {
  return (kPayloadAlign - (at + 1) % kPayloadAlign) % kPayloadAlign;
}

template <class Out>
void put_pad(Out& out, std::size_t p) {
  static constexpr char kZeros[kPayloadAlign] = {};
  out.push_back(static_cast<char>(p));
  if (p > 0)
    out.append(kZeros, p);
}

void put_le(char* at, uint64_t v, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i)
    at[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t get_le(const char* at, std::size_t bytes) {
  uint64_t v = 0;
  for (std::size_t i = 0; i < bytes; ++i)
    v |= uint64_t{static_cast<unsigned char>(at[i])} << (8 * i);
  return v;
}

std::size_t payload_size(const Tensor& t) {
  if (t.dtype() != DType::string)
    return t.bytes().size();
  std::size_t n = 0;
  for (int64_t i = 0, e = t.num_elements(); i < e; ++i) {
    const std::size_t len = t.string_at(i).size();
    n += varint_size(len) + len;
  }
  return n;
}

// `at`: the tensor's offset in its element; `aligned`: inside a batch (payload pads).
std::size_t encoded_size(const Tensor& t, bool aligned, std::size_t at) {
  std::size_t n = 1 + varint_size(t.shape().size());
  for (int64_t d : t.shape())
    n += varint_size(static_cast<uint64_t>(d));
  if (aligned && aligned_payload(t.dtype(), t.bytes().size()))
    n += 1 + pad_after(at + n);
  return n + payload_size(t);
}

std::size_t encoded_size(const Element& e, bool aligned) {
  aligned = aligned && has_aligned_payload(e); // (string payloads are not walked twice)
  std::size_t n = varint_size(e.components.size());
  for (const Tensor& t : e.components)
    n += encoded_size(t, aligned, n);
  return n;
}

// `at`: the tensor's offset in its element, advanced past it; `aligned` as for encoded_size.
template <class Out>
void encode_tensor(const Tensor& t, Out& out, bool aligned, std::size_t& at) {
  out.push_back(static_cast<char>(t.dtype()));
  put_varint(out, t.shape().size());
  std::size_t head = 1 + varint_size(t.shape().size());
  for (int64_t d : t.shape()) {
    put_varint(out, static_cast<uint64_t>(d));
    head += varint_size(static_cast<uint64_t>(d));
  }
  at += head;
  if (aligned && aligned_payload(t.dtype(), t.bytes().size())) {
    const std::size_t p = pad_after(at);
    put_pad(out, p);
    at += 1 + p;
  }
  if (aligned) // (only pads need the offset; a string payload would be walked again for it)
    at += payload_size(t);
  if (t.dtype() == DType::string) {
    for (int64_t i = 0, e = t.num_elements(); i < e; ++i) {
      const std::string_view s = t.string_at(i);
      put_varint(out, s.size());
      if constexpr (std::is_same_v<Out, GatherOut>)
        out.append_stored(t, s.data(), s.size());
      else
        out.append(s);
    }
  } else if (!t.bytes().empty()) {
    if constexpr (std::is_same_v<Out, GatherOut>)
      out.append_stored(t, reinterpret_cast<const char*>(t.bytes().data()), t.bytes().size());
    else
      out.append(reinterpret_cast<const char*>(t.bytes().data()), t.bytes().size());
  }
}

// True if lz4 shrinks `sample` enough for `automatic` to keep the compressed form.
bool probe_compresses(std::string_view sample) {
  const int bound = LZ4_compressBound(static_cast<int>(sample.size()));
  std::unique_ptr<char[]> scratch{new char[static_cast<std::size_t>(bound)]};
  const int n =
    LZ4_compress_default(sample.data(), scratch.get(), static_cast<int>(sample.size()), bound);
  return n > 0 && saves_enough(sample.size(), static_cast<std::size_t>(n));
}

template <class Out>
void append_element(const Element& e, Out& out, bool aligned) {
  aligned = aligned && has_aligned_payload(e);
  put_varint(out, e.components.size());
  std::size_t at = varint_size(e.components.size());
  for (const Tensor& t : e.components)
    encode_tensor(t, out, aligned, at);
}

void write_header(char* at, uint8_t flags, uint64_t count, uint64_t raw_size) {
  std::memcpy(at, kMagic, sizeof kMagic);
  at[4] = static_cast<char>(kFormatVersion);
  at[5] = static_cast<char>(flags);
  put_le(at + 6, count, 8);
  put_le(at + 14, raw_size, 8);
  at[22] = at[23] = 0;
}

// Compresses `raw` into one lz4 block placed after `offset` bytes of `packed` (room for the
// header), or returns false if lz4 cannot take it.
bool lz4_compress(std::string_view raw, std::size_t offset, std::string& packed) {
  if (raw.size() > static_cast<std::size_t>(LZ4_MAX_INPUT_SIZE))
    return false;
  const int bound = LZ4_compressBound(static_cast<int>(raw.size()));
  packed.resize(offset + static_cast<std::size_t>(bound));
  const int n =
    LZ4_compress_default(raw.data(), packed.data() + offset, static_cast<int>(raw.size()), bound);
  if (n <= 0)
    return false;
  packed.resize(offset + static_cast<std::size_t>(n));
  return true;
}

// --- reading

// A bounds-checked cursor over a buffer. `base` is the offset of the buffer inside the buffer or
// batch body it came from, so that error messages give positions one can find in a hex dump.
class Reader {
public:
  // `position_name` says what offsets count from: "byte offset" or "body byte offset".
  Reader(std::string_view in, std::size_t base, const char* position_name)
    : in_(in), base_(base), position_name_(position_name) {}

  std::size_t offset() const { return base_ + pos_; }
  std::size_t remaining() const { return in_.size() - pos_; }

  bool read_u8(uint8_t& v) {
    if (pos_ >= in_.size())
      return false;
    v = static_cast<uint8_t>(in_[pos_++]);
    return true;
  }

  // False when truncated, longer than 10 bytes, or above 2^64 - 1.
  bool read_varint(uint64_t& v) {
    v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!read_u8(b))
        return false;
      if (shift == 63 && b > 1)
        return false;
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0)
        return true;
    }
    return false;
  }

  // The next n bytes, which the caller has checked are there (n <= remaining()).
  std::string_view peek(std::size_t n) const { return in_.substr(pos_, n); }
  std::string_view take(std::size_t n) {
    std::string_view s = peek(n);
    pos_ += n;
    return s;
  }

  Status error(const std::string& what) const {
    return data_loss(what + " (at " + position_name_ + " " + std::to_string(offset()) + ")");
  }
  Status bad_varint(const char* field) const {
    return error(std::string{"truncated or overlong varint for the "} + field);
  }

private:
  std::string_view in_;
  std::size_t base_;
  const char* position_name_;
  std::size_t pos_ = 0;
};

std::string shape_text(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status decode_shape(Reader& r, Shape& shape, uint64_t& entries) {
  uint64_t rank;
  if (!r.read_varint(rank))
    return r.bad_varint("rank");
  if (rank > kMaxRank)
    return r.error("rank " + std::to_string(rank) + " exceeds the maximum rank " +
                   std::to_string(kMaxRank));
  shape.assign(rank, 0);
  uint64_t nonzero_product = 1;
  bool has_zero_dim = false;
  for (uint64_t i = 0; i < rank; ++i) {
    uint64_t dim;
    if (!r.read_varint(dim))
      return r.bad_varint("dimension");
    if (dim == 0) {
      has_zero_dim = true;
    } else if (dim > kMaxEntries / nonzero_product) {
      return r.error("dimension " + std::to_string(i) + " (" + std::to_string(dim) +
                     ") makes the shape exceed " + std::to_string(kMaxEntries) + " entries");
    } else {
      nonzero_product *= dim;
    }
    shape[i] = static_cast<int64_t>(dim);
  }
  entries = has_zero_dim ? 0 : nonzero_product;
  return Status::OK();
}

// A pad (format version 2): its count byte, below kPayloadAlign, then that many zero bytes.
Status skip_pad(Reader& r, const char* before) {
  uint8_t p;
  if (!r.read_u8(p))
    return r.error(std::string{"truncated before the pad of "} + before);
  if (p >= kPayloadAlign || p > r.remaining())
    return r.error("pad of " + std::to_string(p) + " bytes before " + before +
                   ", expected fewer than " + std::to_string(kPayloadAlign) + " within the " +
                   std::to_string(r.remaining()) + " bytes that remain");
  const std::string_view zeros = r.take(p);
  for (char c : zeros)
    if (c != 0)
      return r.error(std::string{"non-zero pad byte before "} + before);
  return Status::OK();
}

// `pads`: a batch of format version 2 (aligned payloads).
Status decode_numeric(Reader& r, DType dtype, Shape shape, uint64_t entries, bool pads,
                      const StorageOwner& owner, Tensor& out) {
  const std::size_t entry_size = dtype_size(dtype);
  // (entries <= kMaxEntries: no overflow)
  if (pads && aligned_payload(dtype, static_cast<std::size_t>(entries * entry_size)))
    CONVEYOR_RETURN_IF_ERROR(skip_pad(r, "a payload"));
  if (entries > r.remaining() / entry_size)
    return r.error("shape " + shape_text(shape) + " of " + dtype_name(dtype) + " needs " +
                   std::to_string(entries) + " x " + std::to_string(entry_size) +
                   " payload bytes, only " + std::to_string(r.remaining()) + " remain");
  const std::size_t n = static_cast<std::size_t>(entries) * entry_size;
  if (dtype == DType::boolean) {
    // Any other byte would be an invalid bool value for whoever reads the tensor.
    const std::string_view payload = r.peek(n);
    for (std::size_t i = 0; i < n; ++i)
      if (static_cast<unsigned char>(payload[i]) > 1)
        return r.error("bool entry " + std::to_string(i) + " has byte value " +
                       std::to_string(static_cast<unsigned char>(payload[i])) +
                       ", expected 0 or 1");
  }
  std::string_view payload = r.take(n);
  const auto* p = reinterpret_cast<const unsigned char*>(payload.data());
  // Zero copy: the tensor views the received buffer (numeric views must be aligned).
  if (owner && n > Tensor::kInlineBytes &&
      reinterpret_cast<std::uintptr_t>(p) % dtype_alignment(dtype) == 0) {
    out = Tensor::numeric_view(dtype, std::move(shape), owner, p, n);
    return Status::OK();
  }
  // The copy overwrites every byte: no zero-fill first.
  out = TensorInternals::uninitialized(dtype, std::move(shape));
  if (n > 0)
    std::memcpy(out.mutable_data<unsigned char>(), p, n);
  return Status::OK();
}

// One length-prefixed string entry, viewed in r's buffer.
Status decode_string_entry(Reader& r, std::string_view& s) {
  uint64_t len;
  if (!r.read_varint(len))
    return r.bad_varint("string length");
  if (len > r.remaining())
    return r.error("string of " + std::to_string(len) + " bytes, only " +
                   std::to_string(r.remaining()) + " remain");
  s = r.take(static_cast<std::size_t>(len));
  return Status::OK();
}

Status decode_strings(Reader& r, Shape shape, uint64_t entries, const StorageOwner& owner,
                      Tensor& out) {
  // Every entry needs at least its one-byte length.
  if (entries > r.remaining())
    return r.error("string shape " + shape_text(shape) + " has " + std::to_string(entries) +
                   " entries, more than the " + std::to_string(r.remaining()) +
                   " bytes that remain");
  if (owner && entries == 1) { // the common scalar-bytes element: no vector, no views block
    std::string_view s;
    CONVEYOR_RETURN_IF_ERROR(decode_string_entry(r, s));
    TensorInternals::make_single_string_view(out, std::move(shape), owner, s);
    return Status::OK();
  }
  std::vector<std::string_view> views(static_cast<std::size_t>(entries));
  for (std::string_view& s : views)
    CONVEYOR_RETURN_IF_ERROR(decode_string_entry(r, s));
  if (owner) { // zero copy: the strings view the received buffer
    out = Tensor::string_view_of(std::move(shape), owner, std::move(views));
    return Status::OK();
  }
  out = Tensor{DType::string, std::move(shape)};
  auto& strings = out.mutable_strings();
  for (std::size_t i = 0; i < views.size(); ++i)
    strings[i].assign(views[i].data(), views[i].size());
  return Status::OK();
}

// Into `out`, a default Tensor the caller made in place (no Tensor moved per element).
Status decode_tensor(Reader& r, bool pads, const StorageOwner& owner, Tensor& out) {
  uint8_t code;
  if (!r.read_u8(code))
    return r.error("truncated before the dtype");
  const std::optional<DType> known = dtype_from_code(code);
  if (!known)
    return r.error("unknown dtype code " + std::to_string(code) + ", expected 0.." +
                   std::to_string(kNumDTypes - 1));
  const DType dtype = *known;
  Shape shape;
  uint64_t entries = 0;
  CONVEYOR_RETURN_IF_ERROR(decode_shape(r, shape, entries));
  if (dtype == DType::string)
    return decode_strings(r, std::move(shape), entries, owner, out);
  return decode_numeric(r, dtype, std::move(shape), entries, pads, owner, out);
}

// Decodes one element that must occupy all of r's buffer.
Status decode_whole_element(Reader& r, Element& out, bool pads, const StorageOwner& owner) {
  uint64_t count;
  if (!r.read_varint(count))
    return r.bad_varint("component count");
  // Every component takes at least a dtype byte and a rank byte.
  if (count > r.remaining() / 2)
    return r.error("component count " + std::to_string(count) + " cannot fit in the " +
                   std::to_string(r.remaining()) + " bytes that remain");
  // Straight into `out`, reusing its components' memory: on error the caller drops it.
  auto& parts = out.components;
  parts.clear();
  parts.reserve(static_cast<std::size_t>(count));
  for (uint64_t i = 0; i < count; ++i)
    if (Status st = decode_tensor(r, pads, owner, parts.emplace_back()); !st.ok())
      return st.with_context("component " + std::to_string(i) + " of " + std::to_string(count));
  if (r.remaining() != 0)
    return r.error(std::to_string(r.remaining()) + " trailing bytes after the element");
  return Status::OK();
}

Status batch_error(const std::string& what) { return data_loss("element batch: " + what); }

} // namespace

const char* to_string(Compression c) {
  switch (c) {
    case Compression::none: return "NONE";
    case Compression::lz4: return "LZ4";
    case Compression::automatic: return "AUTO";
  }
  return "?";
}

std::optional<Compression> compression_from_string(std::string_view name) {
  std::string upper;
  for (char ch : name)
    upper += (ch >= 'a' && ch <= 'z') ? static_cast<char>(ch - 'a' + 'A') : ch;
  if (upper == "NONE")
    return Compression::none;
  if (upper == "LZ4")
    return Compression::lz4;
  if (upper == "AUTO")
    return Compression::automatic;
  return std::nullopt;
}

void encode_element(const Element& element, std::string& out) {
  // Grows geometrically, so that appending many elements to one string stays linear.
  const std::size_t need = out.size() + encoded_size(element, false);
  if (need > out.capacity())
    out.reserve(std::max(need, 2 * out.capacity()));
  StrOut o{out};
  append_element(element, o, false);
}

Expected<Element> decode_element(std::string_view in) {
  Reader r{in, 0, "byte offset"};
  Element e;
  Status st = decode_whole_element(r, e, false, nullptr);
  if (!st.ok())
    return st.with_context("element codec");
  return e;
}

namespace {

// The elements of a batch as the encoders read them: owned by the list, or held elsewhere.
const Element& element_at(const std::vector<Element>& list, std::size_t i) { return list[i]; }
const Element& element_at(const std::vector<const Element*>& list, std::size_t i) {
  return *list[i];
}

// Each element's encoded size into `sizes`.
void element_sizes(const std::vector<Element>& elements, std::vector<std::size_t>& sizes) {
  sizes.resize(elements.size());
  for (std::size_t i = 0; i < elements.size(); ++i)
    sizes[i] = encoded_size(elements[i], true);
}

// An entry's prefix (format version 2) at body offset `at`: its varint and, for an element with
// aligned payloads, the pad that puts the element at a multiple of kPayloadAlign. Returns the
// prefix's size and writes it to `out` unless that is null.
template <class Out>
std::size_t entry_prefix(const Element& e, std::size_t size, std::size_t at, Out* out) {
  const bool pads = has_aligned_payload(e);
  const uint64_t v = 2 * uint64_t{size} + (pads ? 1 : 0);
  std::size_t n = varint_size(v);
  if (out)
    put_varint(*out, v);
  if (pads) {
    const std::size_t p = pad_after(at + n);
    if (out)
      put_pad(*out, p);
    n += 1 + p;
  }
  return n;
}

// The batch body's size: the entries with their prefixes.
template <class List>
std::size_t body_size(const List& elements, const std::vector<std::size_t>& sizes) {
  std::size_t raw_size = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    raw_size +=
      entry_prefix<StrOut>(element_at(elements, i), sizes[i], raw_size, nullptr) + sizes[i];
  return raw_size;
}

// The batch body: each element behind its prefix.
template <class List, class Out>
void append_entries(const List& elements, const std::vector<std::size_t>& sizes, Out& out) {
  std::size_t at = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    at += entry_prefix(element_at(elements, i), sizes[i], at, &out) + sizes[i];
    append_element(element_at(elements, i), out, true);
  }
}

// Encodes into `out` after its first `prefix` bytes (which stay as they are); `sizes` holds
// each element's encoded size.
template <class Buffer, class Out, class List>
void encode_batch_impl(const List& elements, const std::vector<std::size_t>& sizes,
                       Compression compression, Buffer& out, std::size_t prefix) {
  const std::size_t raw_size = body_size(elements, sizes);
  out.reserve(prefix + kHeaderSize + raw_size);
  out.resize(prefix + kHeaderSize);
  Out o{out};
  append_entries(elements, sizes, o);

  uint8_t flags = 0;
  bool try_lz4 = compression == Compression::lz4 ||
                 (compression == Compression::automatic && raw_size >= kAutoCompressMinBytes);
  // lz4 cannot take bodies above LZ4_MAX_INPUT_SIZE (~2 GiB); those stay uncompressed, which the
  // flags record, so the buffer still decodes to the same elements.
  const std::string_view body{out.data() + prefix + kHeaderSize, raw_size};
  if (try_lz4 && compression == Compression::automatic && raw_size > 2 * kAutoProbeBytes &&
      !probe_compresses(body.substr(0, kAutoProbeBytes)))
    try_lz4 = false;
  if (try_lz4) {
    std::string packed;
    if (lz4_compress(body, 0, packed)) {
      if (compression == Compression::lz4 || saves_enough(raw_size, packed.size())) {
        flags |= kFlagLz4;
        out.resize(prefix + kHeaderSize);
        Out{out}.append(packed.data(), packed.size());
      }
    }
  }
  write_header(out.data() + prefix, flags, sizes.size(), raw_size);
}

} // namespace

std::string encode_batch(const std::vector<Element>& elements, Compression compression) {
  std::vector<std::size_t> sizes;
  element_sizes(elements, sizes);
  std::string out;
  encode_batch_impl<std::string, StrOut>(elements, sizes, compression, out, 0);
  return out;
}

std::string encode_batch(const std::vector<const Element*>& elements,
                         const std::vector<std::size_t>& sizes, Compression compression) {
  std::string out;
  encode_batch_impl<std::string, StrOut>(elements, sizes, compression, out, 0);
  return out;
}

void encode_batch_into(const std::vector<Element>& elements, Compression compression,
                       std::vector<char>& out, std::size_t prefix) {
  std::vector<std::size_t> sizes;
  element_sizes(elements, sizes);
  encode_batch_impl<std::vector<char>, VecOut>(elements, sizes, compression, out, prefix);
}

void encode_batch_gather(const std::vector<Element>& elements, Compression compression,
                         GatherBuffer& out, std::size_t prefix) {
  std::vector<std::size_t> sizes;
  element_sizes(elements, sizes);
  const std::size_t raw_size = body_size(elements, sizes);
  const bool may_compress =
    compression == Compression::lz4 ||
    (compression == Compression::automatic && raw_size >= kAutoCompressMinBytes);
  // AUTO probes a sample as encode_batch_into does; a small body is simply tried whole.
  const bool probe =
    may_compress && compression == Compression::automatic && raw_size > 2 * kAutoProbeBytes;
  if (!may_compress || probe) {
    out.reset(prefix + kHeaderSize);
    GatherOut o{out};
    append_entries(elements, sizes, o);
    write_header(out.own.data() + prefix, 0, elements.size(), raw_size);
    if (!probe)
      return;
    // The sample: kAutoProbeBytes of the body's first piece that holds them (read in place: a
    // large tensor), else the body's first kAutoProbeBytes gathered (small pieces only).
    const std::size_t body = prefix + kHeaderSize;
    std::string_view sample;
    out.for_each_piece_from(body, [&](const char* p, std::size_t n) {
      if (sample.empty() && n >= kAutoProbeBytes)
        sample = std::string_view{p, kAutoProbeBytes};
    });
    std::string gathered;
    if (sample.empty()) {
      out.for_each_piece_from(body, [&](const char* p, std::size_t n) {
        gathered.append(p, std::min(n, kAutoProbeBytes - gathered.size()));
      });
      sample = gathered;
    }
    if (!probe_compresses(sample))
      return; // stays in pieces, uncompressed
  }
  // In one buffer: a recycled one (mapped already; the writer returns it to the pool).
  std::vector<char> one = BufferPool::global().acquire(prefix + kHeaderSize + raw_size);
  one.clear();
  one.resize(prefix);
  out.reset(0);
  out.own = std::move(one);
  encode_batch_into(elements, compression, out.own, prefix);
}

std::size_t encoded_batch_size(const std::vector<Element>& elements) {
  std::size_t n = kHeaderSize;
  for (const Element& e : elements)
    n += encoded_batch_entry_size(e);
  return n;
}

std::size_t encoded_element_size(const Element& element) { return encoded_size(element, true); }

std::size_t encoded_batch_entry_size(const Element& element, std::size_t element_size) {
  if (!has_aligned_payload(element))
    return varint_size(2 * uint64_t{element_size}) + element_size;
  // At most: the pad (its count byte and up to 7 zeros) depends on where the entry lands.
  return varint_size(2 * uint64_t{element_size} + 1) + kPayloadAlign + element_size;
}

std::size_t encoded_batch_entry_size(const Element& element) {
  return encoded_batch_entry_size(element, encoded_size(element, true));
}

std::size_t encoded_batch_header_size() { return kHeaderSize; }

Status decode_batch(std::string_view in, std::vector<Element>& out) {
  return decode_batch(nullptr, in, out);
}

Expected<BatchReader> BatchReader::open(std::string_view in, StorageOwner owner) {
  if (in.size() < kHeaderSizeV1)
    return batch_error("buffer of " + std::to_string(in.size()) + " bytes is shorter than the " +
                       std::to_string(kHeaderSizeV1) + "-byte header");
  if (std::memcmp(in.data(), kMagic, sizeof kMagic) != 0)
    return batch_error("bad magic, expected \"CVEB\" at the start of the buffer");
  const auto version = static_cast<uint8_t>(in[4]);
  if (version != 1 && version != kFormatVersion)
    return Status{ErrorCode::version_mismatch,
                  "element batch: format version " + std::to_string(version) +
                    ", this build reads versions 1 to " + std::to_string(kFormatVersion)};
  const std::size_t header_size = version == 1 ? kHeaderSizeV1 : kHeaderSize;
  if (in.size() < header_size)
    return batch_error("buffer of " + std::to_string(in.size()) + " bytes is shorter than the " +
                       std::to_string(header_size) + "-byte header of format version " +
                       std::to_string(version));
  if (version > 1 && (in[22] != 0 || in[23] != 0))
    return batch_error("non-zero reserved header bytes");
  const auto flags = static_cast<uint8_t>(in[5]);
  if ((flags & ~kFlagLz4) != 0)
    return batch_error("unknown flag bits " + std::to_string(flags & ~kFlagLz4) + " in the header");
  const uint64_t count = get_le(in.data() + 6, 8);
  const uint64_t raw_size = get_le(in.data() + 14, 8);
  std::string_view body = in.substr(header_size);

  if (flags & kFlagLz4) {
    if (body.size() > static_cast<std::size_t>(LZ4_MAX_INPUT_SIZE) ||
        raw_size > static_cast<uint64_t>(LZ4_MAX_INPUT_SIZE) ||
        raw_size > body.size() * kMaxLz4Ratio + 16)
      return batch_error("header claims " + std::to_string(raw_size) +
                         " raw bytes, more than lz4 can expand " + std::to_string(body.size()) +
                         " compressed bytes to");
    // The inflated body becomes the decoded tensors' storage (no copy out of it).
    std::shared_ptr<char[]> inflated{new char[raw_size]};
    const int n = LZ4_decompress_safe(body.data(), inflated.get(), static_cast<int>(body.size()),
                                      static_cast<int>(raw_size));
    owner = inflated;
    if (n < 0 || static_cast<uint64_t>(n) != raw_size)
      return batch_error("lz4 body of " + std::to_string(body.size()) +
                         " bytes does not decompress to the " + std::to_string(raw_size) +
                         " bytes the header claims");
    body =
      std::string_view{static_cast<const char*>(owner.get()), static_cast<std::size_t>(raw_size)};
  } else if (raw_size != body.size()) {
    return batch_error("header claims a body of " + std::to_string(raw_size) +
                       " bytes, the buffer holds " + std::to_string(body.size()));
  }
  // Every element takes at least its length byte and its component count byte.
  if (count > body.size() / 2)
    return batch_error("element count " + std::to_string(count) + " cannot fit in a body of " +
                       std::to_string(body.size()) + " bytes");
  BatchReader reader;
  reader.owner_ = std::move(owner);
  reader.body_ = body;
  reader.count_ = count;
  reader.pads_ = version > 1;
  return reader;
}

namespace {

// A varint of at most 4 bytes (values below 2^28) at p, within `end`; its size, 0 otherwise (a
// longer or truncated one: the general decoder then reads it, or names what is wrong).
inline std::size_t short_varint(const unsigned char* p, const unsigned char* end, uint64_t& v) {
  v = 0;
  for (std::size_t i = 0; i < 4 && p + i < end; ++i) {
    v |= uint64_t{p[i] & 0x7fu} << (7 * i);
    if ((p[i] & 0x80) == 0)
      return i + 1;
  }
  return 0;
}

// How many elements ahead advance() prefetches the header it guesses (the current entry's size
// as the stride): each element's header is found only from the one before it, so without a
// guess every header is a cache miss in turn (docs/BENCHMARKS.md, "The reader's thread").
constexpr std::size_t kPrefetchElements = 8;

} // namespace

// The common snapshot record, one scalar string viewed in the batch, decoded without the general
// decoder's layers: the same checks, and the same Element it would give. False (nothing read)
// for anything else or anything wrong, which the general decoder then reads or names.
bool BatchReader::next_single_string(Element& out) {
  const auto* base = reinterpret_cast<const unsigned char*>(body_.data());
  const unsigned char* end = base + body_.size();
  const unsigned char* p = base + offset_;
  uint64_t entry;
  const std::size_t entry_size = short_varint(p, end, entry);
  if (entry_size == 0 || (pads_ && (entry & 1) != 0)) // (a padded element has numeric payloads)
    return false;
  const uint64_t len = pads_ ? entry >> 1 : entry;
  p += entry_size;
  // count 1, the string dtype, rank 0, then the string's length and bytes: all of the element.
  if (len < 4 || len > static_cast<uint64_t>(end - p) || p[0] != 1 ||
      p[1] != static_cast<unsigned char>(DType::string) || p[2] != 0)
    return false;
  const unsigned char* element_end = p + len;
  uint64_t string_size;
  const std::size_t string_varint = short_varint(p + 3, element_end, string_size);
  if (string_varint == 0 || 3 + string_varint + string_size != len)
    return false;
  const std::size_t next_offset = static_cast<std::size_t>(element_end - base);
  if (index_ + 1 == count_ && next_offset != body_.size()) // trailing bytes: the error's
    return false;
  auto& parts = out.components;
  parts.clear();
  parts.reserve(1);
  TensorInternals::make_scalar_string_view(
    parts.emplace_back(), owner_,
    std::string_view{reinterpret_cast<const char*>(p + 3 + string_varint),
                     static_cast<std::size_t>(string_size)});
  offset_ = next_offset;
  ++index_;
  return true;
}

Status BatchReader::advance(Element* out) {
  if (done())
    return failed_precondition("element batch: all " + std::to_string(count_) +
                               " elements were read");
  const std::size_t at = offset_;
  if (out == nullptr || !owner_ || !next_single_string(*out))
    CONVEYOR_RETURN_IF_ERROR(decode_next(out));
  // The guessed header of an element further on, so that it is in cache when its turn comes.
  const std::size_t ahead = offset_ + kPrefetchElements * (offset_ - at);
  if (ahead < body_.size())
    __builtin_prefetch(body_.data() + ahead);
  return Status::OK();
}

Status BatchReader::decode_next(Element* out) {
  Reader r{body_.substr(offset_), offset_, "body byte offset"};
  // Built only on error: formatting it per element would cost more than decoding an int64.
  const auto where = [&] {
    return "element batch: element " + std::to_string(index_) + " of " + std::to_string(count_);
  };
  uint64_t len;
  if (!r.read_varint(len))
    return r.bad_varint("element length").with_context(where());
  if (pads_) { // varint(2 * length + a): a = 1, a pad before the element
    const bool padded = (len & 1) != 0;
    len >>= 1;
    if (padded)
      if (Status st = skip_pad(r, "the element"); !st.ok())
        return st.with_context(where());
  }
  if (len > r.remaining())
    return r
      .error("element of " + std::to_string(len) + " bytes, only " + std::to_string(r.remaining()) +
             " remain")
      .with_context(where());
  const std::size_t element_offset = r.offset();
  std::string_view bytes = r.take(static_cast<std::size_t>(len));
  if (out != nullptr) {
    Reader element_reader{bytes, element_offset, "body byte offset"};
    if (Status st = decode_whole_element(element_reader, *out, pads_, owner_); !st.ok())
      return st.with_context(where());
  }
  offset_ = r.offset();
  ++index_;
  if (done() && r.remaining() != 0)
    return r.error(std::to_string(r.remaining()) + " trailing bytes after the last element")
      .with_context("element batch");
  return Status::OK();
}

Status decode_batch(StorageOwner owner, std::string_view in, std::vector<Element>& out) {
  auto reader = BatchReader::open(in, std::move(owner));
  if (!reader.ok())
    return reader.status();
  // Decoded in place at the end of `out` (no second vector, no moves); on error `out` is cut
  // back to what it held.
  const std::size_t first = out.size();
  out.resize(first + static_cast<std::size_t>(reader->count()));
  for (std::size_t i = first; i < out.size(); ++i)
    if (Status st = reader->next(out[i]); !st.ok()) {
      out.resize(first);
      return st;
    }
  return Status::OK();
}

} // namespace conveyor
