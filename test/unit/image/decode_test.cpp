// decode_image: PNG and lossless WebP give back the encoded pixels exactly, JPEG what libjpeg
// decodes; channel conversions; corrupt and truncated images are errors naming the format.
#include <doctest/doctest.h>

#include "pipeline/functions/functions.hpp"
#include "pipeline/image/image_decode.hpp"
#include "test/unit/image/image_codecs.hpp"

namespace conveyor {
namespace {

using test::encode_cmyk_jpeg;
using test::encode_jpeg;
using test::encode_png;
using test::encode_webp_lossless;
using test::pixels_of;
using test::test_pixels;

Tensor decoded(const std::string& bytes, int channels) {
  auto t = image::decode_image(bytes, channels);
  REQUIRE_MESSAGE(t.ok(), t.status().to_string());
  return *t;
}

TEST_CASE("decode_image: PNG gives back its pixels for 1, 2, 3 and 4 channels") {
  for (int c : {1, 2, 3, 4}) {
    CAPTURE(c);
    const auto px = test_pixels(9, 13, c);
    const Tensor t = decoded(encode_png(px, 9, 13, c), 0);
    CHECK(t.dtype() == DType::uint8);
    CHECK(t.shape() == Shape{9, 13, c});
    CHECK(pixels_of(t) == px);
  }
}

TEST_CASE("decode_image: channels converts (gray to RGB replicates, RGBA to RGB drops alpha)") {
  const auto gray = test_pixels(4, 5, 1);
  const Tensor rgb = decoded(encode_png(gray, 4, 5, 1), 3);
  REQUIRE(rgb.shape() == Shape{4, 5, 3});
  for (std::size_t i = 0; i < gray.size(); ++i)
    for (int k = 0; k < 3; ++k)
      CHECK(rgb.data<uint8_t>()[i * 3 + k] == gray[i]);

  const auto rgba = test_pixels(4, 5, 4);
  const Tensor three = decoded(encode_png(rgba, 4, 5, 4), 3);
  REQUIRE(three.shape() == Shape{4, 5, 3});
  for (std::size_t i = 0; i < 20; ++i)
    for (int k = 0; k < 3; ++k)
      CHECK(three.data<uint8_t>()[i * 3 + k] == rgba[i * 4 + k]);

  const auto rgb_px = test_pixels(4, 5, 3);
  const Tensor four = decoded(encode_png(rgb_px, 4, 5, 3), 4);
  REQUIRE(four.shape() == Shape{4, 5, 4});
  CHECK(four.data<uint8_t>()[3] == 255); // opaque alpha added
  CHECK(decoded(encode_png(rgb_px, 4, 5, 3), 1).shape() == Shape{4, 5, 1});
}

TEST_CASE("decode_image: JPEG decodes to libjpeg's pixels, close to the encoded ones") {
  const auto px = test_pixels(32, 48, 3);
  const std::string jpeg = encode_jpeg(px, 32, 48, 3);
  const Tensor t = decoded(jpeg, 0);
  REQUIRE(t.shape() == Shape{32, 48, 3});
  // The same decoder, the same settings (accurate DCT, fancy upsampling): identical bytes.
  tjhandle tj = tjInitDecompress();
  std::vector<unsigned char> ref(px.size());
  REQUIRE(tjDecompress2(tj, reinterpret_cast<const unsigned char*>(jpeg.data()), jpeg.size(),
                        ref.data(), 48, 0, 32, TJPF_RGB, 0) == 0);
  tjDestroy(tj);
  CHECK(pixels_of(t) == ref);
  double err = 0;
  for (std::size_t i = 0; i < px.size(); ++i)
    err += std::abs(int{px[i]} - int{ref[i]});
  CHECK(err / px.size() < 12.0); // quality 95, 4:2:0 chroma, a strongly textured image

  const Tensor gray = decoded(encode_jpeg(test_pixels(8, 8, 1), 8, 8, 1), 0);
  CHECK(gray.shape() == Shape{8, 8, 1});
  CHECK(decoded(jpeg, 1).shape() == Shape{32, 48, 1});
  CHECK(decoded(jpeg, 4).shape() == Shape{32, 48, 4});
}

TEST_CASE("decode_image: a CMYK JPEG decodes to RGB as PIL converts it (Adobe-inverted ink)") {
  // Raw values are 255 - ink: (255, 0, 255, 255) is pure magenta ink, (128, 255, 255, 128) half
  // cyan ink over half black.
  std::vector<unsigned char> cmyk;
  for (int i = 0; i < 8 * 8; ++i)
    cmyk.insert(cmyk.end(), i < 32 ? std::initializer_list<unsigned char>{255, 0, 255, 255}
                                   : std::initializer_list<unsigned char>{128, 255, 255, 128});
  const std::string jpeg = encode_cmyk_jpeg(cmyk, 8, 8);
  const Tensor rgb = decoded(jpeg, 0);
  REQUIRE(rgb.shape() == Shape{8, 8, 3});
  const auto px = pixels_of(rgb);
  auto near = [](int got, int want) { return std::abs(got - want) <= 3; };
  CHECK(near(px[0], 255));
  CHECK(near(px[1], 0));
  CHECK(near(px[2], 255));
  const std::size_t last = px.size() - 3; // k * c / 255: 128 * 128 / 255 = 64
  CHECK(near(px[last], 64));
  CHECK(near(px[last + 1], 128));
  CHECK(near(px[last + 2], 128));
  const Tensor rgba = decoded(jpeg, 4);
  REQUIRE(rgba.shape() == Shape{8, 8, 4});
  CHECK(pixels_of(rgba)[3] == 255);
  const Tensor gray = decoded(jpeg, 1);
  REQUIRE(gray.shape() == Shape{8, 8, 1});
  CHECK(near(pixels_of(gray)[0], (255 * 19595 + 255 * 7471 + 0x8000) >> 16));
}

TEST_CASE("decode_image: lossless WebP gives back its pixels") {
  for (int c : {3, 4}) {
    CAPTURE(c);
    const auto px = test_pixels(7, 11, c);
    const Tensor t = decoded(encode_webp_lossless(px, 7, 11, c), 0);
    CHECK(t.shape() == Shape{7, 11, c});
    CHECK(pixels_of(t) == px);
  }
  CHECK(decoded(encode_webp_lossless(test_pixels(7, 11, 3), 7, 11, 3), 1).shape() ==
        Shape{7, 11, 1});
}

TEST_CASE("decode_image: truncated, corrupt and unknown bytes are errors naming the format") {
  const auto px = test_pixels(32, 32, 3);
  const std::string jpeg = encode_jpeg(px, 32, 32, 3);
  const std::string png = encode_png(px, 32, 32, 3);
  const std::string webp = encode_webp_lossless(px, 32, 32, 3);
  struct Case {
    std::string bytes;
    const char* format;
  } cases[] = {{jpeg.substr(0, jpeg.size() / 2), "JPEG"}, {jpeg.substr(0, 20), "JPEG"},
               {png.substr(0, png.size() / 2), "PNG"},    {png.substr(0, 30), "PNG"},
               {webp.substr(0, webp.size() / 2), "WebP"}, {webp.substr(0, 16), "WebP"}};
  for (const Case& c : cases) {
    CAPTURE(c.format);
    CAPTURE(c.bytes.size());
    auto t = image::decode_image(c.bytes, 3);
    REQUIRE_FALSE(t.ok());
    CHECK(t.status().message().find(std::string{"corrupt or truncated "} + c.format) !=
          std::string::npos);
  }
  std::string flipped = png;
  flipped[60] = static_cast<char>(flipped[60] ^ 0x5a); // inside the image data: bad CRC
  CHECK_FALSE(image::decode_image(flipped, 0).ok());

  auto unknown = image::decode_image("GIF89a....", 0);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message().find("not a JPEG, PNG or WebP image (10 bytes, starting 47 49 "
                                        "46 38 39 61 2e 2e)") != std::string::npos);
  auto bad_channels = image::decode_image(png, 2);
  REQUIRE_FALSE(bad_channels.ok());
  CHECK(bad_channels.status().message() == "decode_image: `channels` must be 0, 1, 3 or 4, got 2");
}

TEST_CASE("decode_image in a pipeline: the map error names the element, ignore_errors skips it") {
  const auto px = test_pixels(6, 6, 3);
  Tensor files{DType::string, {3}};
  files.mutable_strings() = {encode_png(px, 6, 6, 3), "not an image",
                             encode_png(test_pixels(6, 6, 3, 1), 6, 6, 3)};
  const Dataset ds = Dataset::from_tensor_slices(Element{files})
                       .map(FunctionRef{"decode_image", {{"channels", int64_t{3}}}});
  auto it = ds.make_iterator();
  REQUIRE(it.ok());
  Element e;
  bool end = false;
  REQUIRE((*it)->get_next(e, end).ok());
  const Status st = (*it)->get_next(e, end);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("map function `decode_image` on element 1") != std::string::npos);
  CHECK(st.message().find("not a JPEG, PNG or WebP image") != std::string::npos);

  auto skipping = ds.ignore_errors().make_iterator();
  REQUIRE(skipping.ok());
  int count = 0;
  for (int i = 0; i < 10; ++i) {
    REQUIRE((*skipping)->get_next(e, end).ok());
    if (end)
      break;
    CHECK(e[0].shape() == Shape{6, 6, 3});
    ++count;
  }
  CHECK(count == 2);
}

} // namespace
} // namespace conveyor
