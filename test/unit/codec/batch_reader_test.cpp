// BatchReader's fast path for the common snapshot record (one scalar string viewed in the batch,
// codec.cpp next_single_string): the same elements and the same errors as the general decoder,
// which a read without an owner (strings copied) always takes.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "pipeline/tensor/codec.hpp"

using namespace conveyor;

namespace {

// Reads `buf` element by element, viewing it (owner set: the fast path where it applies) or
// copying (no owner: the general decoder only). The elements read, and the first error's text.
struct Read {
  std::vector<Element> elements;
  std::string error;
};
Read read_all(const std::string& buf, bool view) {
  Read out;
  auto owner = std::make_shared<std::string>(buf);
  auto reader = view ? BatchReader::open(*owner, owner) : BatchReader::open(*owner);
  if (!reader.ok()) {
    out.error = reader.status().to_string();
    return out;
  }
  while (!reader->done()) {
    Element e;
    if (Status st = reader->next(e); !st.ok()) {
      out.error = st.to_string();
      return out;
    }
    out.elements.push_back(std::move(e));
  }
  return out;
}

std::vector<Element> scalar_strings(const std::vector<std::size_t>& sizes) {
  std::vector<Element> out;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    out.emplace_back(Tensor::scalar(std::string(sizes[i], static_cast<char>('a' + i % 26))));
  return out;
}

void put_varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7)
    out += static_cast<char>((v & 0x7f) | 0x80);
  out += static_cast<char>(v);
}

// A format version 1 batch (snapshot files written before version 2: a 22-byte header, the
// entry's varint the plain length) of scalar strings, by hand.
std::string version1_strings(const std::vector<std::string>& strings) {
  std::string body;
  for (const std::string& s : strings) {
    std::string element("\x01\x05\x00", 3); // 1 component | dtype string (5) | rank 0
    put_varint(element, s.size());
    element += s;
    put_varint(body, element.size());
    body += element;
  }
  std::string out("CVEB\x01\x00", 6);
  for (uint64_t v : {uint64_t{strings.size()}, uint64_t{body.size()}})
    for (int i = 0; i < 8; ++i)
      out += static_cast<char>((v >> (8 * i)) & 0xff);
  return out + body;
}

} // namespace

TEST_CASE("BatchReader: scalar strings of every length-prefix size view the batch") {
  // Lengths whose varints take 1, 2, 3 and 4 bytes, at their edges, and empty.
  const std::vector<std::size_t> sizes{0, 1, 127, 128, 1024, 16383, 16384, 2097151, 2097152};
  const std::string buf = encode_batch(scalar_strings(sizes), Compression::none);
  auto owner = std::make_shared<std::string>(buf);
  auto reader = BatchReader::open(*owner, owner);
  REQUIRE(reader.ok());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    CAPTURE(sizes[i]);
    Element e;
    REQUIRE(reader->next(e).ok());
    REQUIRE(e.size() == 1);
    CHECK(e[0].dtype() == DType::string);
    CHECK(e[0].shape().empty());
    const std::string_view s = e[0].string_at(0);
    CHECK(s == std::string(sizes[i], static_cast<char>('a' + i % 26)));
    if (!s.empty()) // a view of the batch, not a copy
      CHECK((s.data() >= owner->data() && s.data() + s.size() <= owner->data() + owner->size()));
    CHECK(e[0].storage_owner() != nullptr);
  }
  CHECK(reader->done());
  const Read copied = read_all(buf, false);
  REQUIRE(copied.error.empty());
  const Read viewed = read_all(buf, true);
  REQUIRE(viewed.error.empty());
  CHECK(viewed.elements == copied.elements);
}

TEST_CASE("BatchReader: a batch mixing scalar strings with other elements reads the same viewed") {
  std::vector<Element> elements = scalar_strings({3, 0, 200});
  elements.emplace_back(Tensor::vector<std::string>({"x"}));       // rank 1, one entry
  elements.emplace_back(Tensor::vector<std::string>({"a", "bc"})); // two entries
  elements.emplace_back(Tensor::scalar(int64_t{7}));
  elements.emplace_back(Tensor::vector<double>({1, 2, 3, 4, 5})); // an aligned payload
  elements.emplace_back(std::vector<Tensor>{Tensor::scalar("k"), Tensor::scalar("v")});
  elements.emplace_back(Tensor::scalar("last"));
  for (Compression c : {Compression::none, Compression::lz4}) {
    CAPTURE(to_string(c));
    const std::string buf = encode_batch(elements, c);
    const Read viewed = read_all(buf, true);
    REQUIRE_MESSAGE(viewed.error.empty(), viewed.error);
    CHECK(viewed.elements == elements);
  }
}

TEST_CASE("BatchReader: a format version 1 batch of scalar strings reads the same viewed") {
  const std::vector<std::string> strings{"", "a", std::string(200, 'b'), "cd"};
  const std::string buf = version1_strings(strings);
  const Read viewed = read_all(buf, true);
  REQUIRE_MESSAGE(viewed.error.empty(), viewed.error);
  REQUIRE(viewed.elements.size() == strings.size());
  for (std::size_t i = 0; i < strings.size(); ++i)
    CHECK(viewed.elements[i] == Element{Tensor::scalar(strings[i])});
}

TEST_CASE("BatchReader: any damaged byte of scalar strings fails or reads as without the fast "
          "path") {
  // Every byte of a small batch (header, entries, lengths, payloads; format versions 2 and 1)
  // set to values that make each field wrong in another way; the viewed read (fast path) must
  // agree with the copied read (general decoder) on the elements and on the error's text.
  const std::vector<std::size_t> sizes{2, 0, 130, 5};
  std::vector<std::string> strings;
  for (const Element& e : scalar_strings(sizes))
    strings.emplace_back(e[0].string_at(0));
  const unsigned char values[] = {0x00, 0x01, 0x02, 0x03, 0x07, 0x08, 0x0b, 0x7f, 0x80, 0x81, 0xff};
  int compared = 0;
  for (const std::string& good :
       {encode_batch(scalar_strings(sizes), Compression::none), version1_strings(strings)}) {
    for (std::size_t at = 0; at < good.size(); ++at)
      for (unsigned char v : values) {
        std::string bad = good;
        bad[at] = static_cast<char>(v);
        CAPTURE(at);
        CAPTURE(static_cast<int>(v));
        const Read copied = read_all(bad, false);
        const Read viewed = read_all(bad, true);
        CHECK(viewed.error == copied.error);
        CHECK(viewed.elements == copied.elements);
        ++compared;
      }
    // Cut short, and with bytes after the last element.
    for (std::size_t keep = 0; keep <= good.size(); ++keep) {
      const std::string cut = good.substr(0, keep);
      CHECK(read_all(cut, true).error == read_all(cut, false).error);
    }
    const std::string trailing = good + std::string(1, '\0');
    CHECK(read_all(trailing, true).error == read_all(trailing, false).error);
  }
  CHECK(compared > 200);
}
