// SPDX-License-Identifier: Apache-2.0
// conv2d_winograd (F(2x2, 3x3) and F(4x4, 3x3), the weight transformed ahead of time) against the
// textbook convolution in double, on the shapes its chunks, panels and edges make different: output
// sizes that are and are not multiples of the tile, padding 0, 1, 2 and uneven, chunks of one tile
// row and of many, more tiles than the GEMM reads A in place for, channel counts off the vector
// width, batches, float64, threads.
//
// Tolerance: the transforms combine up to 4 (F(2x2)) or 6 (F(4x4), coefficients up to 8) inputs
// before multiplying and as many products after, so an output's rounding error is a few times the
// direct kernel's: 2e-5 * (C * 9 + 1) for F(2x2) and 1e-4 * (C * 9 + 1) for F(4x4) on float32
// inputs in [-1, 1] (the direct kernel's tests use 4e-6); 5e-13 and 5e-12 for float64.
#include <kiln/kernels/nn.hpp>
#include <kiln/kernels/parallel.hpp>

#include "../common/message_of.hpp"
#include "../common/pool_threads.hpp"
#include "conv_reference.hpp"
#include "reference.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

using namespace kiln;
using namespace kiln::kernels;
using namespace kiln_test;

namespace {

conv2d_params pad(std::int64_t top, std::int64_t left, std::int64_t bottom, std::int64_t right) {
  conv2d_params p;
  p.padding = {top, left, bottom, right};
  return p;
}

/// The tolerance for an output of C input channels: see the top of the file.
template <class T>
double tolerance(std::int64_t c, std::int64_t m) {
  return (std::is_same_v<T, float> ? (m == 2 ? 2e-5 : 1e-4) : (m == 2 ? 5e-13 : 5e-12)) * double(c * 9 + 1);
}

/// The layout prepack_conv_weight_winograd writes for weight `w` and tile size m.
winograd_conv_layout native(const tensor& w, std::int64_t m) { return native_winograd_layout(w.type(), w.shape(0), w.shape(1), m); }

/// `w` transformed in layout `l`, which need not be this build's (as another vector width packs it).
template <class T>
tensor transform_in(const tensor& w, const winograd_conv_layout& l) {
  const tensor out = tensor::empty({kiln::kernels::detail::winograd_weight_size("test", l)}, w.type());
  const tensor wt = w.contiguous();
  if (l.m == 2) kiln::kernels::detail::winograd_weights<2, T>(wt.data<T>(), l.o, l.c, {l.mr, l.kc}, out.data<T>());
  else kiln::kernels::detail::winograd_weights<4, T>(wt.data<T>(), l.o, l.c, {l.mr, l.kc}, out.data<T>());
  return out;
}

template <class T>
void check_winograd(std::int64_t m, const shape_vector& xs, std::int64_t o, const conv2d_params& p, bool bias, unsigned seed) {
  CAPTURE(m);
  CAPTURE(runtime::shape_to_string(xs));
  CAPTURE(o);
  CAPTURE(p.padding[0]);
  CAPTURE(p.padding[1]);
  CAPTURE(p.padding[2]);
  CAPTURE(p.padding[3]);
  const tensor x = random_tensor<T>(xs, -1, 1, seed), w = random_tensor<T>({o, xs[1], 3, 3}, -1, 1, seed + 1);
  const tensor b = bias ? random_tensor<T>({o}, -1, 1, seed + 2) : tensor();
  const tensor y = conv2d(x, w, b, p);
  const tensor packed = prepack_conv_weight_winograd(w, m);
  const winograd_conv_layout l = native(w, m);
  REQUIRE(packed.shape() == shape_vector{(m + 2) * (m + 2) * ((o + l.mr - 1) / l.mr * l.mr) * xs[1]});
  const tensor out = tensor::empty(y.shape(), y.type());
  std::fill(out.data<T>(), out.data<T>() + out.numel(), T(7));  // every element must be written
  conv2d_winograd(x, packed, l, b, p, out);
  check_all_close(out.to_vector<T>(), reference_conv<T>(x, w, b, p, y.shape(2), y.shape(3)), 0, tolerance<T>(xs[1], m));
  // Transformed in another build's layout (panels of the other vector width, blocks of 5 input
  // channels): repacked on the call, the same result (transform_in is compiled here, for the
  // test's level, which need not be the kernels').
  const winograd_conv_layout other{o, xs[1], m, l.mr == 12 ? 6 : 12, 5};
  const tensor again = tensor::empty(y.shape(), y.type());
  conv2d_winograd(x, transform_in<T>(w, other), other, b, p, again);
  if (across_levels<T>() == 0)
    CHECK(same_tensor(again, out));
  else
    check_all_close(again.to_vector<T>(), out.to_vector<T>(), 0, tolerance<T>(xs[1], m));
}

void check_shapes(std::int64_t m) {
  unsigned seed = 900;
  check_winograd<float>(m, {1, 4, 6, 6}, 5, pad(1, 1, 1, 1), true, seed += 3);      // 3 x 3 tiles
  check_winograd<float>(m, {1, 3, 7, 9}, 4, pad(1, 1, 1, 1), false, seed += 3);     // odd rows and columns: half tiles
  check_winograd<float>(m, {1, 6, 8, 7}, 3, pad(0, 0, 0, 0), true, seed += 3);      // no padding: 6 x 5 output
  check_winograd<float>(m, {1, 5, 9, 10}, 6, pad(2, 2, 2, 2), true, seed += 3);     // padding 2: 11 x 12
  check_winograd<float>(m, {1, 5, 9, 10}, 6, pad(0, 2, 1, 0), true, seed += 3);     // uneven padding
  check_winograd<float>(m, {1, 2, 3, 3}, 2, pad(0, 0, 0, 0), true, seed += 3);      // one output
  check_winograd<float>(m, {2, 17, 30, 26}, 19, pad(1, 1, 1, 1), true, seed += 3);  // batch 2, channels off the vector width, several chunks
  check_winograd<float>(m, {1, 3, 5, 300}, 4, pad(1, 1, 1, 1), true, seed += 3);    // a tile row of 150: a chunk past 4 panels (A packed)
  check_winograd<float>(m, {1, 40, 20, 20}, 70, pad(1, 1, 1, 1), true, seed += 3);  // 70 channels: blocks of output channels
  check_winograd<float>(m, {1, 400, 4, 4}, 3, pad(1, 1, 1, 1), false, seed += 3);   // K past the GEMM's KC: two blocks of V
  check_winograd<float>(m, {1, 3, 32, 32}, 300, pad(1, 1, 1, 1), true, seed += 3);  // 64-tile chunks x 300 channels: several blocks of output channels
  check_winograd<double>(m, {1, 7, 11, 12}, 9, pad(1, 1, 1, 1), true, seed += 3);
  check_winograd<double>(m, {2, 20, 9, 8}, 33, pad(1, 0, 2, 1), true, seed += 3);
}

void check_threads(std::int64_t m) {
  CAPTURE(m);
  const tensor x = random_tensor<float>({2, 12, 40, 40}, -1, 1, 950), w = random_tensor<float>({24, 12, 3, 3}, -1, 1, 951);
  const tensor packed = prepack_conv_weight_winograd(w, m);
  const conv2d_params p = pad(1, 1, 1, 1);
  const tensor one = tensor::empty({2, 24, 40, 40}, dtype::float32), two = tensor::empty({2, 24, 40, 40}, dtype::float32);
  conv2d_winograd(x, packed, native(w, m), {}, p, one);
  {
    const kiln_test::pool_threads scope(2);
    conv2d_winograd(x, packed, native(w, m), {}, p, two);
  }
  CHECK(same_tensor(one, two));
  check_all_close(one.to_vector<float>(), reference_conv<float>(x, w, tensor(), p, 40, 40), 0, tolerance<float>(12, m));
  // NHWC in memory, read through strides; into every other column of a wider output.
  const tensor nhwc = permute_dims(x, {0, 2, 3, 1}).permute({0, 3, 1, 2});
  const tensor big = tensor::zeros({2, 24, 40, 80}, dtype::float32), out = big.slice(3, 1, 80, 2);
  conv2d_winograd(nhwc, packed, native(w, m), {}, p, out);
  CHECK(same_tensor(out, one));
}

// Two and three threads on 7 x 7 tiles (the last column of tiles half outside the output for
// F(4x4)): the same outputs and epilogue as one thread's, every element written once.
void check_few_tiles(std::int64_t m, std::int64_t n, std::int64_t o) {
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(o);
  const std::int64_t h = m == 2 ? 14 : 28, w = m == 2 ? 13 : 26;
  const tensor x = random_tensor<float>({n, 20, h, w}, -1, 1, 980), wt = random_tensor<float>({o, 20, 3, 3}, -1, 1, 981);
  const tensor bias = random_tensor<float>({o}, -1, 1, 982), residual = random_tensor<float>({n, o, h, w}, -1, 1, 983);
  const tensor packed = prepack_conv_weight_winograd(wt, m);
  const conv2d_params p = pad(1, 1, 1, 1);
  const fused_expr e = fused_expr::parse("(relu (add x0 x1))");
  const tensor one = tensor::empty({n, o, h, w}, dtype::float32), fused_one = tensor::empty({n, o, h, w}, dtype::float32);
  conv2d_winograd(x, packed, native(wt, m), bias, p, one);
  conv2d_fused_winograd(x, packed, native(wt, m), bias, p, e, {residual}, fused_one);
  check_all_close(one.to_vector<float>(), reference_conv<float>(x, wt, bias, p, h, w), 0, tolerance<float>(20, m));
  CHECK(same_tensor(fused_one, e.run({one, residual})));
  for (const std::size_t threads : {2, 3}) {
    CAPTURE(threads);
    const kiln_test::pool_threads scope(threads);
    const tensor out = tensor::empty({n, o, h, w}, dtype::float32), fused = tensor::empty({n, o, h, w}, dtype::float32);
    std::fill(out.data<float>(), out.data<float>() + out.numel(), 7.0f);
    std::fill(fused.data<float>(), fused.data<float>() + fused.numel(), 7.0f);
    conv2d_winograd(x, packed, native(wt, m), bias, p, out);
    conv2d_fused_winograd(x, packed, native(wt, m), bias, p, e, {residual}, fused);
    CHECK(same_tensor(out, one));
    CHECK(same_tensor(fused, fused_one));
  }
}

void check_fused(std::int64_t m) {
  CAPTURE(m);
  const tensor x = random_tensor<float>({2, 16, 21, 23}, -1, 1, 960), w = random_tensor<float>({40, 16, 3, 3}, -1, 1, 961);
  const tensor bias = random_tensor<float>({40}, -1, 1, 962), residual = random_tensor<float>({2, 40, 21, 23}, -1, 1, 963);
  const tensor scale = random_tensor<float>({40, 1, 1}, -1, 1, 964);
  const tensor packed = prepack_conv_weight_winograd(w, m);
  const conv2d_params p = pad(1, 1, 1, 1);
  const tensor product = tensor::empty({2, 40, 21, 23}, dtype::float32), out = tensor::empty({2, 40, 21, 23}, dtype::float32);
  conv2d_winograd(x, packed, native(w, m), bias, p, product);
  const fused_expr e = fused_expr::parse("(relu (add (multiply x0 x2) x1))");
  conv2d_fused_winograd(x, packed, native(w, m), bias, p, e, {residual, scale}, out);
  CHECK(same_tensor(out, e.run({product, residual, scale})));
  // A residual laid out NHWC is applied after the convolution: the same values.
  const tensor nhwc = permute_dims(residual, {0, 2, 3, 1}).permute({0, 3, 1, 2});
  conv2d_fused_winograd(x, packed, native(w, m), bias, p, e, {nhwc, scale}, out);
  CHECK(same_tensor(out, e.run({product, residual, scale})));
}

}  // namespace

