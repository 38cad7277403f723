#include "pipeline/image/resample.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "pipeline/runtime/memory_budget.hpp"

namespace conveyor::image {

namespace {

// For each output index: the first input index and the weights from there (summing to 1).
struct AxisWeights {
  std::vector<int64_t> first;
  std::vector<int64_t> count;
  std::vector<float> weights; // count[o] entries per output, at offset[o]
  std::vector<std::size_t> offset;
};

double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

AxisWeights axis_weights(int64_t in, int64_t out, ResizeMethod method, bool antialias) {
  AxisWeights w;
  w.first.resize(out);
  w.count.resize(out);
  w.offset.resize(out);
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  std::vector<double> tmp;
  for (int64_t o = 0; o < out; ++o) {
    w.offset[o] = w.weights.size();
    const double center = (static_cast<double>(o) + 0.5) * scale;
    if (method == ResizeMethod::nearest) {
      w.first[o] = std::min<int64_t>(static_cast<int64_t>(std::floor(center)), in - 1);
      w.count[o] = 1;
      w.weights.push_back(1.0f);
      continue;
    }
    tmp.clear();
    int64_t lo = 0, hi = 0;
    if (method == ResizeMethod::area) {
      // Coverage of input pixel i by the box [o*scale, (o+1)*scale).
      const double b0 = static_cast<double>(o) * scale, b1 = b0 + scale;
      lo = static_cast<int64_t>(std::floor(b0));
      hi = std::min<int64_t>(static_cast<int64_t>(std::ceil(b1)), in);
      for (int64_t i = lo; i < hi; ++i)
        tmp.push_back(std::max(0.0, std::min<double>(b1, i + 1) - std::max<double>(b0, i)));
    } else {
      const double filter_scale = antialias && scale > 1.0 ? scale : 1.0;
      const double support = filter_scale; // the triangle's radius is 1, widened by the scale
      lo = std::max<int64_t>(static_cast<int64_t>(std::floor(center - support)), 0);
      hi = std::min<int64_t>(static_cast<int64_t>(std::ceil(center + support)), in);
      for (int64_t i = lo; i < hi; ++i)
        tmp.push_back(triangle((static_cast<double>(i) + 0.5 - center) / filter_scale));
    }
    double sum = 0;
    for (double v : tmp)
      sum += v;
    // Trim zero weights at both ends, so the inner loops touch only contributing pixels.
    std::size_t a = 0, b = tmp.size();
    while (a < b && tmp[a] == 0.0)
      ++a;
    while (b > a && tmp[b - 1] == 0.0)
      --b;
    if (a == b || sum <= 0.0) { // only at a clamped edge: the nearest pixel
      w.first[o] = std::clamp<int64_t>(static_cast<int64_t>(center), 0, in - 1);
      w.count[o] = 1;
      w.weights.push_back(1.0f);
      continue;
    }
    w.first[o] = lo + static_cast<int64_t>(a);
    w.count[o] = static_cast<int64_t>(b - a);
    for (std::size_t k = a; k < b; ++k)
      w.weights.push_back(static_cast<float>(tmp[k] / sum));
  }
  return w;
}

template <class T>
void resample(const T* src, int64_t src_stride_row, const Region& r, int64_t channels,
              const AxisWeights& wy, const AxisWeights& wx, int64_t out_h, int64_t out_w,
              float* dst) {
  // Horizontal pass over the rows the vertical pass needs: [r.height, out_w, channels].
  std::vector<float> rows(static_cast<std::size_t>(r.height * out_w * channels), 0.0f);
  std::vector<float> acc(static_cast<std::size_t>(channels));
  for (int64_t y = 0; y < r.height; ++y) {
    const T* row = src + (r.top + y) * src_stride_row + r.left * channels;
    float* out = rows.data() + y * out_w * channels;
    for (int64_t x = 0; x < out_w; ++x) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      const float* w = wx.weights.data() + wx.offset[x];
      const T* p = row + wx.first[x] * channels;
      for (int64_t k = 0; k < wx.count[x]; ++k)
        for (int64_t c = 0; c < channels; ++c)
          acc[c] += w[k] * static_cast<float>(p[k * channels + c]);
      std::copy(acc.begin(), acc.end(), out + x * channels);
    }
  }
  const int64_t line = out_w * channels;
  for (int64_t y = 0; y < out_h; ++y) {
    float* out = dst + y * line;
    std::fill(out, out + line, 0.0f);
    const float* w = wy.weights.data() + wy.offset[y];
    for (int64_t k = 0; k < wy.count[y]; ++k) {
      const float* in = rows.data() + (wy.first[y] + k) * line;
      for (int64_t i = 0; i < line; ++i)
        out[i] += w[k] * in[i];
    }
  }
}

} // namespace

Expected<ResizeMethod> resize_method(const char* fn, const std::string& name) {
  if (name == "bilinear")
    return ResizeMethod::bilinear;
  if (name == "area")
    return ResizeMethod::area;
  if (name == "nearest")
    return ResizeMethod::nearest;
  return invalid_argument(std::string{fn} +
                          ": `method` must be \"bilinear\", \"area\" or \"nearest\", got \"" +
                          name + "\"");
}

Expected<DType> resize_dtype(const char* fn, const std::string& name) {
  if (name == "float32")
    return DType::float32;
  if (name == "uint8")
    return DType::uint8;
  return invalid_argument(std::string{fn} + ": `dtype` must be \"float32\" or \"uint8\", got \"" +
                          name + "\"");
}

Expected<Tensor> resize(const char* fn, const Tensor& in, int64_t height, int64_t width,
                        ResizeMethod method, bool antialias, DType out_dtype, Region region) {
  if (height <= 0 || width <= 0)
    return invalid_argument(std::string{fn} + ": the output size must be positive, got " +
                            std::to_string(height) + "x" + std::to_string(width));
  if (in.rank() != 3 || (in.dtype() != DType::uint8 && in.dtype() != DType::float32))
    return invalid_argument(std::string{fn} +
                            ": expected a uint8 or float32 image of shape [height, width, "
                            "channels], got " +
                            dtype_name(in.dtype()) + " of rank " + std::to_string(in.rank()));
  const int64_t channels = in.shape()[2];
  if (region.height == 0)
    region = Region{0, 0, in.shape()[0], in.shape()[1]};
  if (region.height <= 0 || region.width <= 0)
    return invalid_argument(std::string{fn} + ": cannot resize an empty image (" +
                            std::to_string(region.height) + "x" + std::to_string(region.width) +
                            ")");
  CONVEYOR_RETURN_IF_ERROR(check_allocation(height * width * channels * 4, fn));
  const AxisWeights wy = axis_weights(region.height, height, method, antialias);
  const AxisWeights wx = axis_weights(region.width, width, method, antialias);
  Tensor out{DType::float32, {height, width, channels}};
  float* dst = out.mutable_data<float>();
  const int64_t stride = in.shape()[1] * channels;
  if (in.dtype() == DType::uint8)
    resample(in.data<uint8_t>(), stride, region, channels, wy, wx, height, width, dst);
  else
    resample(in.data<float>(), stride, region, channels, wy, wx, height, width, dst);
  if (out_dtype == DType::float32)
    return out;
  Tensor bytes{DType::uint8, {height, width, channels}};
  uint8_t* b = bytes.mutable_data<uint8_t>();
  for (int64_t i = 0; i < out.num_elements(); ++i)
    b[i] = static_cast<uint8_t>(std::clamp(std::lround(dst[i]), 0L, 255L));
  return bytes;
}

} // namespace conveyor::image
