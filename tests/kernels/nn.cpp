// SPDX-License-Identifier: Apache-2.0
// conv2d and pooling against direct loops in double.
//
// Tolerances: conv2d |got - want| <= 1e-6 * (taps + 1) * 4 for float32 (inputs in [-1, 1], taps =
// C/groups * KH * KW products per output, summed in another order), 1e-13 * (taps + 1) for
// float64. max_pool2d is exact; avg_pool2d 1e-6 relative (float32).
#include <kiln/kernels/nn.hpp>
#include <kiln/kernels/parallel.hpp>

#include "../common/message_of.hpp"
#include "../common/pool_threads.hpp"
#include "conv_reference.hpp"
#include "reference.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <utility>

using namespace kiln;
using namespace kiln::kernels;
using namespace kiln_test;

namespace {

struct conv_case {
  shape_vector x, w;
  conv2d_params p;
  bool bias;
};

template <class T>
void check_conv(const conv_case& k, unsigned seed, bool strided) {
  CAPTURE(runtime::shape_to_string(k.x));
  CAPTURE(runtime::shape_to_string(k.w));
  CAPTURE(k.p.groups);
  CAPTURE(k.p.strides[0]);
  CAPTURE(k.p.padding[0]);
  CAPTURE(k.p.dilation[0]);
  CAPTURE(strided);
  tensor x = random_tensor<T>(k.x, -1, 1, seed);
  if (strided) {  // the same values read through a permuted layout (NHWC in memory)
    const tensor nhwc = permute_dims(x, {0, 2, 3, 1});
    x = nhwc.permute({0, 3, 1, 2});
  }
  const tensor w = random_tensor<T>(k.w, -1, 1, seed + 1);
  const tensor bias = k.bias ? random_tensor<T>({k.w[0]}, -1, 1, seed + 2) : tensor();
  const tensor y = conv2d(x, w, bias, k.p);
  const std::int64_t taps = k.w[1] * k.w[2] * k.w[3];
  const double tol = std::is_same_v<T, float> ? 4e-6 * double(taps + 1) : 1e-13 * double(taps + 1);
  const auto want = reference_conv<T>(x, w, bias, k.p, y.shape(2), y.shape(3));
  check_all_close(y.to_vector<T>(), want, 0, tol);
  if (strided) {  // and into a strided output
    const tensor big = tensor::zeros({y.shape(0), y.shape(1), y.shape(2), y.shape(3) * 2}, y.type());
    const tensor out = big.slice(3, 1, y.shape(3) * 2, 2);
    conv2d(x, w, bias, k.p, out);
    check_all_close(out.to_vector<T>(), want, 0, tol);
  }
  if (k.p.groups == 1) {  // the weight packed ahead of time: the direct kernel, whatever the size
    const tensor packed = prepack_conv_weight(w);
    const packed_conv_layout l = native_conv_layout(w.type(), k.w[0], k.w[1], k.w[2], k.w[3]);
    const tensor big = tensor::zeros({y.shape(0), y.shape(1), y.shape(2), y.shape(3) * 2}, y.type());
    const tensor out = strided ? big.slice(3, 1, y.shape(3) * 2, 2) : tensor::empty(y.shape(), y.type());
    conv2d_prepacked(x, packed, l, bias, k.p, out);
    check_all_close(out.to_vector<T>(), want, 0, tol);
    // Where conv2d itself takes the direct kernel, the sums are the same, in the same order.
    if (kernels::detail::use_direct_conv({k.x[0], k.x[1], k.x[2], k.x[3], k.w[0], k.w[2], k.w[3], y.shape(2), y.shape(3), k.w[1], k.w[0]}, k.p))
      CHECK(out.to_vector<T>() == y.to_vector<T>());
  }
}

conv2d_params conv(std::int64_t stride, std::int64_t pad, std::int64_t dilation = 1, std::int64_t groups = 1) {
  conv2d_params p;
  p.strides = {stride, stride};
  p.padding = {pad, pad, pad, pad};
  p.dilation = {dilation, dilation};
  p.groups = groups;
  return p;
}

}  // namespace

TEST_CASE("conv2d: strides, padding, dilation, groups, depthwise, 1x1, bias, layouts, against the direct loop") {
  conv2d_params asym = conv(1, 0);
  asym.padding = {2, 0, 1, 3};
  asym.strides = {1, 2};
  asym.dilation = {2, 1};
  const std::vector<conv_case> cases = {
      {{1, 3, 9, 11}, {4, 3, 3, 3}, conv(1, 1), true},        // same-size 3x3
      {{2, 5, 13, 10}, {7, 5, 3, 3}, conv(2, 1), false},      // stride 2, batch 2
      {{1, 4, 12, 12}, {6, 4, 3, 3}, conv(1, 2, 2), true},    // dilation 2
      {{1, 3, 17, 19}, {5, 3, 7, 7}, conv(2, 3), true},       // a ResNet stem, small
      {{1, 6, 8, 9}, {4, 6, 1, 1}, conv(1, 0), true},         // pointwise
      {{1, 6, 8, 9}, {4, 6, 1, 1}, conv(2, 0), false},        // strided 1x1 (ResNet downsample)
      {{1, 4, 10, 10}, {6, 2, 3, 3}, conv(1, 1, 1, 2), true}, // two groups
      {{2, 8, 11, 13}, {8, 1, 3, 3}, conv(1, 1, 1, 8), true}, // depthwise
      {{1, 8, 11, 13}, {8, 1, 3, 3}, conv(2, 1, 1, 8), false},// depthwise, stride 2
      {{1, 4, 9, 37}, {8, 1, 5, 3}, conv(1, 2, 2, 4), true},  // depthwise, multiplier 2, dilated
      {{1, 3, 10, 12}, {5, 3, 4, 2}, asym, true},             // asymmetric everything
      {{1, 50, 9, 9}, {13, 50, 3, 3}, conv(1, 1), true},      // K = 450 crosses the GEMM's KC = 384
      {{1, 2, 47, 53}, {3, 2, 3, 3}, conv(1, 1), false},      // N = 2491 crosses NC
      {{1, 3, 5, 5}, {2, 3, 5, 5}, conv(1, 0), true},         // one output position
      {{0, 3, 5, 5}, {2, 3, 3, 3}, conv(1, 0), true},         // an empty batch
      // At least 256 output positions: the direct kernel (use_direct_conv), with channel counts
      // that do not fill its blocks and position counts that do not fill its tiles.
      {{2, 5, 34, 35}, {37, 5, 3, 3}, conv(2, 1), true},      // stride 2, batch 2
      {{1, 4, 20, 23}, {6, 4, 3, 3}, conv(1, 2, 2), true},    // dilation 2
      {{1, 3, 33, 37}, {40, 3, 7, 7}, conv(2, 3), false},     // a ResNet stem
      {{1, 3, 20, 30}, {5, 3, 4, 2}, asym, true},             // asymmetric everything
      {{1, 70, 17, 16}, {9, 70, 3, 3}, conv(1, 1), true},     // K = 630
      // Few taps and output rows of at least 32: the direct kernel with positions along the
      // vectors (use_direct_rows), rows that end inside a tile of 1, 2 or 3 vectors.
      {{2, 3, 70, 77}, {13, 3, 7, 7}, conv(2, 3), true},      // a ResNet stem: 35 x 39 outputs
      {{1, 4, 20, 100}, {9, 4, 3, 3}, conv(1, 2, 2), false},  // dilation 2: rows of 100
      {{1, 2, 9, 70}, {5, 2, 4, 2}, asym, true},              // asymmetric everything: rows of 36
      // Strided or padded 1x1 windows: the GEMM gathers its B panels (im2col_packer::pointwise),
      // the prepacked direct kernel an OH x OW plane per channel. Output rows that straddle the
      // GEMM's column panels, K past KC, padding on every side.
      {{1, 40, 30, 37}, {20, 40, 1, 1}, conv(2, 1), true},    // 16 x 20 outputs, zero border
      {{1, 3, 10, 12}, {5, 3, 1, 1}, asym, false},            // asymmetric strides and padding
      {{1, 400, 9, 9}, {7, 400, 1, 1}, conv(2, 0), false},    // K = 400 crosses KC
      {{2, 5, 13, 14}, {6, 5, 1, 1}, conv(3, 1), true},       // stride 3, batch 2
      // More of use_direct_rows, whose tiles run through the rows flat: SqueezeNet's 3x3 layer on
      // 16 channels (K = 144, rows of 55 in rows of 57), its first layer (stride 2 unpadded, rows
      // of 111 in rows of 112), stride 3 with padding on one side, channels that leave a group
      // partial, one output row.
      {{1, 16, 9, 55}, {21, 16, 3, 3}, conv(1, 1), true},
      {{1, 3, 25, 224}, {19, 3, 3, 3}, conv(2, 0), false},
      {{2, 2, 14, 101}, {5, 2, 3, 3}, conv(3, 2), true},
      {{1, 3, 3, 70}, {9, 3, 3, 3}, conv(1, 0), false},
  };
  unsigned seed = 10;
  for (const auto& k : cases) {
    check_conv<float>(k, seed, false);
    check_conv<float>(k, seed, true);
    seed += 3;
  }
  check_conv<double>(cases[1], 99, true);
  check_conv<double>(cases[7], 98, false);
  check_conv<double>(cases[0], 97, false);   // the contiguous-row packing, double panels
  check_conv<double>(cases[11], 96, false);  // and across KC
  check_conv<double>(cases[12], 95, false);  // and across NC
  check_conv<double>(cases[15], 94, true);   // the direct kernel, double blocks
  check_conv<double>(cases[17], 93, false);
  check_conv<double>(cases[20], 92, true);   // positions along the vectors, double
  check_conv<double>(cases[23], 91, true);   // a strided 1x1 window, double panels
  check_conv<double>(cases[27], 90, true);   // positions along the vectors through the rows, double
  check_conv<double>(cases[28], 89, false);
}

TEST_CASE("store_flat: a vector of flat positions lands on the rows' outputs, the padding's lanes and those past the last row dropped") {
  // Every start of a vector in rows of `pitch` positions, the first `ow` of each an output: rows
  // longer than a vector, a vector long and a part, and shorter than a vector (a vector then
  // meets three rows); float and double (masked stores at AVX-512 and AVX2, a buffer else).
  const auto check = [&]<class T>(type_tag<T>) {
    constexpr std::int64_t W = std::int64_t(kernels::batch<T>::size);
    for (const std::int64_t pitch : {W / 2 + 3, W, W + 1, W + 3, 2 * W + 1})
      for (const std::int64_t ow : {pitch, pitch - 1, pitch - 3})
        for (const std::int64_t rows : {1, 2, 3}) {
          if (ow <= 0) continue;
          CAPTURE(pitch);
          CAPTURE(ow);
          CAPTURE(rows);
          for (std::int64_t f = 0; f < rows * pitch; ++f) {
            CAPTURE(f);
            std::vector<T> out(std::size_t(rows * ow + W), T(-1)), want = out;
            alignas(64) T lanes[W];
            for (std::int64_t l = 0; l < W; ++l) {
              lanes[l] = T(f + l);
              const std::int64_t r = (f + l) / pitch, c = (f + l) % pitch;
              if (r < rows && c < ow) want[std::size_t(r * ow + c)] = T(f + l);
            }
            kernels::detail::store_flat(kernels::batch<T>::load_aligned(lanes), {f / pitch, f % pitch}, pitch, ow, rows, out.data());
            CHECK(out == want);
          }
        }
  };
  check(type_tag<float>{});
  check(type_tag<double>{});
}

