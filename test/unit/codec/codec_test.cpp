// Element codec round trips (every dtype and rank, empty tensors, strings with NULs, many
// elements per batch, lz4 off/on/auto), the exact wire bytes, and specific malformed inputs.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "test/unit/codec/codec_support.hpp"
#include "test/support/random_bytes.hpp"

using namespace conveyor;
using conveyor::test::all_dtypes;
using conveyor::test::sample_shapes;
using conveyor::test::sample_tensor;
using conveyor::testing::random_bytes;

namespace {

const Compression kAllCompressions[] = {Compression::none, Compression::lz4,
                                        Compression::automatic};

constexpr std::size_t kHeaderSize = 24; // format version 2 (22 in version 1)
uint8_t flags_of(const std::string& batch) { return static_cast<uint8_t>(batch.at(5)); }

Element round_trip_element(const Element& e) {
  std::string buf;
  encode_element(e, buf);
  auto decoded = decode_element(buf);
  REQUIRE_MESSAGE(decoded.ok(), decoded.status().to_string());
  return *decoded;
}

std::vector<Element> round_trip_batch(const std::vector<Element>& elements, Compression c) {
  std::vector<Element> out;
  const std::string buf = encode_batch(elements, c);
  Status st = decode_batch(buf, out);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  return out;
}

std::vector<Element> int64_scalars(int64_t n) {
  std::vector<Element> v;
  for (int64_t i = 0; i < n; ++i)
    v.emplace_back(Tensor::scalar(i));
  return v;
}

Status decode_batch_status(const std::string& buf) {
  std::vector<Element> out;
  return decode_batch(buf, out);
}

std::string le64(uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i)
    s += static_cast<char>(v >> (8 * i));
  return s;
}

std::string header(uint8_t version, uint8_t flags, uint64_t count, uint64_t raw_size) {
  return std::string("CVEB") + static_cast<char>(version) + static_cast<char>(flags) + le64(count) +
         le64(raw_size) + (version >= 2 ? std::string(2, '\0') : std::string());
}

} // namespace

TEST_CASE("every dtype and rank round-trips through encode_element / decode_element") {
  for (DType dtype : all_dtypes())
    for (const Shape& shape : sample_shapes()) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(shape.size());
      const Element e{sample_tensor(dtype, shape)};
      const Element back = round_trip_element(e);
      CHECK(back == e);
      CHECK(back[0].shape() == shape);
      CHECK(back[0].dtype() == dtype);
    }
}

TEST_CASE("every dtype and rank round-trips through a batch with every compression") {
  std::vector<Element> elements;
  for (DType dtype : all_dtypes())
    for (const Shape& shape : sample_shapes())
      elements.emplace_back(sample_tensor(dtype, shape));
  for (Compression c : kAllCompressions) {
    CAPTURE(to_string(c));
    CHECK(round_trip_batch(elements, c) == elements);
  }
}

TEST_CASE("strings with NULs, empty strings and long strings survive") {
  const std::vector<std::string> values{std::string("\0\0\0", 3), "", std::string("a\0b\0", 4),
                                        std::string(300, '\0'), std::string(100000, 'q')};
  const Element e{Tensor::vector(values)};
  CHECK(round_trip_element(e)[0].strings() == values);
  for (Compression c : kAllCompressions)
    CHECK(round_trip_batch({e, e}, c) == std::vector<Element>{e, e});
}

TEST_CASE("multi-component and zero-component elements") {
  const Element tuple{{Tensor::scalar(int64_t{3}), Tensor::scalar("x"),
                       sample_tensor(DType::float32, {2, 2}), Tensor::scalar(true)}};
  CHECK(round_trip_element(tuple) == tuple);
  const Element none;
  CHECK(round_trip_element(none).size() == 0);
  CHECK(round_trip_batch({none, tuple, none}, Compression::lz4) ==
        std::vector<Element>{none, tuple, none});
}

