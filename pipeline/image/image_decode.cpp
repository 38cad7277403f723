#include "pipeline/image/image_decode.hpp"

#include <png.h>
#include <turbojpeg.h>
#include <webp/decode.h>

#include <csetjmp>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/runtime/memory_budget.hpp"
#include "pipeline/tensor/tensor_internals.hpp"

namespace conveyor::image {

namespace {

Status corrupt(ImageFormat format, const std::string& why) {
  return invalid_argument(std::string{"decode_image: corrupt or truncated "} + format_name(format) +
                          " image: " + why);
}

// Asked before the pixels are allocated: a huge header fails instead of exhausting memory.
Expected<Tensor> allocate(ImageFormat format, int64_t height, int64_t width, int channels) {
  if (height <= 0 || width <= 0)
    return corrupt(format, "its header gives a size of " + std::to_string(height) + "x" +
                             std::to_string(width));
  CONVEYOR_RETURN_IF_ERROR(check_allocation(height * width * channels, "decode_image"));
  // Zeroed (a truncated image's decoder may leave rows unwritten), in the shared arena when big
  // (a Python map downstream reads it in place).
  Tensor t =
    TensorInternals::uninitialized(DType::uint8, {height, width, static_cast<int64_t>(channels)});
  std::memset(t.mutable_data<unsigned char>(), 0, t.bytes().size());
  return t;
}

// ITU-R 601-2 luma, in integers as PIL's convert("L") computes it.
void rgb_to_gray(const unsigned char* rgb, unsigned char* gray, std::size_t pixels, int stride) {
  for (std::size_t i = 0; i < pixels; ++i) {
    const unsigned char* p = rgb + i * stride;
    gray[i] =
      static_cast<unsigned char>((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16);
  }
}

// --- JPEG

struct TjDeleter {
  void operator()(void* h) const { tjDestroy(h); }
};

// libjpeg stops on a premature end with a warning and gray rows: that is data loss. Other
// warnings (extraneous bytes, an odd marker) leave a full image, as PIL accepts it.
Status jpeg_result(void* tj, int rc) {
  if (rc == 0)
    return Status::OK();
  const std::string why = tjGetErrorStr2(tj);
  if (tjGetErrorCode(tj) != TJERR_WARNING || why.find("Premature end") != std::string::npos)
    return corrupt(ImageFormat::jpeg, why);
  return Status::OK();
}

// CMYK and YCCK JPEGs (print workflows; a few in ImageNet) as Adobe writes them, inverted: the
// RGB is PIL's convert("RGB") of the CMYK it reads, r = k * c / 255 in integers.
Expected<Tensor> decode_cmyk_jpeg(void* tj, const unsigned char* data, unsigned long size,
                                  int height, int width, int channels) {
  CONVEYOR_RETURN_IF_ERROR(check_allocation(int64_t{height} * width * 4, "decode_image"));
  std::vector<unsigned char> cmyk(static_cast<std::size_t>(height) * width * 4);
  CONVEYOR_RETURN_IF_ERROR(
    jpeg_result(tj, tjDecompress2(tj, data, size, cmyk.data(), width, 0, height, TJPF_CMYK, 0)));
  auto out = allocate(ImageFormat::jpeg, height, width, channels);
  if (!out.ok())
    return out.status();
  const std::size_t pixels = static_cast<std::size_t>(height) * width;
  std::vector<unsigned char> rgb(channels == 1 ? pixels * 3 : 0);
  unsigned char* dst = channels == 1 ? rgb.data() : out->mutable_data<unsigned char>();
  const int stride = channels == 1 ? 3 : channels;
  for (std::size_t i = 0; i < pixels; ++i) {
    const unsigned char* p = cmyk.data() + i * 4;
    const int k = p[3];
    for (int c = 0; c < 3; ++c) {
      // PIL: nk - MULDIV255(255 - raw, nk) with nk = k.
      const int t = (255 - p[c]) * k + 128;
      dst[i * stride + c] = static_cast<unsigned char>(k - (((t >> 8) + t) >> 8));
    }
    if (stride == 4)
      dst[i * stride + 3] = 255;
  }
  if (channels == 1)
    rgb_to_gray(rgb.data(), out->mutable_data<unsigned char>(), pixels, 3);
  return out;
}

Expected<Tensor> decode_jpeg(std::string_view bytes, int channels) {
  std::unique_ptr<void, TjDeleter> tj{tjInitDecompress()};
  if (!tj)
    return internal_error(std::string{"decode_image: cannot start libturbojpeg: "} +
                          tjGetErrorStr2(nullptr));
  auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto size = static_cast<unsigned long>(bytes.size());
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.get(), data, size, &width, &height, &subsamp, &colorspace) != 0)
    return corrupt(ImageFormat::jpeg, tjGetErrorStr2(tj.get()));
  if (channels == 0)
    channels = colorspace == TJCS_GRAY ? 1 : 3;
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK)
    return decode_cmyk_jpeg(tj.get(), data, size, height, width, channels);
  const int pixel_format = channels == 1 ? TJPF_GRAY : channels == 3 ? TJPF_RGB : TJPF_RGBA;
  auto out = allocate(ImageFormat::jpeg, height, width, channels);
  if (!out.ok())
    return out.status();
  // Accurate integer DCT and fancy upsampling: libjpeg's defaults, what PIL decodes with.
  CONVEYOR_RETURN_IF_ERROR(
    jpeg_result(tj.get(), tjDecompress2(tj.get(), data, size, out->mutable_data<unsigned char>(),
                                        width, 0, height, pixel_format, 0)));
  return out;
}

