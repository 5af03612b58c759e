// SPDX-License-Identifier: Apache-2.0
// The textbook convolution in double, for the convolution kernels' tests (nn.cpp, winograd.cpp).
#pragma once

#include <kiln/kernels/nn.hpp>

#include <vector>

namespace kiln_test {

using kiln::kernels::conv2d_params;
using kiln::runtime::tensor;

template <class T>
T at4(const tensor& t, std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d) {
  const auto& s = t.strides();
  return static_cast<const T*>(t.data())[a * s[0] + b * s[1] + c * s[2] + d * s[3]];
}

/// The textbook convolution, in double.
template <class T>
std::vector<T> reference_conv(const tensor& x, const tensor& w, const tensor& bias, const conv2d_params& p, std::int64_t oh, std::int64_t ow) {
  const std::int64_t n = x.shape(0), h = x.shape(2), wd = x.shape(3), o = w.shape(0), cg = w.shape(1), kh = w.shape(2), kw = w.shape(3);
  const std::int64_t og = o / p.groups;
  std::vector<T> out;
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t oc = 0; oc < o; ++oc)
      for (std::int64_t y = 0; y < oh; ++y)
        for (std::int64_t xo = 0; xo < ow; ++xo) {
          double s = bias.defined() ? double(bias.to_vector<T>()[std::size_t(oc)]) : 0.0;
          for (std::int64_t c = 0; c < cg; ++c)
            for (std::int64_t i = 0; i < kh; ++i)
              for (std::int64_t j = 0; j < kw; ++j) {
                const std::int64_t iy = y * p.strides[0] + i * p.dilation[0] - p.padding[0];
                const std::int64_t ix = xo * p.strides[1] + j * p.dilation[1] - p.padding[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                s += double(at4<T>(x, b, oc / og * cg + c, iy, ix)) * double(at4<T>(w, oc, c, i, j));
              }
          out.push_back(T(s));
        }
  return out;
}

}  // namespace kiln_test