TEST_CASE("an empty batch round-trips and is just the header") {
  for (Compression c : {Compression::none, Compression::automatic}) {
    const std::string buf = encode_batch({}, c);
    CHECK(buf == header(2, 0, 0, 0));
  }
  CHECK(round_trip_batch({}, Compression::lz4).empty());
}

TEST_CASE("the wire bytes of an int64 scalar element and of a batch") {
  std::string buf;
  encode_element(Element{Tensor::scalar(int64_t{5})}, buf);
  // 1 component | dtype int64 (2) | rank 0 | 8 payload bytes, little-endian
  CHECK(buf == std::string("\x01\x02\x00\x05\x00\x00\x00\x00\x00\x00\x00", 11));

  buf.clear();
  encode_element(Element{*Tensor::from_values<std::string>({2}, {"hi", ""})}, buf);
  // 1 component | dtype string (5) | rank 1 | dim 2 | len 2 "hi" | len 0
  CHECK(buf == std::string("\x01\x05\x01\x02\x02hi\x00", 8));

  // Dims are varints: 300 = 0xac 0x02.
  buf.clear();
  encode_element(Element{Tensor{DType::boolean, {300, 0}}}, buf);
  CHECK(buf == std::string("\x01\x00\x02\xac\x02\x00", 6));

  // In a batch the entry's varint is 2 * length (+ 1 where a pad follows: none for an 8-byte
  // payload, which Tensor keeps inline).
  const std::string batch = encode_batch({Element{Tensor::scalar(int64_t{5})}}, Compression::none);
  CHECK(batch ==
        header(2, 0, 1, 12) + std::string("\x16\x01\x02\x00\x05\x00\x00\x00\x00\x00\x00\x00", 12));
  // A version 1 batch (snapshot files written before) still decodes.
  std::vector<Element> out;
  REQUIRE(decode_batch(header(1, 0, 1, 12) +
                         std::string("\x0b\x01\x02\x00\x05\x00\x00\x00\x00\x00\x00\x00", 12),
                       out)
            .ok());
  CHECK(out == std::vector<Element>{Element{Tensor::scalar(int64_t{5})}});
}

namespace {
// [3] int64 {1, 2, 3} as one batch entry of format version 2: varint 2 * 32 + 1, a 6-byte pad
// that puts the element at body offset 8, then count | dtype | rank | dim | a 3-byte pad that
// puts the payload at element offset 8 | 24 payload bytes.
std::string padded_entry() {
  std::string e("\x41\x06\0\0\0\0\0\0", 8);
  e += std::string("\x01\x02\x01\x03\x03\0\0\0", 8);
  for (int64_t v : {1, 2, 3})
    e += le64(static_cast<uint64_t>(v));
  return e;
}
} // namespace