// --- PNG (libpng's classic API: its transforms are the ones tf.io.decode_png uses)

struct PngReader {
  std::string_view bytes;
  std::size_t offset = 0;
  char error[256] = {};
};

void png_read(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (r->bytes.size() - r->offset < n)
    png_error(png, "the data ends early");
  std::memcpy(out, r->bytes.data() + r->offset, n);
  r->offset += n;
}

void png_fail(png_structp png, png_const_charp message) {
  auto* r = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(r->error, sizeof r->error, "%s", message);
  png_longjmp(png, 1);
}

void png_warn(png_structp, png_const_charp) {}

// Only trivially destructible locals live across setjmp; the caller owns the pixel buffer.
// Returns false with r.error set on failure. Pass 1 (rows == nullptr) reads the header and sets
// up the transforms, giving the size; pass 2 reads the rows into `rows`.
bool png_decode(PngReader& r, int& channels, png_uint_32& width, png_uint_32& height,
                unsigned char* pixels, bool header_only) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, png_fail, png_warn);
  if (png == nullptr) {
    std::snprintf(r.error, sizeof r.error, "cannot start libpng");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, &r, png_read);
  png_read_info(png, info);
  int bit_depth = 0, color_type = 0;
  png_get_IHDR(png, info, &width, &height, &bit_depth, &color_type, nullptr, nullptr, nullptr);
  png_set_expand(png); // palette -> RGB, gray < 8 bits -> 8 bits, tRNS -> alpha
  if (bit_depth == 16)
    png_set_scale_16(png);
  const bool alpha =
    (color_type & PNG_COLOR_MASK_ALPHA) != 0 || png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  const bool color = (color_type & PNG_COLOR_MASK_COLOR) != 0;
  const int own = (color ? 3 : 1) + (alpha ? 1 : 0);
  if (channels == 0)
    channels = own;
  if (channels == 1 || channels == 2) {
    if (color)
      png_set_rgb_to_gray_fixed(png, 1, -1, -1);
  } else if (!color) {
    png_set_gray_to_rgb(png);
  }
  if (alpha && (channels == 1 || channels == 3))
    png_set_strip_alpha(png);
  else if (!alpha && (channels == 2 || channels == 4))
    png_set_add_alpha(png, 0xff, PNG_FILLER_AFTER);
  const int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (!header_only) {
    const std::size_t stride = static_cast<std::size_t>(width) * channels;
    for (int pass = 0; pass < passes; ++pass)
      for (png_uint_32 y = 0; y < height; ++y)
        png_read_row(png, pixels + y * stride, nullptr);
    png_read_end(png, nullptr);
  }
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

