#include "pipeline/image/resample.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "pipeline/runtime/memory_budget.hpp"
#include "pipeline/tensor/tensor_internals.hpp"

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

// One output row of the horizontal pass. The accumulators are named locals for 1, 3 and 4
// channels, so they stay in registers (an array of them was kept on the stack).
template <int C>
void horizontal_row(const float* row, const AxisWeights& wx, int64_t out_w, int64_t channels,
                    float* out) {
  for (int64_t x = 0; x < out_w; ++x) {
    const float* w = wx.weights.data() + wx.offset[x];
    const float* p = row + wx.first[x] * channels;
    const int64_t n = wx.count[x];
    if constexpr (C == 1) {
      float a0 = 0;
      for (int64_t k = 0; k < n; ++k)
        a0 += w[k] * p[k];
      out[x] = a0;
    } else if constexpr (C == 3) {
      float a0 = 0, a1 = 0, a2 = 0;
      for (int64_t k = 0; k < n; ++k) {
        const float wk = w[k];
        const float* q = p + 3 * k;
        a0 += wk * q[0];
        a1 += wk * q[1];
        a2 += wk * q[2];
      }
      out[3 * x] = a0, out[3 * x + 1] = a1, out[3 * x + 2] = a2;
    } else if constexpr (C == 4) {
      float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      for (int64_t k = 0; k < n; ++k) {
        const float wk = w[k];
        const float* q = p + 4 * k;
        a0 += wk * q[0];
        a1 += wk * q[1];
        a2 += wk * q[2];
        a3 += wk * q[3];
      }
      out[4 * x] = a0, out[4 * x + 1] = a1, out[4 * x + 2] = a2, out[4 * x + 3] = a3;
    } else {
      float* o = out + x * channels;
      for (int64_t c = 0; c < channels; ++c)
        o[c] = 0.0f;
      for (int64_t k = 0; k < n; ++k)
        for (int64_t c = 0; c < channels; ++c)
          o[c] += w[k] * p[k * channels + c];
    }
  }
}

// The vertical pass first: over whole rows it is one contiguous multiply-add per tap, which
// vectorizes (and converts uint8 on the way), and it leaves only out_h rows for the horizontal
// pass, whose gathers do not vectorize.
template <class T>
void resample(const T* src, int64_t src_stride_row, const Region& r, int64_t channels,
              const AxisWeights& wy, const AxisWeights& wx, int64_t out_h, int64_t out_w,
              float* dst) {
  const int64_t line = r.width * channels;
  std::vector<float> column(static_cast<std::size_t>(line));
  for (int64_t y = 0; y < out_h; ++y) {
    float* __restrict acc = column.data();
    std::fill(acc, acc + line, 0.0f);
    const float* w = wy.weights.data() + wy.offset[y];
    for (int64_t k = 0; k < wy.count[y]; ++k) {
      const T* __restrict in = src + (r.top + wy.first[y] + k) * src_stride_row + r.left * channels;
      const float wk = w[k];
      for (int64_t i = 0; i < line; ++i)
        acc[i] += wk * static_cast<float>(in[i]);
    }
    float* out = dst + y * out_w * channels;
    switch (channels) {
      case 1: horizontal_row<1>(acc, wx, out_w, channels, out); break;
      case 3: horizontal_row<3>(acc, wx, out_w, channels, out); break;
      case 4: horizontal_row<4>(acc, wx, out_w, channels, out); break;
      default: horizontal_row<0>(acc, wx, out_w, channels, out); break;
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
  // (uninitialized: every value is written below; in the shared arena when big)
  Tensor out = TensorInternals::uninitialized(DType::float32, {height, width, channels});
  float* dst = out.mutable_data<float>();
  const int64_t stride = in.shape()[1] * channels;
  if (in.dtype() == DType::uint8)
    resample(in.data<uint8_t>(), stride, region, channels, wy, wx, height, width, dst);
  else
    resample(in.data<float>(), stride, region, channels, wy, wx, height, width, dst);
  if (out_dtype == DType::float32)
    return out;
  Tensor bytes = TensorInternals::uninitialized(DType::uint8, {height, width, channels});
  uint8_t* b = bytes.mutable_data<uint8_t>();
  for (int64_t i = 0; i < out.num_elements(); ++i)
    b[i] = static_cast<uint8_t>(std::clamp(std::lround(dst[i]), 0L, 255L));
  return bytes;
}

} // namespace conveyor::image