TEST_CASE("conv2d_winograd: the textbook convolution on odd and even sizes, any padding, float32 and float64") {
  check_shapes(2);
  check_shapes(4);
}

TEST_CASE("conv2d_winograd: strided input and output, the same results on two threads") {
  check_threads(2);
  check_threads(4);
}

TEST_CASE("conv2d_winograd: seven tile rows on two and three threads") {
  for (const std::int64_t m : {2, 4}) {
    check_few_tiles(m, 1, 24);
    check_few_tiles(m, 2, 100);  // a batch of two, more output channels
  }
}

TEST_CASE("winograd_schedule: every tile row once, even shares, chunks of at most 64 tiles or one row") {
  using kiln::kernels::detail::winograd_schedule;
  for (std::int64_t th = 1; th <= 30; ++th)
    for (std::int64_t tw = 1; tw <= 90; tw += tw < 20 ? 1 : 7)
      for (std::int64_t threads = 1; threads <= 5; ++threads) {
        CAPTURE(th);
        CAPTURE(tw);
        CAPTURE(threads);
        const winograd_schedule s(th, tw, threads);
        REQUIRE(s.parts == std::min(threads, th));
        std::int64_t next = 0, most = 0;
        for (std::int64_t q = 0; q < s.parts; ++q) {
          const std::int64_t begin = next;
          s.for_each_chunk(q, [&](std::int64_t ty0, std::int64_t ty1) {
            REQUIRE(ty0 == next);
            REQUIRE(ty1 > ty0);
            most = std::max(most, ty1 - ty0);
            CHECK((ty1 - ty0 == 1 || (ty1 - ty0) * tw <= winograd_schedule::target));
            next = ty1;
          });
          CHECK(next - begin >= th / s.parts);  // shares differ by at most a row
          CHECK(next - begin <= (th + s.parts - 1) / s.parts);
        }
        CHECK(next == th);
        CHECK(s.max_rows() == most);
      }
  // ResNet-18's 56 x 56 layers (F(4x4): 14 x 14 tiles): on one thread, chunks of 4 rows and a
  // last of 2; on two, 7 rows each, in chunks of 4 and 3.
  const auto ends = [](std::int64_t threads) {
    const winograd_schedule s(14, 14, threads);
    std::vector<std::int64_t> at;
    for (std::int64_t q = 0; q < s.parts; ++q) s.for_each_chunk(q, [&](std::int64_t, std::int64_t ty1) { at.push_back(ty1); });
    return at;
  };
  CHECK(ends(1) == std::vector<std::int64_t>{4, 8, 12, 14});
  CHECK(ends(2) == std::vector<std::int64_t>{4, 7, 11, 14});
}