TEST_CASE("prepared_buffer prepares again only when the geometry or the storage changes") {
  kernels::detail::prepared_buffer<int, 2> b;
  int prepared = 0;
  const auto fill = [&](int* d) {
    ++prepared;
    std::fill_n(d, 10, 7);
  };
  int* p = b.get(10, {3, 4}, fill);
  CHECK(prepared == 1);
  p[0] = 1;  // the kernel's part
  p = b.get(10, {3, 4}, fill);
  CHECK(prepared == 1);
  CHECK(p[0] == 1);
  CHECK(p[9] == 7);
  b.get(10, {3, 5}, fill);  // another geometry
  CHECK(prepared == 2);
  const int* before = b.get(10, {3, 5}, fill);
  const int* after = b.get(1 << 20, {3, 5}, fill);  // grown: the storage moves
  CHECK(prepared == (after == before ? 2 : 3));
}

TEST_CASE("conv2d: an input whose rows are a window of wider rows (packing reads up to the last element, no further)") {
  // The last w columns of a wider tensor: rows contiguous but `w + 5` apart, and the window ends
  // where the allocation does, so a whole-vector read past the last element would be caught by
  // AddressSanitizer. Several output rows per panel, padding, a second block of rows (K > KC).
  for (const auto& chw : {std::array<std::int64_t, 3>{3, 7, 5}, {45, 9, 7}, {2, 33, 40}}) {
    const std::int64_t c = chw[0], h = chw[1], w = chw[2];
    CAPTURE(c);
    CAPTURE(w);
    const tensor wide = random_tensor<float>({1, c, h, w + 5}, -1, 1, unsigned(c + h));
    const tensor x = wide.slice(3, 5, w + 5);
    const tensor wt = random_tensor<float>({5, c, 3, 3}, -1, 1, unsigned(w));
    const tensor y = conv2d(x, wt, {}, conv(1, 1));
    check_all_close(y.to_vector<float>(), reference_conv<float>(x, wt, tensor(), conv(1, 1), y.shape(2), y.shape(3)), 0, 4e-6 * double(c * 9 + 1));
  }
}

TEST_CASE("conv2d: the same results on two threads") {
  const tensor x = random_tensor<float>({2, 16, 20, 20}, -1, 1, 5), w = random_tensor<float>({32, 16, 3, 3}, -1, 1, 6);
  const tensor dw = random_tensor<float>({16, 1, 3, 3}, -1, 1, 7);
  const tensor one = conv2d(x, w, {}, conv(1, 1)), one_dw = conv2d(x, dw, {}, conv(1, 1, 1, 16));
  const auto [two, two_dw] = [&] {
    const kiln_test::pool_threads scope(2);
    return std::pair{conv2d(x, w, {}, conv(1, 1)), conv2d(x, dw, {}, conv(1, 1, 1, 16))};
  }();
  CHECK(same_tensor(one, two));
  CHECK(same_tensor(one_dw, two_dw));
  // A ResNet downsampling, small: the GEMM's gathered panels (cut by columns) and the prepacked
  // kernel's gathered planes (cut by blocks of channels), each thread gathering its own.
  const tensor xd = random_tensor<float>({1, 32, 28, 27}, -1, 1, 8), wd = random_tensor<float>({72, 32, 1, 1}, -1, 1, 9);
  const tensor packed = prepack_conv_weight(wd);
  const packed_conv_layout l = native_conv_layout(dtype::float32, 72, 32, 1, 1);
  const tensor one_d = conv2d(xd, wd, {}, conv(2, 0)), one_p = tensor::empty(one_d.shape(), dtype::float32);
  conv2d_prepacked(xd, packed, l, {}, conv(2, 0), one_p);
  const tensor two_p = tensor::empty(one_d.shape(), dtype::float32);
  const tensor two_d = [&] {
    const kiln_test::pool_threads scope(2);
    conv2d_prepacked(xd, packed, l, {}, conv(2, 0), two_p);
    return conv2d(xd, wd, {}, conv(2, 0));
  }();
  CHECK(same_tensor(one_d, two_d));
  CHECK(same_tensor(one_p, two_p));
  check_all_close(one_d.to_vector<float>(), reference_conv<float>(xd, wd, tensor(), conv(2, 0), 14, 14), 0, 4e-6 * 33);
}

TEST_CASE("conv2d_prepacked: a layout of another vector width is unpacked first, with conv2d's results") {
  // What an executable compiled where the vectors have another width holds: blocks of 8 or 5
  // output channels, or of 16 for double.
  const tensor x = random_tensor<float>({1, 6, 9, 10}, -1, 1, 31), w = random_tensor<float>({11, 6, 3, 3}, -1, 1, 32);
  const tensor bias = random_tensor<float>({11}, -1, 1, 33);
  const std::int64_t k = 6 * 3 * 3;
  for (const std::int64_t ob : {8, 5, 1}) {
    CAPTURE(ob);
    const tensor packed = tensor::empty({(11 + ob - 1) / ob * ob * k}, dtype::float32);
    kernels::detail::pack_direct_weights<float>(w.data<float>(), 11, k, ob, packed.data<float>());
    const packed_conv_layout l{11, 6, 3, 3, ob};
    const tensor out = tensor::empty({1, 11, 9, 10}, dtype::float32);
    conv2d_prepacked(x, packed, l, bias, conv(1, 1), out);
    CHECK(same_tensor(out, conv2d(x, w, bias, conv(1, 1))));
    const fused_expr e = fused_expr::parse("(relu x0)");
    conv2d_fused_prepacked(x, packed, l, bias, conv(1, 1), e, {}, out);
    const tensor fused = tensor::empty(out.shape(), out.type());
    conv2d_fused(x, w, bias, conv(1, 1), e, {}, fused);
    CHECK(same_tensor(out, fused));
  }
  // A packed weight that is not 64-byte aligned is read through the same fallback.
  const tensor packed = prepack_conv_weight(w);
  const tensor shifted = tensor::zeros({packed.numel() + 1}, dtype::float32).slice(0, 1, packed.numel() + 1);
  copy(packed, shifted);
  const tensor out = tensor::empty({1, 11, 9, 10}, dtype::float32);
  conv2d_prepacked(x, shifted, native_conv_layout(dtype::float32, 11, 6, 3, 3), bias, conv(1, 1), out);
  CHECK(same_tensor(out, conv2d(x, w, bias, conv(1, 1))));
}

TEST_CASE("conv2d_prepacked: the same results on two threads, split by positions, by blocks of channels or by rows") {
  // 80 output channels over 49 positions (ResNet's last stage, small): more blocks than tiles.
  // 3 channels of 64 x 64: the kernel with positions along the vectors, split by output rows.
  for (const auto& shape : {std::array<std::int64_t, 3>{16, 20, 32}, {24, 7, 80}, {3, 30, 5}, {3, 64, 40}}) {
    const std::int64_t c = shape[0], hw = shape[1], o = shape[2];  // not a structured binding: Clang 14 cannot capture one
    CAPTURE(o);
    const tensor x = random_tensor<float>({2, c, hw, hw}, -1, 1, 41), w = random_tensor<float>({o, c, 3, 3}, -1, 1, 42);
    const tensor packed = prepack_conv_weight(w);
    const packed_conv_layout l = native_conv_layout(dtype::float32, o, c, 3, 3);
    const tensor one = tensor::empty({2, o, hw, hw}, dtype::float32), two = tensor::empty({2, o, hw, hw}, dtype::float32);
    conv2d_prepacked(x, packed, l, {}, conv(1, 1), one);
    {
      const kiln_test::pool_threads scope(2);
      conv2d_prepacked(x, packed, l, {}, conv(1, 1), two);
    }
    CHECK(same_tensor(one, two));
    check_all_close(one.to_vector<float>(), reference_conv<float>(x, w, tensor(), conv(1, 1), hw, hw), 0, 4e-6 * double(c * 9 + 1));
  }
}

