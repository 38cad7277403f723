#include "pipeline/image/pixel_ops.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "pipeline/runtime/memory_budget.hpp"

namespace conveyor::image {

Status require_hwc(const char* fn, const Tensor& t) {
  if (t.rank() != 3 || t.dtype() == DType::string)
    return invalid_argument(std::string{fn} +
                            ": expected an image of shape [height, width, channels], got " +
                            dtype_name(t.dtype()) + " of rank " + std::to_string(t.rank()));
  return Status::OK();
}

Expected<Tensor> crop(const char* fn, const Tensor& in, int64_t top, int64_t left, int64_t height,
                      int64_t width) {
  CONVEYOR_RETURN_IF_ERROR(require_hwc(fn, in));
  const int64_t H = in.shape()[0], W = in.shape()[1], C = in.shape()[2];
  if (height <= 0 || width <= 0 || height > H || width > W)
    return invalid_argument(std::string{fn} + ": a " + std::to_string(height) + "x" +
                            std::to_string(width) + " crop does not fit in a " + std::to_string(H) +
                            "x" + std::to_string(W) + " image");
  Tensor out{in.dtype(), {height, width, C}};
  const std::size_t px = dtype_size(in.dtype()) * static_cast<std::size_t>(C);
  const unsigned char* src = in.bytes().data();
  unsigned char* dst = out.mutable_data<unsigned char>();
  for (int64_t y = 0; y < height; ++y)
    std::memcpy(dst + y * width * px, src + ((top + y) * W + left) * px, width * px);
  return out;
}

namespace {

// Pixels as fixed-size blocks, so the copies below compile to moves instead of memcpy calls.
template <std::size_t N>
struct Block {
  unsigned char b[N];
};

template <std::size_t N>
void flip_rows(const unsigned char* src, unsigned char* dst, int64_t H, int64_t W) {
  const auto* s = reinterpret_cast<const Block<N>*>(src);
  auto* d = reinterpret_cast<Block<N>*>(dst);
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x)
      d[y * W + x] = s[y * W + (W - 1 - x)];
}

template <class T>
void transpose_chw(const T* src, T* dst, int64_t HW, int64_t C) {
  if (C == 3) { // one pass, three output planes
    T* __restrict r = dst;
    T* __restrict g = dst + HW;
    T* __restrict b = dst + 2 * HW;
    for (int64_t i = 0; i < HW; ++i) {
      r[i] = src[3 * i];
      g[i] = src[3 * i + 1];
      b[i] = src[3 * i + 2];
    }
    return;
  }
  for (int64_t c = 0; c < C; ++c) {
    T* out = dst + c * HW;
    for (int64_t i = 0; i < HW; ++i)
      out[i] = src[i * C + c];
  }
}

} // namespace

Tensor flip_left_right(const Tensor& in) {
  const int64_t H = in.shape()[0], W = in.shape()[1];
  const std::size_t px = dtype_size(in.dtype()) * static_cast<std::size_t>(in.shape()[2]);
  Tensor out{in.dtype(), in.shape()};
  const unsigned char* src = in.bytes().data();
  unsigned char* dst = out.mutable_data<unsigned char>();
  switch (px) {
    case 1: flip_rows<1>(src, dst, H, W); return out;
    case 3: flip_rows<3>(src, dst, H, W); return out;
    case 4: flip_rows<4>(src, dst, H, W); return out;
    case 12: flip_rows<12>(src, dst, H, W); return out;
    case 16: flip_rows<16>(src, dst, H, W); return out;
    default: break;
  }
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x)
      std::memcpy(dst + (y * W + x) * px, src + (y * W + (W - 1 - x)) * px, px);
  return out;
}

Tensor to_chw(const Tensor& in) {
  const int64_t H = in.shape()[0], W = in.shape()[1], C = in.shape()[2];
  Tensor out{in.dtype(), {C, H, W}};
  const unsigned char* src = in.bytes().data();
  unsigned char* dst = out.mutable_data<unsigned char>();
  switch (dtype_size(in.dtype())) {
    case 1: transpose_chw(src, dst, H * W, C); break;
    case 2:
      transpose_chw(reinterpret_cast<const uint16_t*>(src), reinterpret_cast<uint16_t*>(dst), H * W,
                    C);
      break;
    case 4:
      transpose_chw(reinterpret_cast<const uint32_t*>(src), reinterpret_cast<uint32_t*>(dst), H * W,
                    C);
      break;
    default:
      transpose_chw(reinterpret_cast<const uint64_t*>(src), reinterpret_cast<uint64_t*>(dst), H * W,
                    C);
      break;
  }
  return out;
}