TEST_CASE("prefer_winograd_conv and winograd_tile_size: the networks' 3x3 layers that take Winograd, and in which tiles") {
  struct layer {
    const char* name;
    std::int64_t c, o, hw;
    bool winograd;
    std::int64_t m;
  };
  const layer layers[] = {
      {"ResNet 64 on 56²", 64, 64, 56, true, 4},        {"ResNet 128 on 28²", 128, 128, 28, true, 4},
      {"ResNet 256 on 14²", 256, 256, 14, true, 2},     {"ResNet 512 on 7²", 512, 512, 7, false, 2},
      {"fire 16 -> 64 on 55²", 16, 64, 55, true, 4},    {"fire 32 -> 128 on 27²", 32, 128, 27, true, 4},
      {"fire 48 -> 192 on 13²", 48, 192, 13, true, 2},  {"DenseNet 128 -> 32 on 28²", 128, 32, 28, true, 4},
      {"DenseNet 128 -> 32 on 14²", 128, 32, 14, true, 2}, {"DenseNet 128 -> 32 on 7²", 128, 32, 7, false, 2},
      {"16 -> 32 on 28²", 16, 32, 28, false, 4},        {"32 -> 64 on 14²", 32, 64, 14, false, 2},
      {"8 -> 256 on 56²", 8, 256, 56, false, 4},        {"256 -> 16 on 56²", 256, 16, 56, false, 4},
  };
  for (const layer& l : layers) {
    CAPTURE(l.name);
    CHECK(prefer_winograd_conv(l.c, l.o, l.hw, l.hw) == l.winograd);
    CHECK(winograd_tile_size(l.hw, l.hw) == l.m);
  }
}