TEST_CASE("conv2d_prepacked: errors name the packed weight and its layout") {
  const tensor x = random_tensor<float>({1, 4, 8, 8}, -1, 1, 1), w = random_tensor<float>({6, 4, 3, 3}, -1, 1, 2);
  const tensor packed = prepack_conv_weight(w);
  const packed_conv_layout l = native_conv_layout(dtype::float32, 6, 4, 3, 3);
  const tensor out = tensor::empty({1, 6, 6, 6}, dtype::float32);
  const std::string size = std::to_string(packed.numel());
  CHECK(message_of([&] { conv2d_prepacked(x, packed, {6, 4, 3, 3, 0}, {}, {}, out); }) ==
        "kiln::kernels::conv2d_prepacked: bad packed layout: weight [6, 4, 3, 3] in blocks of 0 output channels");
  CHECK(message_of([&] { conv2d_prepacked(x, packed, {6, -4, 3, 3, 16}, {}, {}, out); }) ==
        "kiln::kernels::conv2d_prepacked: bad packed layout: weight [6, -4, 3, 3] in blocks of 16 output channels");
  CHECK(message_of([&] { conv2d_prepacked(x, packed, {std::int64_t(1) << 40, 1 << 20, 1 << 20, 1 << 20, 16}, {}, {}, out); }) ==
        "kiln::kernels::conv2d_prepacked: bad packed layout: weight [1099511627776, 1048576, 1048576, 1048576] in blocks of 16 output channels");
  CHECK(message_of([&] { conv2d_prepacked(x, packed, {6, 5, 3, 3, l.ob}, {}, {}, out); }).starts_with(
        "kiln::kernels::conv2d_prepacked: the packed weight must be a contiguous vector of "));
  CHECK(message_of([&] { conv2d_prepacked(x, random_tensor<float>({6, 4, 3, 3}, -1, 1, 2), l, {}, {}, out); }).ends_with(
        "] weight in blocks of " + std::to_string(l.ob) + " output channels, got float32[6, 4, 3, 3]"));
  CHECK(message_of([&] { conv2d_prepacked(x, tensor::zeros({packed.numel()}, dtype::int32), l, {}, {}, out); }) ==
        "kiln::kernels::conv2d_prepacked: the packed weight must be float32 or float64, got int32[" + size + "]");
  CHECK(message_of([&] { conv2d_prepacked(x, tensor(), l, {}, {}, out); }) == "kiln::kernels::conv2d_prepacked: the packed weight is undefined");
  CHECK(message_of([&] { conv2d_prepacked(x, packed, l, {}, conv(1, 0, 1, 2), out); }) ==
        "kiln::kernels::conv2d_prepacked: a prepacked weight serves one-group convolutions, got groups = 2");
  CHECK(message_of([&] { conv2d_prepacked(random_tensor<float>({1, 5, 8, 8}, -1, 1, 1), packed, l, {}, {}, out); }) ==
        "kiln::kernels::conv2d: channel mismatch: the data float32[1, 5, 8, 8] has 5 channels, but the weight float32[6, 4, 3, 3] expects 4 x 1 group(s) = 4");
  CHECK(message_of([&] { conv2d_prepacked(x, packed, l, {}, {}, tensor::from_storage(packed.data_storage(), packed.byte_offset(), dtype::float32, {1, 6, 6, 6})); }) ==
        "kiln::kernels::conv2d_prepacked: the output float32[1, 6, 6, 6] overlaps an input; write into a separate tensor");
  CHECK(message_of([&] { (void)packed_conv_layout_of("conv2d_prepacked", shape_vector{6, 4, 3, 3}); }) ==
        "kiln::kernels::conv2d_prepacked: the packed layout must have 5 values (O, C, KH, KW, ob), got 4");
  CHECK(message_of([&] { (void)prepack_conv_weight(random_tensor<float>({6, 4, 3}, -1, 1, 2)); }) ==
        "kiln::kernels::prepack_conv_weight: the weight must be OIHW (rank 4), got float32[6, 4, 3]");
  CHECK(message_of([&] { (void)prepack_conv_weight(tensor::zeros({6, 4, 3, 3}, dtype::int32)); }) ==
        "kiln::kernels::prepack_conv_weight: packs float32 and float64 weights, not int32");
}

TEST_CASE("conv2d_pointwise: X^T W^T on the packed W^T gives conv2d's sums, fused, strided, threaded, in another layout") {
  // Few positions (7 x 7, 14 x 14, 2 x 3, 1 x 1) and many (20 x 20), output channels that fill
  // whole vectors or not, two images, float and double.
  struct shape {
    std::int64_t c, h, w, o;
  };
  unsigned seed = 90;
  for (const shape s : {shape{48, 7, 7, 64}, {40, 14, 14, 72}, {17, 2, 3, 5}, {33, 1, 1, 40}, {8, 20, 20, 24}, {300, 7, 7, 96}}) {
    CAPTURE(s.c);
    CAPTURE(s.h);
    CAPTURE(s.o);
    const tensor x = random_tensor<float>({2, s.c, s.h, s.w}, -1, 1, seed++), w = random_tensor<float>({s.o, s.c, 1, 1}, -1, 1, seed++);
    const tensor bias = random_tensor<float>({s.o}, -1, 1, seed++), residual = random_tensor<float>({2, s.o, s.h, s.w}, -1, 1, seed++);
    const tensor packed = prepack_conv_weight_pointwise(w);
    const packed_weight_layout l = native_weight_layout(dtype::float32, s.c, s.o);
    const tensor want = conv2d(x, w, bias, {});
    const tensor out = tensor::empty(want.shape(), want.type());
    // The same sums in the same order as conv2d's W X, but for at most 4 positions (the small-M
    // products then sum in another order).
    const auto same = [&](const tensor& got, const tensor& expected) {
      if (s.h * s.w > 4) return same_tensor(got, expected);
      const std::vector<float> a = got.to_vector<float>(), b = expected.to_vector<float>();
      for (std::size_t i = 0; i < a.size(); ++i)
        if (std::abs(a[i] - b[i]) > 4e-6 * double(s.c + 1)) return false;
      return true;
    };
    conv2d_pointwise(x, packed, l, bias, {}, out);
    CHECK(same(out, want));
    check_all_close(out.to_vector<float>(), reference_conv<float>(x, w, bias, {}, s.h, s.w), 0, 4e-6 * double(s.c + 1));
    // Fused: relu(x0 + residual), against conv2d_fused.
    const fused_expr e = fused_expr::parse("(relu (add x0 x1))");
    const tensor fused = tensor::empty(want.shape(), want.type()), fused_want = tensor::empty(want.shape(), want.type());
    conv2d_fused_pointwise(x, packed, l, bias, {}, e, {residual}, fused);
    conv2d_fused(x, w, bias, {}, e, {residual}, fused_want);
    CHECK(same(fused, fused_want));
    // An input whose positions are not one apart (NHWC in memory), into a strided output.
    const tensor nhwc = permute_dims(x, {0, 2, 3, 1}).permute({0, 3, 1, 2});
    const tensor big = tensor::zeros({2, s.o, s.h, s.w * 2}, dtype::float32);
    const tensor strided = big.slice(3, 1, s.w * 2, 2);
    conv2d_pointwise(nhwc, packed, l, bias, {}, strided);
    CHECK(same(strided, want));
    // Two threads: the GEMM and the transposition shared out, the same bits.
    {
      const kiln_test::pool_threads scope(2);
      conv2d_fused_pointwise(x, packed, l, bias, {}, e, {residual}, fused);
    }
    CHECK(same(fused, fused_want));
  }
  // double
  const tensor xd = random_tensor<double>({1, 20, 7, 7}, -1, 1, 1), wd = random_tensor<double>({24, 20, 1, 1}, -1, 1, 2);
  const tensor outd = tensor::empty({1, 24, 7, 7}, dtype::float64);
  conv2d_pointwise(xd, prepack_conv_weight_pointwise(wd), native_weight_layout(dtype::float64, 20, 24), {}, {}, outd);
  CHECK(same_tensor(outd, conv2d(xd, wd, {}, {})));
  // A layout of another vector width (panels of 8 or 5 columns), or a weight not 64-byte
  // aligned: W unpacked first, conv2d's results.
  const tensor x = random_tensor<float>({1, 12, 7, 7}, -1, 1, 3), w = random_tensor<float>({20, 12, 1, 1}, -1, 1, 4);
  const tensor want = conv2d(x, w, {}, {});
  for (const std::int64_t nr : {8, 5}) {
    CAPTURE(nr);
    const packed_weight_layout l{12, 20, {nr, 12}};
    const tensor packed = tensor::empty({packed_b_size(12, 20, l.panels)}, dtype::float32);
    const tensor wt = w.view({20, 12}).permute({1, 0}).contiguous();
    std::fill_n(packed.data<float>(), packed.numel(), 0.0f);
    for (std::int64_t p = 0; p < 12; ++p)
      for (std::int64_t j = 0; j < 20; ++j) packed.data<float>()[packed_b_index(12, 20, l.panels, p, j)] = wt.data<float>()[p * 20 + j];
    const tensor out = tensor::empty({1, 20, 7, 7}, dtype::float32);
    conv2d_pointwise(x, packed, l, {}, {}, out);
    CHECK(same_tensor(out, want));
  }
  const tensor packed = prepack_conv_weight_pointwise(w);
  const tensor shifted = tensor::zeros({packed.numel() + 1}, dtype::float32).slice(0, 1, packed.numel() + 1);
  copy(packed, shifted);
  const tensor out = tensor::empty({1, 20, 7, 7}, dtype::float32);
  conv2d_pointwise(x, shifted, native_weight_layout(dtype::float32, 12, 20), {}, {}, out);
  CHECK(same_tensor(out, want));
}

TEST_CASE("conv2d_pointwise: errors name the geometry and the packed weight") {
  const tensor x = random_tensor<float>({1, 12, 7, 7}, -1, 1, 3), w = random_tensor<float>({20, 12, 1, 1}, -1, 1, 4);
  const tensor packed = prepack_conv_weight_pointwise(w);
  const packed_weight_layout l = native_weight_layout(dtype::float32, 12, 20);
  const tensor out = tensor::empty({1, 20, 7, 7}, dtype::float32);
  CHECK(message_of([&] { conv2d_pointwise(x, packed, l, {}, conv(2, 0), out); }) ==
        "kiln::kernels::conv2d_pointwise: serves 1 x 1 convolutions at stride 1 without padding in one group, got strides (2, 2), padding (0, 0, 0, 0), groups 1");
  CHECK(message_of([&] { conv2d_pointwise(x, packed, l, {}, conv(1, 1), out); }) ==
        "kiln::kernels::conv2d_pointwise: serves 1 x 1 convolutions at stride 1 without padding in one group, got strides (1, 1), padding (1, 1, 1, 1), groups 1");
  CHECK(message_of([&] { conv2d_pointwise(x, packed, {12, 400, l.panels}, {}, {}, out); }).starts_with(
        "kiln::kernels::conv2d_pointwise: the packed weight must be a contiguous vector of 12 x "));
  CHECK(message_of([&] { conv2d_pointwise(x, packed, {12, 20, {0, 12}}, {}, {}, out); }) ==
        "kiln::kernels::conv2d_pointwise: bad packed layout: K 12, N 20, panels of 0 columns in blocks of 12 rows");
  CHECK(message_of([&] { conv2d_pointwise(random_tensor<float>({1, 13, 7, 7}, -1, 1, 1), packed, l, {}, {}, out); }) ==
        "kiln::kernels::conv2d: channel mismatch: the data float32[1, 13, 7, 7] has 13 channels, but the weight float32[20, 12, 1, 1] expects 12 x 1 group(s) = 12");
  CHECK(message_of([&] { conv2d_pointwise(x, packed, l, {}, {}, tensor::empty({1, 20, 7, 6}, dtype::float32)); }) ==
        "kiln::kernels::conv2d_pointwise: the output must be float32[1, 20, 7, 7], got float32[1, 20, 7, 6]");
  CHECK(message_of([&] { (void)prepack_conv_weight_pointwise(random_tensor<float>({20, 12, 3, 3}, -1, 1, 2)); }) ==
        "kiln::kernels::prepack_conv_weight_pointwise: the weight must be [O, C, 1, 1], got float32[20, 12, 3, 3]");
}