Expected<Tensor> decode_png(std::string_view bytes, int channels) {
  PngReader header{bytes};
  png_uint_32 width = 0, height = 0;
  int resolved = channels;
  if (!png_decode(header, resolved, width, height, nullptr, true))
    return corrupt(ImageFormat::png, header.error);
  auto out = allocate(ImageFormat::png, height, width, resolved);
  if (!out.ok())
    return out.status();
  PngReader body{bytes};
  if (!png_decode(body, resolved, width, height, out->mutable_data<unsigned char>(), false))
    return corrupt(ImageFormat::png, body.error);
  return out;
}

// --- WebP

Expected<Tensor> decode_webp(std::string_view bytes, int channels) {
  auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  WebPBitstreamFeatures features;
  if (WebPGetFeatures(data, bytes.size(), &features) != VP8_STATUS_OK)
    return corrupt(ImageFormat::webp, "its header cannot be read");
  if (channels == 0)
    channels = features.has_alpha ? 4 : 3;
  auto out = allocate(ImageFormat::webp, features.height, features.width, channels);
  if (!out.ok())
    return out.status();
  const auto pixels = static_cast<std::size_t>(features.width) * features.height;
  unsigned char* dst = out->mutable_data<unsigned char>();
  const bool ok =
    channels == 4
      ? WebPDecodeRGBAInto(data, bytes.size(), dst, pixels * 4, features.width * 4) != nullptr
    : channels == 3
      ? WebPDecodeRGBInto(data, bytes.size(), dst, pixels * 3, features.width * 3) != nullptr
      : false;
  if (channels == 1) {
    std::vector<unsigned char> rgb(pixels * 3);
    if (WebPDecodeRGBInto(data, bytes.size(), rgb.data(), rgb.size(), features.width * 3) ==
        nullptr)
      return corrupt(ImageFormat::webp, "the image data cannot be decoded");
    rgb_to_gray(rgb.data(), dst, pixels, 3);
    return out;
  }
  if (!ok)
    return corrupt(ImageFormat::webp, "the image data cannot be decoded");
  return out;
}

} // namespace

const char* format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::jpeg: return "JPEG";
    case ImageFormat::png: return "PNG";
    case ImageFormat::webp: return "WebP";
    case ImageFormat::unknown: break;
  }
  return "unknown";
}

ImageFormat sniff_format(std::string_view b) {
  if (b.size() >= 3 && b.compare(0, 3, "\xFF\xD8\xFF") == 0)
    return ImageFormat::jpeg;
  if (b.size() >= 8 && b.compare(0, 8, "\x89PNG\r\n\x1A\n") == 0)
    return ImageFormat::png;
  if (b.size() >= 12 && b.compare(0, 4, "RIFF") == 0 && b.compare(8, 4, "WEBP") == 0)
    return ImageFormat::webp;
  return ImageFormat::unknown;
}

Expected<Tensor> decode_image(std::string_view bytes, int channels) {
  if (channels != 0 && channels != 1 && channels != 3 && channels != 4)
    return invalid_argument("decode_image: `channels` must be 0, 1, 3 or 4, got " +
                            std::to_string(channels));
  switch (sniff_format(bytes)) {
    case ImageFormat::jpeg: return decode_jpeg(bytes, channels);
    case ImageFormat::png: return decode_png(bytes, channels);
    case ImageFormat::webp: return decode_webp(bytes, channels);
    case ImageFormat::unknown: break;
  }
  std::string head;
  for (std::size_t i = 0; i < bytes.size() && i < 8; ++i) {
    static const char* const hex = "0123456789abcdef";
    const auto c = static_cast<unsigned char>(bytes[i]);
    head += std::string{hex[c >> 4], hex[c & 15]} + (i + 1 < bytes.size() && i < 7 ? " " : "");
  }
  return invalid_argument("decode_image: not a JPEG, PNG or WebP image (" +
                          std::to_string(bytes.size()) + " bytes, starting " +
                          (head.empty() ? std::string{"with nothing"} : head) + ")");
}

} // namespace conveyor::image