TEST_CASE("format version 2: the wire bytes of an aligned payload, and malformed pads") {
  const Element three{Tensor::vector<int64_t>({1, 2, 3})};
  CHECK(encode_batch({three}, Compression::none) == header(2, 0, 1, 40) + padded_entry());
  // Alone (encode_element: cache files, iterator state) an element has no pads.
  std::string alone;
  encode_element(three, alone);
  CHECK(alone.size() == 4 + 24);

  struct Case {
    std::string name;
    std::size_t at; // body byte to change
    char value;
    std::string message;
  };
  const std::vector<Case> cases{
    {"entry pad too long", 1, 8,
     "element batch: element 0 of 1: pad of 8 bytes before the element, expected fewer than 8 "
     "within the 38 bytes that remain (at body byte offset 2)"},
    {"entry pad not zero", 3, 1,
     "element batch: element 0 of 1: non-zero pad byte before the element (at body byte offset 8)"},
    {"payload pad too long", 12, 9,
     "element batch: element 0 of 1: component 0 of 1: pad of 9 bytes before a payload, expected "
     "fewer than 8 within the 27 bytes that remain (at body byte offset 13)"},
    {"payload pad not zero", 15, 7,
     "element batch: element 0 of 1: component 0 of 1: non-zero pad byte before a payload (at "
     "body byte offset 16)"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    std::string bad = header(2, 0, 1, 40) + padded_entry();
    bad[kHeaderSize + c.at] = c.value;
    Status st = decode_batch_status(bad);
    CHECK(st.code() == ErrorCode::data_loss);
    CHECK(st.message() == c.message);
  }
  std::string reserved = header(2, 0, 1, 40) + padded_entry();
  reserved[23] = 1;
  CHECK(decode_batch_status(reserved).message() == "element batch: non-zero reserved header bytes");
  CHECK(decode_batch_status(header(2, 0, 0, 0).substr(0, 23)).message() ==
        "element batch: buffer of 23 bytes is shorter than the 24-byte header of format version 2");
}

TEST_CASE("format version 2: every numeric payload is viewed in the received buffer, 8-aligned") {
  std::vector<Element> in;
  in.push_back(Element{Tensor::vector<int64_t>(std::vector<int64_t>(1024, 7))});
  in.push_back(Element{std::vector<Tensor>{
    Tensor::scalar("abc"), Tensor::vector<float>(std::vector<float>(37, 0.5f)),
    sample_tensor(DType::complex128, {5}), sample_tensor(DType::bfloat16, {3, 7}),
    Tensor::vector<int8_t>(std::vector<int8_t>(101, 1)), Tensor::scalar(int64_t{9})}});
  in.push_back(Element{Tensor::vector<std::string>({std::string(33, 'x'), "y"})});
  in.push_back(Element{sample_tensor(DType::float64, {3, 3})});
  for (Compression c : kAllCompressions) {
    CAPTURE(to_string(c));
    auto buffer = std::make_shared<const std::string>(encode_batch(in, c));
    REQUIRE(reinterpret_cast<std::uintptr_t>(buffer->data()) % 8 == 0);
    std::vector<Element> out;
    REQUIRE(decode_batch(buffer, *buffer, out).ok());
    REQUIRE(out == in);
    std::size_t viewed = 0;
    for (const Element& e : out)
      for (const Tensor& t : e.components) {
        if (t.dtype() == DType::string || t.bytes().size() <= Tensor::kInlineBytes)
          continue;
        CAPTURE(dtype_name(t.dtype()));
        CHECK(reinterpret_cast<std::uintptr_t>(t.bytes().data()) % 8 == 0);
        if (flags_of(*buffer) == 0) {
          const auto* p = reinterpret_cast<const char*>(t.bytes().data());
          CHECK(p >= buffer->data());
          CHECK(p < buffer->data() + buffer->size());
        }
        ++viewed;
      }
    CHECK(viewed == 6);
    // After a 40-byte frame header (8-aligned) the same holds.
    std::vector<char> frame(40, 'h');
    encode_batch_into(in, c, frame, 40);
    auto owner = std::make_shared<std::vector<char>>(std::move(frame));
    out.clear();
    REQUIRE(
      decode_batch(owner, std::string_view{owner->data() + 40, owner->size() - 40}, out).ok());
    REQUIRE(out == in);
    for (const Element& e : out)
      for (const Tensor& t : e.components)
        if (t.dtype() != DType::string && t.bytes().size() > Tensor::kInlineBytes)
          CHECK(reinterpret_cast<std::uintptr_t>(t.bytes().data()) % 8 == 0);
  }
}

TEST_CASE("many int64 elements per batch, with every compression") {
  const auto elements = int64_scalars(10000);
  for (Compression c : kAllCompressions) {
    CAPTURE(to_string(c));
    const auto back = round_trip_batch(elements, c);
    REQUIRE(back.size() == elements.size());
    CHECK(back == elements);
  }
  // 12 bytes per element uncompressed; counting integers compress well.
  const std::string raw = encode_batch(elements, Compression::none);
  CHECK(raw.size() == kHeaderSize + 12 * elements.size());
  CHECK(flags_of(raw) == 0);
  const std::string lz4 = encode_batch(elements, Compression::lz4);
  CHECK(flags_of(lz4) == 1);
  CHECK(lz4.size() < raw.size() / 2);
  CHECK(flags_of(encode_batch(elements, Compression::automatic)) == 1);
}

TEST_CASE("automatic compresses only large batches that lz4 shrinks") {
  // Small: stays raw even though it would compress.
  const auto small = int64_scalars(10);
  CHECK(flags_of(encode_batch(small, Compression::automatic)) == 0);
  CHECK(flags_of(encode_batch(small, Compression::lz4)) == 1);

  // Large but incompressible random bytes: stays raw under automatic, forced under lz4.
  std::mt19937_64 rng{42};
  std::vector<int64_t> noise(64 * 1024);
  for (auto& v : noise)
    v = static_cast<int64_t>(rng());
  const std::vector<Element> random{Element{Tensor::vector(noise)}};
  const std::string automatic = encode_batch(random, Compression::automatic);
  CHECK(flags_of(automatic) == 0);
  CHECK(automatic == encode_batch(random, Compression::none));
  const std::string forced = encode_batch(random, Compression::lz4);
  CHECK(flags_of(forced) == 1);
  CHECK(round_trip_batch(random, Compression::lz4) == random);

  // Mid-sized (compressed whole, without the 64 KiB probe) and incompressible: stays raw.
  const std::vector<Element> mid{
    Element{Tensor::vector(std::vector<int64_t>(noise.begin(), noise.begin() + 1024))}};
  CHECK(flags_of(encode_batch(mid, Compression::automatic)) == 0);

  // Large and compressible: compressed.
  const std::vector<Element> zeros{Element{Tensor{DType::float32, {1024, 1024}}}};
  const std::string packed = encode_batch(zeros, Compression::automatic);
  CHECK(flags_of(packed) == 1);
  CHECK(packed.size() < 4 * 1024 * 1024 / 200); // lz4 gets close to its ~255x limit on zeros
  CHECK(round_trip_batch(zeros, Compression::automatic) == zeros);
}

TEST_CASE("decode_batch appends, and leaves the output unchanged on error") {
  std::vector<Element> out{Element{Tensor::scalar("keep")}};
  REQUIRE(decode_batch(encode_batch(int64_scalars(3), Compression::none), out).ok());
  REQUIRE(out.size() == 4);
  CHECK(out[3] == Element{Tensor::scalar(int64_t{2})});

  std::string bad = encode_batch(int64_scalars(3), Compression::none);
  bad.back() = '\x7f';           // still decodes: payload bytes are not checked
  bad[kHeaderSize + 12 + 2] = 9; // second element's dtype: unknown
  const auto before = out;
  Status st = decode_batch(bad, out);
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK(out == before);
}

TEST_CASE("BatchReader: one element at a time into the same Element, skipping, then the end") {
  for (Compression c : kAllCompressions) {
    CAPTURE(to_string(c));
    const std::string buf = encode_batch(int64_scalars(5), c);
    auto reader = BatchReader::open(buf);
    REQUIRE(reader.ok());
    CHECK(reader->count() == 5);
    Element e;
    REQUIRE(reader->next(e).ok());
    CHECK(e[0].as_int64() == 0);
    const Tensor* storage = e.components.data();
    REQUIRE(reader->skip().ok());
    REQUIRE(reader->next(e).ok());
    CHECK(e[0].as_int64() == 2);
    CHECK(e.components.data() == storage); // the same memory, decoded into again
    CHECK(reader->read() == 3);
    REQUIRE(reader->next(e).ok());
    REQUIRE(reader->next(e).ok());
    CHECK(e[0].as_int64() == 4);
    CHECK(reader->done());
    CHECK(reader->next(e).code() == ErrorCode::failed_precondition);
  }
}

TEST_CASE("BatchReader: the elements before a corrupt one decode, the error names it") {
  std::string bad = encode_batch(int64_scalars(3), Compression::none);
  bad[kHeaderSize + 12 + 2] = 9; // second element's dtype: unknown
  auto reader = BatchReader::open(bad);
  REQUIRE(reader.ok());
  Element e;
  REQUIRE(reader->next(e).ok());
  CHECK(e[0].as_int64() == 0);
  Status st = reader->next(e);
  CHECK(st.code() == ErrorCode::data_loss);
  CHECK(st.message().find("element batch: element 1 of 3") != std::string::npos);
  // Header errors come from open, as decode_batch's do.
  CHECK(BatchReader::open(bad.substr(0, 10)).status().code() == ErrorCode::data_loss);
}

TEST_CASE("compression names") {
  CHECK(std::string{to_string(Compression::none)} == "NONE");
  CHECK(std::string{to_string(Compression::lz4)} == "LZ4");
  CHECK(std::string{to_string(Compression::automatic)} == "AUTO");
  CHECK(compression_from_string("AUTO") == Compression::automatic);
  CHECK(compression_from_string("auto") == Compression::automatic);
  CHECK(compression_from_string("NONE") == Compression::none);
  CHECK(compression_from_string("LZ4") == Compression::lz4);
  CHECK_FALSE(compression_from_string("SNAPPY").has_value());
  CHECK_FALSE(compression_from_string("").has_value());
}

TEST_CASE("malformed batches give data_loss with a message that says what is wrong") {
  const std::string good = encode_batch(int64_scalars(2), Compression::none);
  struct Case {
    std::string name;
    std::string bytes;
    std::string message;
  };
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  std::string bad_flags = good;
  bad_flags[5] = 6;
  const std::vector<Case> cases{
    {"empty", "", "element batch: buffer of 0 bytes is shorter than the 22-byte header"},
    {"short header", good.substr(0, 21),
     "element batch: buffer of 21 bytes is shorter than the 22-byte header"},
    {"bad magic", bad_magic,
     "element batch: bad magic, expected \"CVEB\" at the start of the buffer"},
    {"unknown flags", bad_flags, "element batch: unknown flag bits 6 in the header"},
    {"truncated body", good.substr(0, good.size() - 1),
     "element batch: header claims a body of 24 bytes, the buffer holds 23"},
    {"count too large", header(1, 0, 1000, 4) + "abcd",
     "element batch: element count 1000 cannot fit in a body of 4 bytes"},
    {"element length past the end", header(1, 0, 1, 2) + std::string("\x05\x00", 2),
     "element batch: element 0 of 1: element of 5 bytes, only 1 remain (at body byte offset 1)"},
    {"trailing bytes", header(1, 0, 1, 4) + std::string("\x01\x00\x00\x00", 4),
     "element batch: 2 trailing bytes after the last element (at body byte offset 2)"},
    {"lz4 expansion lie", header(1, 1, 1, 1000000) + "abcd",
     "element batch: header claims 1000000 raw bytes, more than lz4 can expand 4 compressed bytes "
     "to"},
    {"lz4 garbage", header(1, 1, 1, 100) + "abcd",
     "element batch: lz4 body of 4 bytes does not decompress to the 100 bytes the header claims"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    Status st = decode_batch_status(c.bytes);
    CHECK(st.code() == ErrorCode::data_loss);
    CHECK(st.message() == c.message);
  }

  std::string future = good;
  future[4] = 3;
  Status st = decode_batch_status(future);
  CHECK(st.code() == ErrorCode::version_mismatch);
  CHECK(st.message() == "element batch: format version 3, this build reads versions 1 to 2");
}

TEST_CASE("malformed elements give data_loss and never allocate from a lying shape") {
  struct Case {
    std::string name;
    std::string bytes;
    std::string message;
  };
  const std::vector<Case> cases{
    {"empty", "",
     "element codec: truncated or overlong varint for the component count (at byte offset 0)"},
    {"too many components", "\x05\x01",
     "element codec: component count 5 cannot fit in the 1 bytes that remain (at byte offset 1)"},
    {"unknown dtype", std::string("\x01\x10\x00", 3),
     "element codec: component 0 of 1: unknown dtype code 16, expected 0..15 (at byte offset 2)"},
    {"rank too large", "\x01\x02\xff\x01",
     "element codec: component 0 of 1: rank 255 exceeds the maximum rank 254 (at byte offset 4)"},
    // A 20-byte buffer that claims a [2^40] int64 tensor: refused before any allocation.
    {"huge vector", std::string("\x01\x02\x01\x80\x80\x80\x80\x80\x20", 9) + std::string(11, '\0'),
     "element codec: component 0 of 1: shape [1099511627776] of int64 needs 1099511627776 x 8 "
     "payload bytes, "
     "only 11 remain (at byte offset 9)"},
    {"shape overflow",
     std::string("\x01\x02\x03\x80\x80\x80\x80\x80\x20\x80\x80\x80\x80\x80\x20\x00", 16),
     "element codec: component 0 of 1: dimension 1 (1099511627776) makes the shape exceed "
     "1099511627776 entries "
     "(at byte offset 15)"},
    {"overlong varint", std::string("\x01\x02\x01") + std::string(11, '\xff'),
     "element codec: component 0 of 1: truncated or overlong varint for the dimension (at byte "
     "offset 13)"},
    {"payload short", std::string("\x01\x01\x01\x02\x00\x00\x00\x00\x00", 9),
     "element codec: component 0 of 1: shape [2] of int32 needs 2 x 4 payload bytes, only 5 remain "
     "(at byte offset 4)"},
    {"bad bool", std::string("\x01\x00\x01\x02\x01\x02", 6),
     "element codec: component 0 of 1: bool entry 1 has byte value 2, expected 0 or 1 (at byte "
     "offset 4)"},
    {"string too long",
     std::string("\x01\x05\x00\x09"
                 "abc",
                 7),
     "element codec: component 0 of 1: string of 9 bytes, only 3 remain (at byte offset 4)"},
    {"many strings", std::string("\x01\x05\x01\x80\x80\x04", 6) + std::string(14, '\0'),
     "element codec: component 0 of 1: string shape [65536] has 65536 entries, more than the 14 "
     "bytes that "
     "remain (at byte offset 6)"},
    {"trailing", std::string("\x00\x00", 2),
     "element codec: 1 trailing bytes after the element (at byte offset 1)"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto decoded = decode_element(c.bytes);
    REQUIRE_FALSE(decoded.ok());
    CHECK(decoded.status().code() == ErrorCode::data_loss);
    CHECK(decoded.status().message() == c.message);
  }
}

TEST_CASE("an empty tensor may have huge non-zero dims without allocating") {
  // Shape [0, 2^39]: no entries, so no payload; it decodes to exactly that shape.
  const std::string bytes("\x01\x03\x02\x00\x80\x80\x80\x80\x80\x10", 10);
  auto decoded = decode_element(bytes);
  REQUIRE_MESSAGE(decoded.ok(), decoded.status().to_string());
  CHECK((*decoded)[0].shape() == Shape{0, int64_t{1} << 39});
  CHECK((*decoded)[0].num_elements() == 0);
}

TEST_CASE("zero-copy decode: tensors view the received buffer, which they keep alive") {
  std::vector<Element> in;
  in.push_back(
    Element{std::vector<Tensor>{Tensor::vector<std::string>({std::string(1000, 'a'), "b"}),
                                Tensor::vector<int64_t>(std::vector<int64_t>(64, 3))}});
  std::vector<char> frame(8, 'h'); // a header the caller keeps
  encode_batch_into(in, Compression::none, frame, 8);
  CHECK(std::string(frame.data(), 8) == "hhhhhhhh");
  auto owner = std::make_shared<std::vector<char>>(std::move(frame));
  std::weak_ptr<std::vector<char>> watch = owner;
  std::string_view view{owner->data() + 8, owner->size() - 8};
  CHECK(view == encode_batch(in, Compression::none)); // the same buffer as encode_batch
  std::vector<Element> out;
  REQUIRE(decode_batch(owner, view, out).ok());
  owner.reset();
  REQUIRE(out.size() == 1);
  CHECK(out[0] == in[0]);
  const char* s = out[0][0].string_at(0).data();
  CHECK(s >= view.data());
  CHECK(s < view.data() + view.size()); // the string is IN the received buffer
  CHECK_FALSE(watch.expired());
  out.clear();
  CHECK(watch.expired());
}

namespace {
std::string gathered(const GatherBuffer& g, std::size_t prefix) {
  const std::vector<char> whole = g.flatten();
  return std::string(whole.begin() + static_cast<std::ptrdiff_t>(prefix), whole.end());
}
} // namespace

TEST_CASE(
  "gather encoding: the same bytes as one buffer, large payloads as views of their storage") {
  // Large and small numeric tensors and strings, several components, several elements.
  std::vector<Element> in;
  in.push_back(Element{std::vector<Tensor>{
    Tensor::vector<int64_t>(std::vector<int64_t>(2048, 7)), Tensor::scalar(int64_t{3}),
    Tensor::vector<std::string>({random_bytes(9000, 1), "x"})}});
  in.push_back(Element{Tensor::vector<float>(std::vector<float>(10, 0.5f))});
  in.push_back(Element{Tensor::scalar(random_bytes(5000, 2))});
  GatherBuffer g;
  encode_batch_gather(in, Compression::none, g, 40);
  CHECK(g.own.size() >= 40);
  CHECK(gathered(g, 40) == encode_batch(in, Compression::none));
  // The 16 KiB int64 payload and the 9000- and 5000-byte strings are views: no copy.
  REQUIRE(g.views.size() == 3);
  CHECK(g.views[0].data == reinterpret_cast<const char*>(in[0][0].bytes().data()));
  CHECK(g.views[1].data == in[0][2].string_at(0).data());
  CHECK(g.views[2].data == in[2][0].string_at(0).data());
  CHECK(g.own.size() < 40 + 200);
  // The views keep the storage alive (and unchanged: a write copies first).
  const std::string expected = gathered(g, 40);
  in[0][0].mutable_data<int64_t>()[0] = 99; // copy on write: the frame still sees 7
  in.clear();
  CHECK(gathered(g, 40) == expected);
}

TEST_CASE("gather encoding: compression keeps one buffer, AUTO keeps views when the probe fails") {
  const std::vector<Element> random{Element{Tensor::scalar(random_bytes(300000, 3))}};
  const std::vector<Element> zeros{
    Element{Tensor::vector<int64_t>(std::vector<int64_t>(40000, 0))}};
  // No piece holds the probe's 64 KiB: AUTO gathers its sample from 5000-byte views.
  std::vector<Tensor> small_random, small_zeros;
  for (unsigned i = 0; i < 40; ++i) {
    small_random.push_back(Tensor::scalar(random_bytes(5000, 10 + i)));
    small_zeros.push_back(Tensor::scalar(std::string(5000, '\0')));
  }
  const std::vector<Element> many_random{Element{small_random}};
  const std::vector<Element> many_zeros{Element{small_zeros}};
  for (Compression c : kAllCompressions) {
    CAPTURE(to_string(c));
    for (const auto* in : {&random, &zeros, &many_random, &many_zeros}) {
      GatherBuffer g;
      encode_batch_gather(*in, c, g, 8);
      std::vector<Element> out;
      const std::string bytes = gathered(g, 8);
      REQUIRE(decode_batch(bytes, out).ok());
      CHECK(out == *in);
      const bool compressible = in == &zeros || in == &many_zeros;
      if (c == Compression::none || (c == Compression::automatic && !compressible)) {
        CHECK(g.views.size() ==
              (*in)[0].size()); // incompressible or not asked: views, uncompressed
        CHECK(flags_of(bytes) == 0);
      } else {
        CHECK(g.views.empty()); // compressed (or tried whole) in one buffer
        CHECK(bytes == encode_batch(*in, c));
      }
    }
  }
}

TEST_CASE("encoded sizes: a batch's size is its header plus its entries") {
  std::vector<Element> in{Element{Tensor::scalar(int64_t{1})}, Element{Tensor::scalar("abc")}};
  std::size_t sum = encoded_batch_header_size();
  for (const auto& e : in)
    sum += encoded_batch_entry_size(e);
  CHECK(sum == encoded_batch_size(in));
  CHECK(sum == encode_batch(in, Compression::none).size());
}