TEST_CASE("prefer_pointwise_conv: few positions, and W X padding them more than X^T W^T pads the channels") {
  CHECK(pointwise_applies(1, 1, std::array<std::int64_t, 2>{1, 1}, std::array<std::int64_t, 4>{0, 0, 0, 0}, 1));
  CHECK(!pointwise_applies(1, 1, std::array<std::int64_t, 2>{2, 2}, std::array<std::int64_t, 4>{0, 0, 0, 0}, 1));
  CHECK(!pointwise_applies(3, 3, std::array<std::int64_t, 2>{1, 1}, std::array<std::int64_t, 4>{0, 0, 0, 0}, 1));
  CHECK(!pointwise_applies(1, 1, std::array<std::int64_t, 2>{1, 1}, std::array<std::int64_t, 4>{0, 0, 0, 0}, 2));
  // (The kernels' panel width is 8, 16 or 32 columns by instruction set, and may differ from this
  // file's: 128 channels and 64 positions fill whole panels at every width.)
  CHECK(prefer_pointwise_conv(1024, 128, 7, 7));    // 49 positions: whole panels of channels
  CHECK(!prefer_pointwise_conv(64, 128, 7, 7));     // too few input channels to pay for the transposition
  CHECK(!prefer_pointwise_conv(1024, 128, 1, 64));  // positions that fill whole panels
  CHECK(!prefer_pointwise_conv(1024, 128, 21, 20)); // more than 400 positions
  CHECK(!prefer_pointwise_conv(1024, 128, 3, 5));   // fewer than 16: W X is a small product there
  CHECK(!prefer_pointwise_conv(1024, 0, 7, 7));
}

TEST_CASE("conv2d: errors name the operands") {
  const tensor x = random_tensor<float>({1, 4, 8, 8}, -1, 1, 1), w = random_tensor<float>({6, 4, 3, 3}, -1, 1, 2);
  CHECK(message_of([&] { (void)conv2d(x, random_tensor<float>({6, 3, 3, 3}, -1, 1, 2)); }) ==
        "kiln::kernels::conv2d: channel mismatch: the data float32[1, 4, 8, 8] has 4 channels, but the weight float32[6, 3, 3, 3] expects 3 x 1 group(s) = 3");
  CHECK(message_of([&] { (void)conv2d(x, random_tensor<float>({6, 1, 3, 3}, -1, 1, 2), {}, conv(1, 0, 1, 4)); }) ==
        "kiln::kernels::conv2d: the weight float32[6, 1, 3, 3] has 6 output channels, which is not a multiple of groups = 4");
  CHECK(message_of([&] { (void)conv2d(x, w, {}, conv(1, 0, 1, 0)); }) == "kiln::kernels::conv2d: groups must be positive, got 0");
  CHECK(message_of([&] { (void)conv2d(x, w, {}, conv(0, 0)); }) == "kiln::kernels::conv2d: strides must be positive, got (0, 0)");
  CHECK(message_of([&] { (void)conv2d(x, w, {}, conv(1, -1)); }) == "kiln::kernels::conv2d: padding must not be negative, got (-1, -1, -1, -1)");
  CHECK(message_of([&] { (void)conv2d(x, w, {}, conv(1, 0, 4)); }) ==
        "kiln::kernels::conv2d: the convolution window (size 3, dilation 4) does not fit the input extent 8 with padding 0 + 0");
  CHECK(message_of([&] { (void)conv2d(x, w, random_tensor<float>({4}, -1, 1, 3)); }) ==
        "kiln::kernels::conv2d: the bias must be float32[6] (one per output channel), got float32[4]");
  CHECK(message_of([&] { (void)conv2d(x, random_tensor<double>({6, 4, 3, 3}, -1, 1, 2)); }) ==
        "kiln::kernels::conv2d: the weight float64[6, 4, 3, 3] must have the data's dtype float32");
  CHECK(message_of([&] { (void)conv2d(random_tensor<std::int32_t>({1, 4, 8, 8}, -1, 1, 1), w); }) ==
        "kiln::kernels::conv2d: needs float32 or float64 data, got int32[1, 4, 8, 8]");
  CHECK(message_of([&] { (void)conv2d(random_tensor<float>({4, 8, 8}, -1, 1, 1), w); }) ==
        "kiln::kernels::conv2d: the data must be NCHW (rank 4), got float32[4, 8, 8]");
  CHECK(message_of([&] { conv2d(x, w, {}, {}, tensor::empty({1, 6, 8, 8}, dtype::float32)); }) ==
        "kiln::kernels::conv2d: the output must be float32[1, 6, 6, 6], got float32[1, 6, 8, 8]");
  CHECK(message_of([&] { (void)padding4("conv2d", std::array<std::int64_t, 3>{1, 2, 3}); }) == "kiln::kernels::conv2d: padding must have 1, 2 or 4 values, got 3");
}

namespace {

/// Pooling by definition: taps inside the input only (max), divisor per the documented rule (avg).
template <class T, bool Max>
std::vector<T> reference_pool(const tensor& x, const pool2d_params& p, std::int64_t oh, std::int64_t ow) {
  const std::int64_t h = x.shape(2), w = x.shape(3);
  std::vector<T> out;
  for (std::int64_t n = 0; n < x.shape(0); ++n)
    for (std::int64_t c = 0; c < x.shape(1); ++c)
      for (std::int64_t y = 0; y < oh; ++y)
        for (std::int64_t xo = 0; xo < ow; ++xo) {
          double best = Max ? -std::numeric_limits<double>::infinity() : 0, sum = 0;
          bool nan = false;
          std::int64_t count = 0;
          for (std::int64_t i = 0; i < p.pool_size[0]; ++i)
            for (std::int64_t j = 0; j < p.pool_size[1]; ++j) {
              const std::int64_t iy = y * p.strides[0] - p.padding[0] + i * p.dilation[0];
              const std::int64_t ix = xo * p.strides[1] - p.padding[1] + j * p.dilation[1];
              const bool inside = iy >= 0 && iy < h && ix >= 0 && ix < w;
              const bool in_padded = iy >= -p.padding[0] && iy < h + p.padding[2] && ix >= -p.padding[1] && ix < w + p.padding[3];
              count += p.count_include_pad ? in_padded : inside;
              if (!inside) continue;
              const double v = double(at4<T>(x, n, c, iy, ix));
              nan = nan || std::isnan(v);
              best = std::max(best, v);
              sum += v;
            }
          if constexpr (Max) {
            T r = best == -std::numeric_limits<double>::infinity() && !std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::lowest() : T(best);
            if constexpr (std::numeric_limits<T>::has_quiet_NaN)
              if (nan) r = std::numeric_limits<T>::quiet_NaN();
            out.push_back(r);
          } else {
            out.push_back(T(sum / double(count)));
          }
        }
  return out;
}

pool2d_params pool(std::int64_t k, std::int64_t stride, std::int64_t pad, bool ceil_mode = false, bool include = false, std::int64_t dilation = 1) {
  pool2d_params p;
  p.pool_size = {k, k};
  p.strides = {stride, stride};
  p.padding = {pad, pad, pad, pad};
  p.dilation = {dilation, dilation};
  p.ceil_mode = ceil_mode;
  p.count_include_pad = include;
  return p;
}

template <class T>
void check_pools(const tensor& x, const pool2d_params& p, std::int64_t want_oh, std::int64_t want_ow) {
  CAPTURE(p.pool_size[0]);
  CAPTURE(p.strides[0]);
  CAPTURE(p.padding[0]);
  CAPTURE(p.ceil_mode);
  CAPTURE(p.count_include_pad);
  const tensor m = max_pool2d(x, p);
  REQUIRE(m.shape() == shape_vector{x.shape(0), x.shape(1), want_oh, want_ow});
  check_all_close(m.to_vector<T>(), reference_pool<T, true>(x, p, want_oh, want_ow));
  if constexpr (std::is_floating_point_v<T>) {
    const tensor a = avg_pool2d(x, p);
    check_all_close(a.to_vector<T>(), reference_pool<T, false>(x, p, want_oh, want_ow), 1e-6, 1e-7);
    // into a strided output
    const tensor big = tensor::zeros({x.shape(0), x.shape(1), want_oh, want_ow * 3}, x.type());
    const tensor out = big.slice(3, 0, want_ow * 3, 3);
    avg_pool2d(x, p, out);
    check_all_close(out.to_vector<T>(), reference_pool<T, false>(x, p, want_oh, want_ow), 1e-6, 1e-7);
  }
}

}  // namespace

