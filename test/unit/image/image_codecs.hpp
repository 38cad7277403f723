// Test images: synthetic pixels encoded with the libraries the decoder uses.
#pragma once

#include <png.h>
#include <turbojpeg.h>
#include <webp/encode.h>

#include <cstdint>
#include <string>
#include <vector>

#include "conveyor/element.hpp"

namespace conveyor::test {

// A smooth gradient with some texture, so resampling and JPEG have something to do.
inline std::vector<unsigned char> test_pixels(int h, int w, int c, int seed = 0) {
  std::vector<unsigned char> px(static_cast<std::size_t>(h) * w * c);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k)
        px[(static_cast<std::size_t>(y) * w + x) * c + k] =
          static_cast<unsigned char>((x * 7 + y * 3 + k * 50 + seed * 31 + (x * y) % 13) % 256);
  return px;
}

inline std::string encode_png(const std::vector<unsigned char>& px, int h, int w, int c) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(w);
  image.height = static_cast<png_uint_32>(h);
  image.format = c == 1   ? PNG_FORMAT_GRAY
                 : c == 2 ? PNG_FORMAT_GA
                 : c == 3 ? PNG_FORMAT_RGB
                          : PNG_FORMAT_RGBA;
  png_alloc_size_t size = 0;
  png_image_write_to_memory(&image, nullptr, &size, 0, px.data(), 0, nullptr);
  std::string out(size, '\0');
  png_image_write_to_memory(&image, out.data(), &size, 0, px.data(), 0, nullptr);
  out.resize(size);
  return out;
}

inline std::string encode_jpeg(const std::vector<unsigned char>& px, int h, int w, int c,
                               int quality = 95) {
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  tjCompress2(tj, px.data(), w, 0, h, c == 1 ? TJPF_GRAY : TJPF_RGB, &buf, &size,
              c == 1 ? TJSAMP_GRAY : TJSAMP_420, quality, 0);
  std::string out(reinterpret_cast<char*>(buf), size);
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

// A CMYK JPEG as libjpeg writes one from raw (Adobe-inverted) CMYK pixels: YCCK, 4:4:4.
inline std::string encode_cmyk_jpeg(const std::vector<unsigned char>& cmyk, int h, int w) {
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  tjCompress2(tj, cmyk.data(), w, 0, h, TJPF_CMYK, &buf, &size, TJSAMP_444, 100, 0);
  std::string out(reinterpret_cast<char*>(buf), size);
  tjFree(buf);
  tjDestroy(tj);
  return out;
}

inline std::string encode_webp_lossless(const std::vector<unsigned char>& px, int h, int w, int c) {
  uint8_t* buf = nullptr;
  const std::size_t size = c == 4 ? WebPEncodeLosslessRGBA(px.data(), w, h, w * 4, &buf)
                                  : WebPEncodeLosslessRGB(px.data(), w, h, w * 3, &buf);
  std::string out(reinterpret_cast<char*>(buf), size);
  WebPFree(buf);
  return out;
}

inline std::vector<unsigned char> pixels_of(const Tensor& t) { return t.bytes().to_vector(); }

} // namespace conveyor::test