TEST_CASE("conv2d_fused_winograd: the epilogue over the Winograd product, per block as it is produced") {
  check_fused(2);
  check_fused(4);
}

TEST_CASE("conv2d_winograd: errors name the transformed weight, its layout and the parameters") {
  const tensor x = random_tensor<float>({1, 4, 8, 8}, -1, 1, 970), w = random_tensor<float>({6, 4, 3, 3}, -1, 1, 971);
  const tensor packed = prepack_conv_weight_winograd(w), out = tensor::empty({1, 6, 8, 8}, dtype::float32);
  const conv2d_params p = pad(1, 1, 1, 1);
  const winograd_conv_layout l = native(w, 2);
  const std::int64_t mr = l.mr, kc = l.kc, size = 16 * mr * 4;  // one panel of 6 output channels
  REQUIRE(packed.shape() == shape_vector{size});
  const auto with = [&](std::int64_t o, std::int64_t c, std::int64_t m, std::int64_t r, std::int64_t k) { return winograd_conv_layout{o, c, m, r, k}; };
  const std::string panels = kiln::detail::concat(", panels of ", mr, " output channels and blocks of ", kc, " input channels");
  CHECK(message_of([&] { conv2d_winograd(x, tensor(), l, {}, p, out); }) == "kiln::kernels::conv2d_winograd: the transformed weight is undefined");
  CHECK(message_of([&] { conv2d_winograd(x, packed, with(6, 0, 2, mr, kc), {}, p, out); }) ==
        "kiln::kernels::conv2d_winograd: bad Winograd layout: a [6, 0, 3, 3] weight in tiles of 2" + panels);
  CHECK(message_of([&] { conv2d_winograd(x, packed, with(std::int64_t(1) << 30, std::int64_t(1) << 30, 2, mr, kc), {}, p, out); }) ==
        "kiln::kernels::conv2d_winograd: bad Winograd layout: a [1073741824, 1073741824, 3, 3] weight in tiles of 2" + panels);
  CHECK(message_of([&] { conv2d_winograd(x, packed, with(6, 4, 2, 0, kc), {}, p, out); }) ==
        kiln::detail::concat("kiln::kernels::conv2d_winograd: bad Winograd layout: a [6, 4, 3, 3] weight in tiles of 2, panels of 0 output channels and blocks of ",
               kc, " input channels"));
  CHECK(message_of([&] { conv2d_winograd(x, packed, with(6, 4, 2, mr, 0), {}, p, out); }) ==
        kiln::detail::concat("kiln::kernels::conv2d_winograd: bad Winograd layout: a [6, 4, 3, 3] weight in tiles of 2, panels of ", mr,
               " output channels and blocks of 0 input channels"));
  CHECK(message_of([&] { conv2d_winograd(x, packed, with(6, 5, 2, mr, kc), {}, p, out); }) ==
        kiln::detail::concat("kiln::kernels::conv2d_winograd: the transformed weight must be a contiguous vector of ", 16 * mr * 5,
               " elements for a [6, 5, 3, 3] weight in tiles of 2", panels, ", got float32[", size, "]"));
  CHECK(message_of([&] { conv2d_winograd(x, tensor::zeros({size}, dtype::int32), l, {}, p, out); }) ==
        kiln::detail::concat("kiln::kernels::conv2d_winograd: the transformed weight must be float32 or float64, got int32[", size, "]"));
  conv2d_params strided = p;
  strided.strides = {2, 2};
  CHECK(message_of([&] { conv2d_winograd(x, packed, l, {}, strided, out); }) ==
        "kiln::kernels::conv2d_winograd: the Winograd kernel serves 3 x 3 convolutions with stride 1, dilation 1 and one group, got strides [2, 2], "
        "dilation [1, 1], groups = 1");
  CHECK(message_of([&] { conv2d_winograd(random_tensor<float>({1, 5, 8, 8}, -1, 1, 972), packed, l, {}, p, out); }).starts_with(
      "kiln::kernels::conv2d: channel mismatch: the data float32[1, 5, 8, 8] has 5 channels"));
  CHECK(message_of([&] { conv2d_winograd(x, packed, l, {}, p, tensor::empty({1, 6, 7, 8}, dtype::float32)); }).starts_with(
      "kiln::kernels::conv2d_winograd: "));
  CHECK(message_of([&] { conv2d_winograd(x, packed, l, {}, p, tensor::from_storage(packed.data_storage(), 0, dtype::float32, {1, 6, 8, 8})); }) ==
        "kiln::kernels::conv2d_winograd: the output float32[1, 6, 8, 8] overlaps an input; write into a separate tensor");
  CHECK(message_of([&] { (void)prepack_conv_weight_winograd(random_tensor<float>({6, 4, 5, 5}, -1, 1, 973)); }) ==
        "kiln::kernels::prepack_conv_weight_winograd: the weight must be OIHW with a 3 x 3 window, got float32[6, 4, 5, 5]");
  CHECK(message_of([&] { (void)winograd_conv_layout_of("conv2d_winograd", shape_vector{6, 4, 2}); }) ==
        "kiln::kernels::conv2d_winograd: the Winograd layout must have 5 values (O, C, tile size, panel rows, block columns), got 3");
  CHECK(message_of([&] { conv2d_winograd(x, packed, with(6, 4, 3, mr, kc), {}, p, out); }) ==
        "kiln::kernels::conv2d_winograd: bad Winograd layout: a [6, 4, 3, 3] weight in tiles of 3" + panels);
  CHECK(message_of([&] { conv2d_winograd(x, packed, with(6, 4, 4, mr, kc), {}, p, out); }).starts_with(
      kiln::detail::concat("kiln::kernels::conv2d_winograd: the transformed weight must be a contiguous vector of ", 36 * mr * 4, " elements")));
  CHECK(message_of([&] { (void)prepack_conv_weight_winograd(w, 6); }) ==
        "kiln::kernels::prepack_conv_weight_winograd: the output tile size must be 2 or 4, got 6");
  CHECK(message_of([&] { (void)prepack_conv_weight_winograd(tensor::zeros({6, 4, 3, 3}, dtype::int32)); }) ==
        "kiln::kernels::prepack_conv_weight_winograd: transforms float32 and float64 weights, got int32[6, 4, 3, 3]");
}