TEST_CASE("max_pool2d and avg_pool2d: padding, ceil mode, dilation, count_include_pad, strided input") {
  const tensor x = random_tensor<float>({2, 3, 13, 22}, -1, 1, 4);
  check_pools<float>(x, pool(3, 2, 1), 7, 11);                 // the ResNet max pool
  check_pools<float>(x, pool(2, 2, 0), 6, 11);
  check_pools<float>(x, pool(2, 2, 0, true), 7, 11);           // ceil mode adds a partial window
  check_pools<float>(x, pool(3, 2, 1, true, true), 7, 12);
  check_pools<float>(x, pool(3, 1, 1, false, true), 13, 22);   // stride 1: the vector path
  check_pools<float>(x, pool(3, 1, 0, false, false, 2), 9, 18);
  check_pools<float>(x.permute({0, 1, 3, 2}), pool(3, 3, 1, true), 8, 5);
  check_pools<double>(random_tensor<double>({1, 2, 9, 40}, -1, 1, 5), pool(2, 1, 1), 10, 41);
  check_pools<std::int32_t>(random_tensor<std::int32_t>({1, 2, 9, 40}, -100, 100, 6), pool(3, 1, 1), 9, 40);
  check_pools<std::int8_t>(random_tensor<std::int8_t>({1, 2, 9, 9}, -100, 100, 7), pool(2, 2, 1, true), 5, 5);  // the sixth window would start in the padding
  // ceil mode: a window that would start in the trailing padding is dropped (PyTorch's rule).
  CHECK(max_pool2d(random_tensor<float>({1, 1, 5, 5}, -1, 1, 8), pool(2, 2, 1, true)).shape() == shape_vector{1, 1, 3, 3});
  // NaN propagates through max; a window over the padding alone gives -inf.
  tensor nan = random_tensor<float>({1, 1, 4, 20}, -1, 1, 9);
  nan.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  nan.data<float>()[25] = std::numeric_limits<float>::quiet_NaN();
  check_pools<float>(nan, pool(3, 1, 1), 4, 20);
  // Wide rows run four vectors at a time; a NaN in one of them is found there too.
  tensor wide_nan = random_tensor<float>({1, 1, 6, 150}, -1, 1, 12);
  wide_nan.data<float>()[150 + 70] = std::numeric_limits<float>::quiet_NaN();
  wide_nan.data<float>()[4 * 150 + 3] = std::numeric_limits<float>::quiet_NaN();
  check_pools<float>(wide_nan, pool(3, 1, 1), 6, 150);
  {
    const kiln_test::pool_threads scope(2);  // the planes shared out
    check_pools<float>(x, pool(3, 1, 1, false, true), 13, 22);
    check_pools<float>(random_tensor<float>({1, 2, 21, 150}, -1, 1, 11), pool(3, 2, 1, true), 11, 76);
    check_pools<float>(wide_nan, pool(2, 1, 0, false, false, 2), 4, 148);
  }
  // Rows shorter than a vector (read a vector at a time, running into the next rows, except
  // where that would pass x's end), rows a vector and a part long (the last vector overlapping
  // the one before), in the geometries of SqueezeNet's and GoogLeNet's pools; each call after
  // one of another geometry on the same thread.
  const auto ceil_out = [](std::int64_t n, std::int64_t k, std::int64_t s, std::int64_t pad) {  // PyTorch's rule
    const std::int64_t out = (n + 2 * pad - k + s - 1) / s + 1;
    return (out - 1) * s >= n + pad ? out - 1 : out;
  };
  for (const std::int64_t w : {7, 13, 14, 27, 55}) {
    CAPTURE(w);
    const tensor sq = random_tensor<float>({1, 5, w, w}, -1, 1, 13 + w);
    const std::int64_t half = ceil_out(w, 3, 2, 0);  // 3x3, stride 2, ceil mode
    check_pools<float>(sq, pool(3, 2, 0, true), half, half);
    check_pools<float>(sq, pool(3, 1, 1, true), w, w);
    check_pools<float>(sq, pool(2, 2, 0, true), ceil_out(w, 2, 2, 0), ceil_out(w, 2, 2, 0));
    check_pools<double>(random_tensor<double>({2, 3, w, w}, -1, 1, 14 + w), pool(3, 1, 1), w, w);
    check_pools<std::int32_t>(random_tensor<std::int32_t>({1, 3, w, w}, -100, 100, 15 + w), pool(3, 2, 0, true), half, half);
    check_pools<std::int8_t>(random_tensor<std::int8_t>({1, 3, w, w}, -100, 100, 16 + w), pool(3, 1, 1), w, w);
    // A NaN in the last columns of a row, and one in the rows a short row's vector runs into.
    tensor nan_tail = random_tensor<float>({1, 2, w, w}, -1, 1, 17 + w);
    nan_tail.data<float>()[w * w + 2 * w - 1] = std::numeric_limits<float>::quiet_NaN();
    nan_tail.data<float>()[2 * w * w - 1] = std::numeric_limits<float>::quiet_NaN();
    check_pools<float>(nan_tail, pool(3, 2, 0, true), half, half);
    check_pools<float>(nan_tail, pool(3, 1, 1), w, w);
    const kiln_test::pool_threads scope(2);
    check_pools<float>(sq, pool(3, 1, 1, true), w, w);
    check_pools<float>(sq.slice(3, 1, w), pool(3, 2, 1, true), ceil_out(w, 3, 2, 1), ceil_out(w - 1, 3, 2, 1));  // rows w apart
  }
  // Stride-1 float max pools that keep the plane's size take a small plane flat (GoogLeNet's
  // branch pools): windows of 3 and 5, dilation 2, padding on one side only, batches, planes
  // up to 64 x 64 (and one past), infinities and NaNs, two threads.
  {
    const tensor b = random_tensor<float>({2, 3, 7, 9}, -1, 1, 30);
    check_pools<float>(b, pool(3, 1, 1), 7, 9);
    check_pools<float>(b, pool(5, 1, 2), 7, 9);
    check_pools<float>(b, pool(3, 1, 2, false, false, 2), 7, 9);
    check_pools<double>(random_tensor<double>({2, 3, 5, 6}, -1, 1, 31), pool(3, 1, 1), 5, 6);
    pool2d_params upper = pool(2, 1, 0);
    upper.padding = {0, 0, 1, 1};  // ONNX's SAME_UPPER for a window of 2
    check_pools<float>(b, upper, 7, 9);
    upper.padding = {1, 1, 0, 0};  // SAME_LOWER
    check_pools<float>(b, upper, 7, 9);
    for (const std::int64_t side : {28, 56, 64, 65}) check_pools<float>(random_tensor<float>({1, 2, side, side}, -1, 1, 32 + side), pool(3, 1, 1), side, side);
    tensor inf = random_tensor<float>({1, 3, 6, 6}, -1, 1, 33);
    inf.data<float>()[7] = std::numeric_limits<float>::infinity();
    inf.data<float>()[8] = -std::numeric_limits<float>::infinity();
    inf.data<float>()[36 + 35] = std::numeric_limits<float>::quiet_NaN();
    check_pools<float>(inf, pool(3, 1, 1), 6, 6);
    const kiln_test::pool_threads scope(2);
    check_pools<float>(random_tensor<float>({1, 40, 14, 14}, -1, 1, 34), pool(3, 1, 1, true), 14, 14);
  }
  // The row path in more geometries: ResNet's 3x3/2 pool at 112, strides 3 and 2 x 3, dilation,
  // one-sided padding, an infinity and a NaN in the last element, planes of 140, two threads.
  {
    check_pools<float>(random_tensor<float>({1, 3, 112, 112}, -1, 1, 40), pool(3, 2, 1), 56, 56);
    const tensor b = random_tensor<float>({2, 3, 23, 40}, -1, 1, 41);
    check_pools<float>(b, pool(3, 3, 1, true), 8, 14);
    check_pools<float>(b, pool(3, 2, 2, false, false, 2), 12, 20);
    pool2d_params uneven = pool(3, 2, 1);
    uneven.strides = {2, 3};
    uneven.padding = {0, 1, 2, 0};
    check_pools<float>(b, uneven, 12, 13);
    check_pools<double>(random_tensor<double>({1, 2, 27, 27}, -1, 1, 42), pool(3, 2, 0, true), 13, 13);
    tensor odd = random_tensor<float>({1, 2, 27, 27}, -1, 1, 43);
    odd.data<float>()[5] = std::numeric_limits<float>::infinity();
    odd.data<float>()[729 + 27 * 26 + 26] = std::numeric_limits<float>::quiet_NaN();  // the last element
    check_pools<float>(odd, pool(3, 2, 0, true), 13, 13);
    check_pools<float>(random_tensor<float>({1, 2, 140, 140}, -1, 1, 44), pool(3, 2, 1), 70, 70);
    const kiln_test::pool_threads scope(2);
    check_pools<float>(random_tensor<float>({1, 9, 55, 55}, -1, 1, 45), pool(3, 2, 0, true), 27, 27);
    check_pools<float>(random_tensor<float>({1, 3, 140, 140}, -1, 1, 46), pool(3, 2, 1), 70, 70);
  }
  pool2d_params wide = pool(1, 1, 0);
  wide.padding = {0, 2, 0, 0};
  const tensor edge = max_pool2d(random_tensor<float>({1, 1, 1, 3}, -1, 1, 10), wide);
  CHECK(edge.to_vector<float>()[0] == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(avg_pool2d(random_tensor<float>({1, 1, 1, 3}, -1, 1, 10), wide).to_vector<float>()[0]));
}

TEST_CASE("max_pool2d three columns wide at stride 2: straight from the rows, every width, the window's edges, NaN in each column") {
  // Float pools of kw = 3, sw = 2 take their rows in place (`max_pool_3s2_plane`), W outputs
  // from the vectors at 0, W and 2 W along each window row (reaching W - 1 elements past the
  // window, into the next rows); the outputs whose window crosses a row's end, element by
  // element. Widths 1 to 70 (no vector, a short row's one, one and a part, several), windows 1
  // to 3 rows tall at vertical strides 1 and 2, no padding or 1, ceil mode.
  for (std::int64_t w = 1; w <= 70; ++w) {
    CAPTURE(w);
    const tensor x = random_tensor<float>({1, 2, 5, w}, -1, 1, 50 + w);
    for (const std::int64_t pad : {0, 1})
      for (const bool ceil_mode : {false, true}) {
        if (w + 2 * pad < 3) continue;
        for (const std::int64_t kh : {1, 2, 3})
          for (const std::int64_t sh : {1, 2}) {
            pool2d_params p = pool(3, 2, pad, ceil_mode);
            p.pool_size = {kh, 3};
            p.strides = {sh, 2};
            p.padding = {kh > 1 ? pad : 0, pad, kh > 1 ? pad : 0, pad};
            const auto extent = [&](std::int64_t n, std::int64_t k, std::int64_t s, std::int64_t pd) {
              std::int64_t out = (n + 2 * pd - k + (ceil_mode ? s - 1 : 0)) / s + 1;
              if (ceil_mode && (out - 1) * s >= n + pd) --out;  // PyTorch drops a window that starts in the padding
              return out;
            };
            const std::int64_t oh = extent(5, kh, sh, p.padding[0]), ow = extent(w, 3, 2, pad);
            CAPTURE(pad);
            CAPTURE(kh);
            CAPTURE(sh);
            const tensor m = max_pool2d(x, p);
            REQUIRE(m.shape() == shape_vector{1, 2, oh, ow});
            check_all_close(m.to_vector<float>(), reference_pool<float, true>(x, p, oh, ow));
          }
      }
  }
  // A NaN in each column of a middle row in turn (each lane of each vector, the columns only the
  // third tap reads, the last column), on rows of 40 and 55; and one in the very last element,
  // where the last vector cannot run past x's end.
  for (const std::int64_t w : {40, 55})
    for (std::int64_t col = 0; col < w; ++col) {
      CAPTURE(w);
      CAPTURE(col);
      tensor x = random_tensor<float>({1, 1, 5, w}, -1, 1, 60);
      x.data<float>()[2 * w + col] = std::numeric_limits<float>::quiet_NaN();
      const std::int64_t ow = (w - 3 + 1) / 2 + 1 - ((w - 3 + 1) / 2 * 2 >= w ? 1 : 0);
      check_all_close(max_pool2d(x, pool(3, 2, 0, true)).to_vector<float>(), reference_pool<float, true>(x, pool(3, 2, 0, true), 2, ow));
      check_all_close(max_pool2d(x, pool(3, 2, 1)).to_vector<float>(), reference_pool<float, true>(x, pool(3, 2, 1), 3, (w - 1) / 2 + 1));
    }
  tensor last = random_tensor<float>({1, 3, 9, 37}, -1, 1, 61);
  last.data<float>()[3 * 9 * 37 - 1] = std::numeric_limits<float>::quiet_NaN();
  check_all_close(max_pool2d(last, pool(3, 2, 1)).to_vector<float>(), reference_pool<float, true>(last, pool(3, 2, 1), 5, 19));
  // Rows apart by more than their width (a slice), channels shared out among two threads.
  const tensor wide = random_tensor<float>({1, 4, 33, 80}, -1, 1, 62);
  check_pools<float>(wide.slice(3, 3, 70), pool(3, 2, 1), 17, 34);
  const kiln_test::pool_threads scope(2);
  check_pools<float>(wide, pool(3, 2, 0, true), 16, 40);
}

