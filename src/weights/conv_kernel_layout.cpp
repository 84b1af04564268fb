#include "weights/conv_kernel_layout.h"

#include <vector>

#include "tensor/error.h"
#include "tensor/quant/quant.h"

namespace sd::weights {

void quantize_conv_kernel(ConvKernelLayout layout, DType type, const void* kernel, const Shape& ne,
                          void* dst) {
  const int64_t kw = ne[0], kh = ne[1], cin = ne[2], cout = ne[3], per_out = kw * kh * cin;
  const bool winograd = layout == ConvKernelLayout::WinogradF2x3;
  SD_CHECK(
      layout != ConvKernelLayout::Standard && cin % 32 == 0 && (!winograd || (kw == 3 && kh == 3)),
      "[weights] a %lldx%lld kernel of %lld input channels cannot be held in conv layout %d",
      static_cast<long long>(kw), static_cast<long long>(kh), static_cast<long long>(cin),
      static_cast<int>(layout));
  const int64_t taps = winograd ? 16 : kw * kh;  // rows of Cin values per output channel
  const size_t in_bytes = static_cast<size_t>(per_out) * type_size(type);
  const size_t row_bytes = row_size(DType::Q8_0, cin);
  std::vector<float> filters(static_cast<size_t>(per_out));  // one output channel, f32
  std::vector<float> by_tap(static_cast<size_t>(per_out));   // the same, [tap][Cin]
  // Its rows in the layout: channels-last is by_tap itself, Winograd its transform.
  std::vector<float> transformed(winograd ? static_cast<size_t>(16 * cin) : 0);
  const float* rows = winograd ? transformed.data() : by_tap.data();
  for (int64_t o = 0; o < cout; ++o) {
    dequantize_row(type, static_cast<const char*>(kernel) + o * in_bytes, filters.data(), per_out);
    for (int64_t c = 0; c < cin; ++c)
      for (int64_t t = 0; t < kw * kh; ++t)
        by_tap[static_cast<size_t>(t * cin + c)] = filters[static_cast<size_t>(c * kw * kh + t)];
    if (winograd) winograd_f2x3_filters(by_tap.data(), cin, transformed.data());
    quantize_rows(DType::Q8_0, rows, static_cast<char*>(dst) + o * taps * row_bytes, taps, cin);
  }
}

}  // namespace sd::weights