Expected<std::vector<double>> parse_floats(const char* fn, const char* param,
                                           const std::string& text) {
  std::vector<double> out;
  const char* p = text.c_str();
  while (true) {
    char* end = nullptr;
    const double v = std::strtod(p, &end);
    if (end == p || !std::isfinite(v))
      return invalid_argument(std::string{fn} + ": `" + param +
                              "` must be comma-separated numbers (one, or one per channel), "
                              "got \"" +
                              text + "\"");
    out.push_back(v);
    while (*end == ' ')
      ++end;
    if (*end == '\0')
      return out;
    if (*end != ',')
      return invalid_argument(std::string{fn} + ": `" + param +
                              "` must be comma-separated numbers, got \"" + text + "\"");
    p = end + 1;
  }
}

Expected<Tensor> normalize(const Tensor& in, const std::vector<double>& mean,
                           const std::vector<double>& stddev, double scale, DType out_dtype) {
  CONVEYOR_RETURN_IF_ERROR(require_hwc("normalize", in));
  if (in.dtype() != DType::uint8 && in.dtype() != DType::float32)
    return invalid_argument(std::string{"normalize: expected a uint8 or float32 image, got "} +
                            dtype_name(in.dtype()));
  const int64_t C = in.shape()[2];
  for (const auto* v : {&mean, &stddev}) {
    if (v->size() != 1 && static_cast<int64_t>(v->size()) != C)
      return invalid_argument(std::string{"normalize: `"} + (v == &mean ? "mean" : "std") +
                              "` has " + std::to_string(v->size()) +
                              " values, expected 1 or one per channel (" + std::to_string(C) + ")");
  }
  std::vector<float> mul(C), add(C);
  for (int64_t c = 0; c < C; ++c) {
    const double s = stddev[stddev.size() == 1 ? 0 : c];
    if (s == 0.0)
      return invalid_argument("normalize: `std` must not contain 0");
    mul[c] = static_cast<float>(scale / s);
    add[c] = static_cast<float>(-mean[mean.size() == 1 ? 0 : c] / s);
  }
  CONVEYOR_RETURN_IF_ERROR(check_allocation(in.num_elements() * 4, "normalize"));
  Tensor out{out_dtype, in.shape()};
  const int64_t pixels = in.num_elements() / C;
  // Pixel by pixel, channel by channel: no division or dtype test per value.
  const auto run = [&](auto load, auto store) {
    if (C == 3) { // the common case, with the coefficients in registers
      const float m0 = mul[0], m1 = mul[1], m2 = mul[2], a0 = add[0], a1 = add[1], a2 = add[2];
      for (int64_t i = 0; i < pixels * 3; i += 3) {
        store(i, load(i) * m0 + a0);
        store(i + 1, load(i + 1) * m1 + a1);
        store(i + 2, load(i + 2) * m2 + a2);
      }
      return;
    }
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t c = 0; c < C; ++c)
        store(p * C + c, load(p * C + c) * mul[c] + add[c]);
  };
  const auto store_to = [&](auto load) {
    if (out_dtype == DType::float32) {
      float* dst = out.mutable_data<float>();
      run(load, [dst](int64_t i, float v) { dst[i] = v; });
    } else {
      float16* dst = out.mutable_data<float16>();
      run(load, [dst](int64_t i, float v) { dst[i] = float16::from_float(v); });
    }
  };
  if (in.dtype() == DType::uint8) {
    const uint8_t* src = in.data<uint8_t>();
    store_to([src](int64_t i) { return static_cast<float>(src[i]); });
  } else {
    const float* src = in.data<float>();
    store_to([src](int64_t i) { return src[i]; });
  }
  return out;
}

} // namespace conveyor::image