TEST_CASE("global and adaptive average pooling") {
  const tensor x = random_tensor<float>({2, 3, 7, 9}, -1, 1, 11);
  const tensor g = global_avg_pool2d(x);
  REQUIRE(g.shape() == shape_vector{2, 3, 1, 1});
  std::vector<float> want;
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t c = 0; c < 3; ++c) {
      double s = 0;
      for (std::int64_t i = 0; i < 7; ++i)
        for (std::int64_t j = 0; j < 9; ++j) s += at4<float>(x, n, c, i, j);
      want.push_back(float(s / 63));
    }
  check_all_close(g.to_vector<float>(), want, 1e-6, 1e-7);
  check_all_close(adaptive_avg_pool2d(x, {1, 1}).to_vector<float>(), want, 1e-6, 1e-7);
  // Planes of 1, 49, 196 and 150 elements (a plain loop over the planes: whole blocks of four
  // vectors, single vectors, scalars), and planes apart by more than their size (a channel slice).
  for (const auto& planes : std::vector<std::array<std::int64_t, 3>>{{5, 1, 1}, {40, 7, 7}, {9, 14, 14}, {3, 10, 15}}) {
    const std::int64_t c = planes[0], h = planes[1], w = planes[2], size = h * w;
    CAPTURE(size);
    const tensor y = random_tensor<float>({2, c, h, w}, -1, 1, 12);
    const tensor sliced = random_tensor<float>({2, 2 * c, h, w}, -1, 1, 13).slice(1, 0, 2 * c, 2);
    for (const tensor& t : {y, sliced}) {
      std::vector<float> mean;
      for (std::int64_t n = 0; n < 2; ++n)
        for (std::int64_t k = 0; k < c; ++k) {
          double sum = 0;
          for (std::int64_t i = 0; i < h; ++i)
            for (std::int64_t j = 0; j < w; ++j) sum += at4<float>(t, n, k, i, j);
          mean.push_back(float(sum / double(h * w)));
        }
      check_all_close(global_avg_pool2d(t).to_vector<float>(), mean, 1e-6, 1e-6);
    }
  }
  // Bins that overlap (7 rows into 3 bins: [0, 3), [2, 5), [4, 7)) and the identity.
  const tensor a = adaptive_avg_pool2d(x, {3, 9});
  const auto av = a.to_vector<float>();
  const double bin = (double(at4<float>(x, 1, 2, 2, 4)) + at4<float>(x, 1, 2, 3, 4) + at4<float>(x, 1, 2, 4, 4)) / 3;
  CHECK(av[std::size_t(((1 * 3 + 2) * 3 + 1) * 9 + 4)] == doctest::Approx(bin).epsilon(1e-6));
  CHECK(same_tensor(adaptive_avg_pool2d(x, {7, 9}), x));
  CHECK(message_of([&] { global_avg_pool2d(x, tensor::empty({2, 3, 1}, dtype::float32)); }) ==
        "kiln::kernels::global_avg_pool2d: the output must be float32[2, 3, 1, 1], got float32[2, 3, 1]");
  CHECK(message_of([&] { (void)max_pool2d(x, pool(8, 1, 0)); }) ==
        "kiln::kernels::max_pool2d: the pooling window (size 8, dilation 1) does not fit the input extent 7 with padding 0 + 0");
  CHECK(message_of([&] { (void)avg_pool2d(random_tensor<std::int32_t>({1, 1, 4, 4}, 0, 9, 1), pool(2, 2, 0)); }) ==
        "kiln::kernels::avg_pool2d: does not take int32[1, 1, 4, 4] (float32 or float64 only)");
  CHECK(message_of([&] { (void)max_pool2d(x, pool(0, 1, 0)); }) == "kiln::kernels::max_pool2d: pool_size must be positive, got (0, 0)");
  CHECK(message_of([&] { (void)adaptive_avg_pool2d(x, {-1, 2}); }) == "kiln::kernels::adaptive_avg_pool2d: the output size must not be negative, got (-1, 2)");
}

// ---- conv2d_fused: the epilogue gives exactly what the separate kernels give ----------------------------

namespace {

void check_conv_fused(const conv_case& k, const char* text, const std::vector<shape_vector>& operand_shapes, unsigned seed,
                      bool nhwc_operands = false) {
  CAPTURE(runtime::shape_to_string(k.x));
  CAPTURE(runtime::shape_to_string(k.w));
  INFO("expression: ", std::string(text));
  const tensor x = random_tensor<float>(k.x, -1, 1, seed), w = random_tensor<float>(k.w, -1, 1, seed + 1);
  const tensor bias = k.bias ? random_tensor<float>({k.w[0]}, -1, 1, seed + 2) : tensor();
  const tensor y = conv2d(x, w, bias, k.p);
  std::vector<tensor> operands;
  for (const auto& s : operand_shapes) {
    shape_vector shape = s;
    if (shape.empty()) shape = y.shape();  // a residual of the output's shape
    tensor t = random_tensor<float>(shape, -1, 1, seed + 3 + unsigned(operands.size()));
    if (nhwc_operands && t.ndim() == 4) t = permute_dims(t, {0, 2, 3, 1}).permute({0, 3, 1, 2});  // NHWC in memory
    operands.push_back(t);
  }
  const fused_expr e = fused_expr::parse(text);
  std::vector<tensor> inputs{y};
  inputs.insert(inputs.end(), operands.begin(), operands.end());
  const std::vector<float> want = e.run(inputs).to_vector<float>();
  const tensor out = tensor::empty(y.shape(), y.type());
  conv2d_fused(x, w, bias, k.p, e, operands, out);
  CHECK(out.to_vector<float>() == want);
  if (k.p.groups == 1) {  // and with the weight packed ahead of time (the direct kernel's sums)
    const tensor packed = prepack_conv_weight(w);
    const packed_conv_layout l = native_conv_layout(dtype::float32, k.w[0], k.w[1], k.w[2], k.w[3]);
    const tensor product = tensor::empty(y.shape(), y.type());
    conv2d_prepacked(x, packed, l, bias, k.p, product);
    inputs[0] = product;
    conv2d_fused_prepacked(x, packed, l, bias, k.p, e, operands, out);
    CHECK(out.to_vector<float>() == e.run(inputs).to_vector<float>());
  }
}

}  // namespace

TEST_CASE("conv2d_fused: bias, activation, per-channel scale and residual per block, equal to the separate kernels") {
  const std::vector<conv_case> cases = {
      {{1, 3, 9, 11}, {4, 3, 3, 3}, conv(1, 1), true},          // 3x3
      {{2, 5, 13, 10}, {7, 5, 3, 3}, conv(2, 1), false},        // stride 2, batch 2
      {{1, 6, 8, 9}, {4, 6, 1, 1}, conv(1, 0), true},           // pointwise
      {{1, 4, 10, 10}, {6, 2, 3, 3}, conv(1, 1, 1, 2), true},   // two groups
      {{2, 8, 11, 13}, {8, 1, 3, 3}, conv(1, 1, 1, 8), true},   // depthwise
      {{1, 50, 9, 9}, {13, 50, 3, 3}, conv(1, 1), true},        // K crosses KC
      {{1, 2, 47, 53}, {3, 2, 3, 3}, conv(1, 1), false},        // N crosses NC
      {{1, 3, 5, 5}, {2, 3, 5, 5}, conv(1, 0), true},           // one output position
      {{2, 5, 34, 35}, {37, 5, 3, 3}, conv(2, 1), true},        // the direct kernel: 306 positions, 37 channels
      {{1, 4, 40, 41}, {40, 4, 3, 3}, conv(1, 1), true},        // 1,640 positions, 2 blocks of output channels
      {{2, 40, 1, 1}, {300, 40, 1, 1}, conv(1, 0), true},       // squeeze-and-excitation at one position: a matrix times
      {{1, 300, 1, 1}, {20, 300, 1, 1}, conv(1, 0), false},     //   a vector, by blocks of 256 channels
  };
  unsigned seed = 500;
  for (const auto& k : cases) {
    check_conv_fused(k, "(relu x0)", {}, seed);
    check_conv_fused(k, "(relu (add x0 x1))", {{}}, seed + 10);                          // + residual, then relu (ResNet)
    check_conv_fused(k, "(add (clip (multiply x0 x1) 0 6) x2)", {{k.w[0], 1, 1}, {}}, seed + 20);  // scale, relu6, residual
    check_conv_fused(k, "(add x0 x1)", {{}}, seed + 30, true);                           // an NHWC residual: applied after
    check_conv_fused(k, "(sigmoid (add x0 x1))", {{k.x[0], 1, 1, 1}}, seed + 40);        // one value per image
    // The forms an epilogue runs in one pass: a bias per channel and SiLU, hard-swish (either
    // operand first), a bias and a residual, two convolutions' sum (RegNet's shortcut).
    const shape_vector per_channel{k.w[0], 1, 1};
    check_conv_fused(k, "(multiply (add x0 x1) (sigmoid (add x0 x1)))", {per_channel}, seed + 41);
    check_conv_fused(k, "(multiply (add x0 x1) (clip (add (multiply (add x0 x1) 0.1666666716337204) 0.5) 0 1))", {per_channel}, seed + 42);
    check_conv_fused(k, "(multiply (clip (add 0.5 (multiply 0.2 (add x1 x0))) 0 1) (add x1 x0))", {per_channel}, seed + 43);
    check_conv_fused(k, "(add (add x0 x1) x2)", {per_channel, {}}, seed + 44);
    check_conv_fused(k, "(relu (add (add x0 x1) (add x2 x3)))", {per_channel, {}, per_channel}, seed + 45);
    check_conv_fused(k, "(clip (add x1 x0) 0 6)", {per_channel}, seed + 46);
    seed += 50;
  }
}

namespace {

/// conv2d_fused of x (shape `xs`) and w (shape `ws`) with the expression `text`, bit for bit
/// against conv2d and the expression run one after the other, on one and two threads: with the
/// convolution's own bias (`own_bias`), and an operand x1 of one value per channel, or per image
/// and channel (`per_image`). With `nan_input`, one input element is NaN: the outputs whose
/// window holds it are NaN in both.
template <class T>
void check_fused_bits(const shape_vector& xs, const shape_vector& ws, const conv2d_params& p, const char* text, bool own_bias, bool per_image,
                      unsigned seed, bool nan_input = false) {
  CAPTURE(runtime::shape_to_string(xs));
  CAPTURE(runtime::shape_to_string(ws));
  INFO("expression: ", std::string(text), own_bias ? ", the convolution's bias" : "", per_image ? ", an operand per image" : "",
       nan_input ? ", a NaN input" : "");
  tensor x = random_tensor<T>(xs, -1, 1, seed);
  const tensor w = random_tensor<T>(ws, -1, 1, seed + 1);
  if (nan_input) static_cast<T*>(x.data())[x.numel() / 3] = std::numeric_limits<T>::quiet_NaN();
  const tensor bias = own_bias ? random_tensor<T>({ws[0]}, -1, 1, seed + 2) : tensor();
  const tensor y = conv2d(x, w, bias, p);
  const fused_expr e = fused_expr::parse(text);
  std::vector<tensor> operands;
  if (e.num_inputs() > 1) operands.push_back(random_tensor<T>(per_image ? shape_vector{xs[0], ws[0], 1, 1} : shape_vector{ws[0], 1, 1}, -4, 4, seed + 3));
  std::vector<tensor> inputs{y};
  inputs.insert(inputs.end(), operands.begin(), operands.end());
  const std::vector<T> want = e.run(inputs).template to_vector<T>();
  for (const std::size_t threads : {1, 2}) {
    CAPTURE(threads);
    const pool_threads pool(threads);
    const tensor out = tensor::empty(y.shape(), y.type());
    conv2d_fused(x, w, bias, p, e, operands, out);
    const std::vector<T> got = out.template to_vector<T>();
    REQUIRE(got.size() == want.size());
    std::size_t differ = 0, nans = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      nans += std::isnan(want[i]);
      differ += std::isnan(got[i]) != std::isnan(want[i]) || (!std::isnan(want[i]) && got[i] != want[i]);
    }
    CHECK(differ == 0);
    CHECK((nans > 0) == nan_input);
  }
}

}  // namespace

TEST_CASE("conv2d_fused: a pointwise convolution's bias and activation applied in registers give the separate kernels' bits") {
  // A bias per channel (the convolution's own or an operand, one per image too) and relu, clip,
  // hard-sigmoid, hard-swish or nothing: the GEMM's micro-kernels apply them as they store. The
  // shapes reach each micro-kernel: whole MR x NR blocks, edge blocks through the buffer, blocks of
  // at most W columns, the short last rows (one row of 97 two column panels at a time), K in
  // several blocks (only the last one finishes), at one and two threads, float and double.
  struct pointwise {
    shape_vector x;
    std::int64_t o;
  };
  const std::vector<pointwise> shapes = {
      {{1, 16, 12, 12}, 96},  // N = 144: whole panels and an edge
      {{1, 24, 8, 8}, 97},    // 97 rows: a short last panel of one row over N = 64
      {{2, 7, 3, 5}, 13},     // N = 15: at most W columns, batch 2
      {{1, 700, 4, 6}, 30},   // K = 700: two blocks of K
      {{1, 9, 16, 20}, 40},   // N = 320
  };
  const char* texts[] = {"(relu x0)", "(clip x0 0 6)", "(clip (add x0 x1) 0 6)", "(relu (add x1 x0))", "(add x0 x1)",
                         "(clip (add (multiply (add x0 x1) 0.2) 0.5) 0 1)",
                         "(multiply (add x0 x1) (clip (add (multiply (add x0 x1) 0.1666666716337204) 0.5) 0 1))"};
  const auto check = [&]<class T>(type_tag<T>, const pointwise& s, const char* text, bool own_bias, bool per_image, unsigned seed) {
    CAPTURE(s.o);
    check_fused_bits<T>(s.x, {s.o, s.x[1], 1, 1}, conv(1, 0), text, own_bias, per_image, seed);
  };
  unsigned seed = 1200;
  for (const pointwise& s : shapes)
    for (const char* text : texts) {
      check(type_tag<float>{}, s, text, false, false, seed);
      check(type_tag<float>{}, s, text, true, false, seed + 4);
      if (s.x[0] > 1) check(type_tag<float>{}, s, text, false, true, seed + 8);
      seed += 10;
    }
  check(type_tag<double>{}, shapes[0], texts[2], false, false, 1300);
  check(type_tag<double>{}, shapes[1], texts[6], true, false, 1301);
  check(type_tag<double>{}, shapes[3], texts[1], true, false, 1302);
}

TEST_CASE("conv2d: depthwise planes of one to several vectors per row, 3x3 and 5x5 at strides 1 and 2, against the direct loop") {
  // The depthwise kernel's tiles: 4 rows by 2 vectors at stride 1 (3x3, 5x5), 4 rows of one
  // vector or 2 rows of two, else 4 vectors of a row, taken from the right; rows that end inside
  // a vector, heights that are not a multiple of 4, groups of several planes whose last plane
  // ends inside a vector, a channel multiplier, a window of more than 16 columns.
  std::vector<conv_case> cases;
  for (const std::int64_t w : {5, 7, 14, 16, 17, 31, 40, 56, 70})
    for (const std::int64_t k : {3, 5})
      for (const std::int64_t stride : {1, 2}) {
        const std::int64_t h = 3 + (w + k + stride) % 7;
        cases.push_back({{1, 6, h, w}, {6, 1, k, k}, conv(stride, k / 2, 1, 6), (w + k) % 2 == 0});
      }
  cases.push_back({{2, 3, 9, 21}, {6, 1, 3, 3}, conv(1, 1, 1, 3), true});   // multiplier 2, batch 2
  cases.push_back({{1, 4, 6, 40}, {4, 1, 1, 17}, conv(1, 8, 1, 4), false});  // 17 columns
  cases.push_back({{1, 5, 12, 12}, {5, 1, 3, 3}, conv(3, 0, 1, 5), true});   // stride 3, no padding
  cases.push_back({{1, 64, 7, 7}, {64, 1, 3, 3}, conv(1, 1, 1, 64), true});  // 16 planes of 49 per group
  // The flat form (stride 1 or 2, a 3x3 or 5x5 window padded by half, the input S times the
  // output): planes of one row, one column, one element, rows shorter than a vector, stride 2 on
  // rows of 2 to 40 columns, a channel multiplier, and planes shorter than a vector in a group.
  for (const auto& [h, w, k, stride] : std::vector<std::array<std::int64_t, 4>>{
           {1, 9, 3, 1}, {9, 1, 3, 1}, {1, 1, 5, 1}, {3, 2, 5, 1}, {14, 14, 3, 2}, {8, 28, 5, 2}, {2, 2, 3, 2}, {6, 40, 3, 2}, {4, 14, 5, 2}, {2, 4, 3, 1}})
    cases.push_back({{1, 5, h, w}, {5, 1, k, k}, conv(stride, k / 2, 1, 5), (h + w) % 2 == 0});
  cases.push_back({{2, 3, 10, 6}, {6, 1, 5, 5}, conv(2, 2, 1, 3), true});  // stride 2, multiplier 2, batch 2
  cases.push_back({{1, 40, 2, 3}, {40, 1, 3, 3}, conv(1, 1, 1, 40), false});  // 16 planes of 6 per group
  unsigned seed = 700;
  for (const auto& k : cases) {
    check_conv<float>(k, seed, false);
    check_conv<float>(k, seed + 1, true);
    seed += 3;
  }
  check_conv<double>(cases[0], 800, false);
  check_conv<double>(cases[14], 801, true);
  check_conv<double>(cases[cases.size() - 1], 802, false);
  check_conv<double>(cases[cases.size() - 2], 803, true);
  // With an epilogue over each group of planes, and a residual read along the planes.
  for (const std::size_t i : {std::size_t(1), std::size_t(9), cases.size() - 2, cases.size() - 1}) {
    check_conv_fused(cases[i], "(clip x0 0 6)", {}, unsigned(900 + i));
    check_conv_fused(cases[i], "(relu (add x0 x1))", {{}}, unsigned(950 + i));
    check_conv_fused(cases[i], "(add x0 x1)", {{}}, unsigned(990 + i), true);
  }
}

TEST_CASE("conv2d_fused: a depthwise convolution's epilogue applied as its kernels store gives the separate kernels' bits") {
  // The depthwise kernels finish each vector as they store it where the expression is relu, clip
  // or nothing of x0, or of x0 plus one value per channel (per image too); hard-sigmoid and
  // hard-swish run as a pass over each group. Both forms of the kernel: the flat one (strides 1
  // and 2, 3x3 and 5x5 padded by half; planes of 7 x 7, 14 x 14, rows longer than a vector) and
  // the padded-plane one (stride 3, dilation, no padding), groups of several planes whose last
  // vector runs into the next plane, a channel multiplier, batch 2, one and two threads, float
  // and double; against conv2d and the expression run one after the other.
  struct depthwise {
    shape_vector x, w;
    conv2d_params p;
  };
  const std::vector<depthwise> shapes = {
      {{1, 32, 7, 7}, {32, 1, 3, 3}, conv(1, 1, 1, 32)},     // flat, stride 1, 16 planes of 49 per group
      {{1, 24, 14, 14}, {24, 1, 5, 5}, conv(2, 2, 1, 24)},   // flat, stride 2, 5x5
      {{2, 3, 10, 40}, {6, 1, 3, 3}, conv(1, 1, 1, 3)},      // flat, multiplier 2, batch 2, rows of 40
      {{1, 5, 12, 12}, {5, 1, 3, 3}, conv(3, 0, 1, 5)},      // padded plane: stride 3, no padding
      {{1, 6, 9, 35}, {6, 1, 3, 3}, conv(1, 2, 2, 6)},       // padded plane: dilation 2
      {{2, 4, 11, 20}, {4, 1, 5, 5}, conv(1, 0, 1, 4)},      // padded plane, 5x5 at stride 1, unpadded
  };
  const char* texts[] = {"(relu x0)", "(clip x0 0 6)", "(clip (add x0 x1) 0 6)", "(relu (add x1 x0))", "(add x0 x1)",
                         "(multiply (add x0 x1) (clip (add (multiply (add x0 x1) 0.1666666716337204) 0.5) 0 1))"};
  const auto check = [&]<class T>(type_tag<T>, const depthwise& s, const char* text, bool own_bias, bool per_image, unsigned seed) {
    check_fused_bits<T>(s.x, s.w, s.p, text, own_bias, per_image, seed);
  };
  unsigned seed = 1400;
  for (const depthwise& s : shapes)
    for (const char* text : texts) {
      check(type_tag<float>{}, s, text, false, false, seed);
      check(type_tag<float>{}, s, text, true, false, seed + 4);
      if (s.x[0] > 1) check(type_tag<float>{}, s, text, true, true, seed + 8);
      seed += 10;
    }
  check(type_tag<double>{}, shapes[0], texts[2], true, false, 1500);
  check(type_tag<double>{}, shapes[1], texts[1], false, false, 1501);
  check(type_tag<double>{}, shapes[4], texts[3], true, false, 1502);
}

TEST_CASE("conv2d_fused: a direct convolution's epilogue applied as it stores gives the separate kernels' bits") {
  // The direct kernels (a network's first layer with its positions along the vectors, and the
  // blocked kernel, which finishes its tiles in registers before it transposes them) finish each
  // value where the expression is relu, clip or nothing of x0, or of x0 plus one value per
  // channel; hard-sigmoid and hard-swish run as a pass afterwards. Strides 1 and 2, 3x3 and 7x7,
  // partial groups of channels, rows of whole and partial vectors, batch 2, one and two threads,
  // float and double, a NaN input (relu and clip keep it); against conv2d and the expression run
  // one after the other.
  struct direct {
    shape_vector x, w;
    conv2d_params p;
  };
  const std::vector<direct> shapes = {
      {{1, 3, 20, 40}, {16, 3, 3, 3}, conv(1, 1)},   // positions along the vectors (few taps, rows of 40)
      {{1, 3, 64, 80}, {20, 3, 7, 7}, conv(2, 3)},   // ResNet's first layer's form, 20 channels
      {{2, 3, 16, 36}, {8, 3, 3, 3}, conv(1, 1)},    // batch 2
      {{1, 16, 20, 20}, {40, 16, 3, 3}, conv(1, 1)},  // the blocked kernel (rows of 20 at AVX-512)
      {{1, 32, 18, 18}, {24, 32, 3, 3}, conv(1, 1)},  // the blocked kernel: 288 taps
      {{2, 20, 33, 33}, {70, 20, 3, 3}, conv(2, 1)},  // stride 2, 70 channels, batch 2
      {{2, 16, 7, 55}, {20, 16, 3, 3}, conv(1, 1)},   // positions along the vectors through rows of 55
  };
  const char* texts[] = {"(relu x0)", "(clip x0 0 6)", "(clip (add x0 x1) 0 6)", "(relu (add x1 x0))", "(add x0 x1)",
                         "(multiply (add x0 x1) (clip (add (multiply (add x0 x1) 0.1666666716337204) 0.5) 0 1))"};
  unsigned seed = 1600;
  for (const direct& s : shapes)
    for (const char* text : texts) {
      check_fused_bits<float>(s.x, s.w, s.p, text, false, false, seed);
      check_fused_bits<float>(s.x, s.w, s.p, text, true, false, seed + 4);
      if (s.x[0] > 1) check_fused_bits<float>(s.x, s.w, s.p, text, true, true, seed + 8);
      check_fused_bits<float>(s.x, s.w, s.p, text, true, false, seed + 9, true);
      seed += 10;
    }
  check_fused_bits<double>(shapes[0].x, shapes[0].w, shapes[0].p, texts[2], true, false, 1700);
  check_fused_bits<double>(shapes[4].x, shapes[4].w, shapes[4].p, texts[1], true, false, 1701);
}

TEST_CASE("conv2d_fused: operands that do not fit the output are clear errors") {
  const tensor x = random_tensor<float>({1, 3, 8, 8}, -1, 1, 1), w = random_tensor<float>({4, 3, 3, 3}, -1, 1, 2);
  const tensor out = tensor::empty({1, 4, 6, 6}, dtype::float32);
  CHECK(message_of([&] { conv2d_fused(x, w, {}, {}, fused_expr::parse("(add x0 x1)"), {random_tensor<float>({4}, -1, 1, 3)}, out); }) ==
        "kiln::kernels::conv2d_fused: epilogue operand x1 float32[4] does not broadcast to the result's shape float32[1, 4, 6, 6]");
  CHECK(message_of([&] { conv2d_fused(x, w, {}, {}, fused_expr::parse("(add x0 x2)"), {out}, out); }) ==
        "kiln::kernels::conv2d_fused: the epilogue (add x0 x2) reads 3 inputs (x0 is the kernel's result), 2 given");
}

namespace {

/// The transposed convolution as its definition: every input element scatters x * w into the output.
template <class T>
std::vector<double> reference_conv_transpose(const tensor& x, const tensor& w, const conv2d_transpose_params& p, std::int64_t oh, std::int64_t ow) {
  const std::int64_t n = x.shape(0), c = x.shape(1), h = x.shape(2), wd = x.shape(3), og = w.shape(1), kh = w.shape(2), kw = w.shape(3);
  const std::int64_t cg = c / p.groups, o = og * p.groups;
  std::vector<double> out(std::size_t(n * o * oh * ow), 0.0);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t ci = 0; ci < c; ++ci)
      for (std::int64_t y = 0; y < h; ++y)
        for (std::int64_t xi = 0; xi < wd; ++xi)
          for (std::int64_t co = 0; co < og; ++co)
            for (std::int64_t i = 0; i < kh; ++i)
              for (std::int64_t j = 0; j < kw; ++j) {
                const std::int64_t oy = y * p.strides[0] + i * p.dilation[0] - p.padding[0];
                const std::int64_t ox = xi * p.strides[1] + j * p.dilation[1] - p.padding[1];
                if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
                const std::int64_t oc = ci / cg * og + co;
                out[std::size_t(((b * o + oc) * oh + oy) * ow + ox)] += double(at4<T>(x, b, ci, y, xi)) * double(at4<T>(w, ci, co, i, j));
              }
  return out;
}

}  // namespace

TEST_CASE("conv2d_transpose: strides, padding, output padding, dilation, groups, against the scatter loop") {
  struct tcase {
    shape_vector x, w;
    conv2d_transpose_params p;
  };
  const std::vector<tcase> cases = {
      {{1, 1, 3, 3}, {1, 2, 3, 3}, {}},
      {{2, 3, 4, 5}, {3, 4, 3, 3}, {{2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 1}},
      {{1, 2, 5, 4}, {2, 3, 2, 4}, {{3, 2}, {0, 2, 1, 0}, {2, 1}, {1, 2}, 1}},
      {{1, 4, 6, 6}, {4, 3, 3, 3}, {{1, 1}, {0, 0, 0, 0}, {0, 0}, {2, 2}, 2}},
      {{1, 6, 3, 7}, {6, 1, 5, 3}, {{2, 1}, {2, 1, 2, 1}, {1, 0}, {1, 1}, 6}},
      {{0, 2, 3, 3}, {2, 2, 3, 3}, {}},
  };
  unsigned seed = 40;
  for (const auto& k : cases) {
    CAPTURE(runtime::shape_to_string(k.x));
    const tensor x = random_tensor<float>(k.x, -1, 1, seed), w = random_tensor<float>(k.w, -1, 1, seed + 1);
    const tensor y = conv2d_transpose(x, w, k.p);
    const auto want = reference_conv_transpose<float>(x, w, k.p, y.shape(2), y.shape(3));
    const double taps = double(k.w[2] * k.w[3] * k.x[1]);
    check_all_close(y.to_vector<float>(), std::vector<float>(want.begin(), want.end()), 0, 4e-6 * (taps + 1));
    // strided input and output
    const tensor xs = permute_dims(x, {0, 2, 3, 1}).permute({0, 3, 1, 2});
    const tensor big = tensor::zeros({y.shape(0), y.shape(1), y.shape(2), y.shape(3) * 2}, y.type()), out = big.slice(3, 0, y.shape(3) * 2, 2);
    conv2d_transpose(xs, w, k.p, out);
    check_all_close(out.to_vector<float>(), y.to_vector<float>(), 0, 0);
    const tensor xd = random_tensor<double>(k.x, -1, 1, seed), wd = random_tensor<double>(k.w, -1, 1, seed + 1);
    check_all_close(conv2d_transpose(xd, wd, k.p).to_vector<double>(), reference_conv_transpose<double>(xd, wd, k.p, y.shape(2), y.shape(3)), 0,
                    1e-13 * (taps + 1));
    seed += 2;
  }
  // the ONNX specification's example: ones(1, 2, 3, 3) windows over 0..8, the full 5x5 output
  const tensor x = tensor::from_values<float>({1, 1, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  const tensor y = conv2d_transpose(x, tensor::from_values<float>({1, 2, 3, 3}, std::vector<float>(18, 1.0f)));
  CHECK(y.shape() == shape_vector{1, 2, 5, 5});
  CHECK(y.slice(1, 0, 1).contiguous().to_vector<float>() ==
        std::vector<float>{0, 1, 3, 3, 2, 3, 8, 15, 12, 7, 9, 21, 36, 27, 15, 9, 20, 33, 24, 13, 6, 13, 21, 15, 8});
}

TEST_CASE("conv2d_transpose: errors name the operands") {
  const tensor x = tensor::zeros({1, 4, 3, 3}, dtype::float32);
  CHECK(message_of([&] { (void)conv2d_transpose(x, tensor::zeros({3, 2, 3, 3}, dtype::float32)); }) ==
        "kiln::kernels::conv2d_transpose: channel mismatch: the data float32[1, 4, 3, 3] has 4 channels, but the weight float32[3, 2, 3, 3] has 3 input "
        "channels");
  conv2d_transpose_params p;
  p.groups = 3;
  CHECK(message_of([&] { (void)conv2d_transpose(x, tensor::zeros({4, 2, 3, 3}, dtype::float32), p); }) ==
        "kiln::kernels::conv2d_transpose: the data's 4 channels are not a multiple of groups = 3");
  p = {};
  p.output_padding = {1, 0};
  CHECK(message_of([&] { (void)conv2d_transpose(x, tensor::zeros({4, 2, 3, 3}, dtype::float32), p); }) ==
        "kiln::kernels::conv2d_transpose: output padding 1 must be smaller than the stride 1 or the dilation 1");
  p = {};
  p.padding = {3, 0, 3, 0};
  CHECK(message_of([&] { (void)conv2d_transpose(x, tensor::zeros({4, 2, 3, 3}, dtype::float32), p); }) ==
        "kiln::kernels::conv2d_transpose: the padding crops the whole output of float32[1, 4, 3, 3] with the weight float32[4, 2, 3, 3]");
  p = {};
  p.strides = {std::int64_t(1) << 62, 1};
  CHECK(message_of([&] { (void)conv2d_transpose(x, tensor::zeros({4, 2, 3, 3}, dtype::float32), p); }) ==
        "kiln::kernels::conv2d_transpose: the output extent of float32[1, 4, 3, 3] overflows");
  CHECK(message_of([&] { (void)conv2d_transpose(tensor::zeros({1, 4, 3, 3}, dtype::int32), tensor::zeros({4, 2, 3, 3}, dtype::int32)); }) ==
        "kiln::kernels::conv2d_transpose: needs float32 or float64 data, got int32[1, 4, 3, 3]");
  CHECK(message_of([&] { conv2d_transpose(x, tensor::zeros({4, 2, 3, 3}, dtype::float32), {}, tensor::zeros({1, 2, 5, 4}, dtype::float32)); }) ==
        "kiln::kernels::conv2d_transpose: the output must be float32[1, 2, 5, 5], got float32[1, 2, 5, 4]");
}
