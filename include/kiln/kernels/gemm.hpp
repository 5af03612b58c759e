// SPDX-License-Identifier: Apache-2.0
/// \file
/// A packed GEMM for float and double: `C = A * B` (or `C += A * B`) on strided matrices, the
/// core of `kernels::matmul` (`linalg.hpp`).
///
/// The structure is Goto and van de Geijn's (as in BLIS and OpenBLAS):
///
///     for jc in N by NC:            B[pc.., jc..] is packed into KC x NR panels (fits L3)
///       for pc in K by KC:
///         for ic in M by MC:        A[ic.., pc..] is packed into MR x KC panels (fits L2)
///           for jr in NC by NR:
///             for ir in MC by MR:   micro-kernel: an MR x NR block of C in registers, KC
///                                   rank-1 updates (one broadcast of A, NR/W loads of B, MR*NR/W FMAs)
///
/// Packing pads panels with zeros to whole NR (and the last panel of A to whole MR rows), so the
/// micro-kernel runs on whole vectors; an edge block goes through a small buffer before C, and
/// the last rows of A use a shorter micro-kernel (MR/3 or 2MR/3 rows; MR/3 rows take two column
/// panels at a time, `micro_kernel_wide`). Any strides work (a
/// transposed operand is just another stride pair), since packing reads them once per block.
///
/// A row-major A (rows contiguous along K) is not packed when N is small (at most 4 column
/// panels) or its rows are not a multiple of 4 KB apart: the micro-kernel broadcasts its
/// elements from the MR rows in place, as BLIS's "sup" kernels do. Packing A is a
/// transposition, one scalar load and store per element, and each packed panel serves only
/// N / NR column panels: at 64³ packing took a quarter of the time. Rows a multiple of 4 KB
/// apart would put the MR streams in the same cache sets; those are packed.
///
/// With `set_num_threads(n)`, C is cut into one rectangle per thread (whole panels of columns, or
/// of rows when C is taller than wide), and each thread packs what its rectangle needs.
///
/// The micro-kernel shape follows the vector width W: MR x 2W with MR = 12 when batches are 64
/// bytes (AVX-512: 24 accumulators of the 32 registers) and MR = 6 otherwise (AVX2, SSE: 12 of
/// 16). The blocking sizes MC, NC and the bound on reading B in place follow the caches of the CPU
/// that runs the kernels (`cpu_caches()`, `gemm_detail::blocking_for`).
#pragma once

#include <kiln/kernels/common.hpp>
#include <kiln/kernels/cpu_caches.hpp>
#include <kiln/kernels/packing.hpp>
#include <kiln/kernels/parallel.hpp>
#include <kiln/kernels/register_epilogue.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

// How the blocked loops take the micro-kernels (`block_kernel`, `micro_kernel_wide`): inlined,
// so that the loops around them are compiled with them, except under AddressSanitizer or
// ThreadSanitizer, where they are called. There each of the dozen loop nests that use them (GEMM
// with and without an epilogue, prepacked operands, the convolutions' im2col, for float and double)
// would compile its own instrumented copy of the unrolled kernels, which makes the kernels'
// registration (src/kiln_kernels.cpp) about a third slower to compile under ASan. What is
// computed is the same either way.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KILN_GEMM_KERNEL_INLINE __attribute__((noinline))
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KILN_GEMM_KERNEL_INLINE __attribute__((noinline))
#endif
#endif
#if !defined(KILN_GEMM_KERNEL_INLINE)
#define KILN_GEMM_KERNEL_INLINE __attribute__((always_inline)) inline
#endif

namespace kiln::kernels {

/// A strided matrix view: element (i, j) at `data[i * row_stride + j * col_stride]`.
template <class T>
struct matrix_view {
  T* data;
  std::int64_t rows, cols;
  std::int64_t row_stride, col_stride;
  T& operator()(std::int64_t i, std::int64_t j) const { return data[i * row_stride + j * col_stride]; }
};

namespace gemm_detail {

template <class T>
struct shape {
  using V = batch<T>;
  static constexpr std::int64_t W = std::int64_t(V::size);
  static constexpr std::int64_t NR = 2 * W;
  static constexpr std::int64_t MR = sizeof(V) >= 64 ? 12 : 6;
  /// The most rows of K per block, whatever the caches: the micro-kernel streams a KC x NR panel
  /// of B from L2 (384 x 32 floats, 48 KB, at AVX-512) while it reuses it over the block's panels
  /// of A, and 384 came out best in a sweep on Zen 4 (32 KB L1d) and holds on Zen 5 (48 KB). Being
  /// a constant, it fixes the layout of weights packed ahead of time (`native_packed_b_layout`).
  static constexpr std::int64_t KC = 384;
};

/// The cache-dependent blocking of the loops above: `mc` rows of A per packed block, `nc` columns
/// of B per block, and the most bytes one panel of B (K rows of NR) may take to be read in place
/// (`read_b_in_place`).
struct blocking {
  std::int64_t mc, nc, in_place_b_bytes;
  friend constexpr bool operator==(const blocking&, const blocking&) = default;
};

/// The blocking for element type T on a CPU with caches `c`:
/// - MC = one panel of MR rows of A per 64 KB of L2 (16 on a 1 MB L2: 192 rows of 384 floats,
///   288 KB, at AVX-512), at least 4 and at most 48 panels: A's block stays in L2 beside the
///   panels of B streaming through it.
/// - NC = 64 panels of NR columns (a 3 MB block of B at AVX-512 float), fewer when the L3 a core
///   gets (the L3 divided among the CPUs sharing it, two hardware threads to a core) is smaller,
///   at least 8. With the L3's sharing unknown (AMD's older CPUID leaves), 64.
/// - A panel of B is read in place when it fits the L1 data cache (16 to 64 KB taken).
template <class T>
constexpr blocking blocking_for(const cache_info& c) noexcept {
  using S = shape<T>;
  const std::int64_t panels = std::clamp<std::int64_t>(c.l2 / (64 << 10), 4, 48);
  std::int64_t nc = S::NR * 64;
  if (c.l3 > 0 && c.l3_shared_by > 0) {
    const std::int64_t share = c.l3 * 2 / std::max<std::int64_t>(2, c.l3_shared_by);  // per core
    nc = std::clamp<std::int64_t>(share / (S::KC * std::int64_t(sizeof(T))) / S::NR, 8, 64) * S::NR;
  }
  return {S::MR * panels, nc, std::clamp<std::int64_t>(c.l1d, 16 << 10, 64 << 10)};
}

/// The blocking for the caches of the CPU the kernels run on (`cpu_caches()`).
template <class T>
blocking current_blocking() {
  return blocking_for<T>(cpu_caches());
}

/// How many rows of K each block takes: as few blocks of at most KC rows as cover K, of equal
/// size (784 = 392 + 392, not 384 + 384 + 16: a short last block would cost a whole pass over C
/// for a few rows of K). The last block may be a few rows shorter.
template <class T>
constexpr std::int64_t block_rows(std::int64_t K) noexcept {
  constexpr std::int64_t KC = shape<T>::KC;
  if (K <= KC) return K > 0 ? K : 1;
  const std::int64_t blocks = (K + KC - 1) / KC;
  return (K + blocks - 1) / blocks;
}

/// Packs rows [i0, i0+mc) x columns [p0, p0+kc) of A into MR-row panels, k-major within a panel:
/// panel r holds A[i0 + r*MR + i, p0 + k] at [k * MR + i], zero beyond the matrix.
template <class T>
void pack_a(const matrix_view<const T>& a, std::int64_t i0, std::int64_t mc, std::int64_t p0, std::int64_t kc, T* out) {
  constexpr std::int64_t MR = shape<T>::MR;
  const std::int64_t rs = a.row_stride, cs = a.col_stride;
  for (std::int64_t r = 0; r < mc; r += MR, out += kc * MR) {
    const std::int64_t m = std::min(MR, mc - r);
    const T* src = a.data + (i0 + r) * rs + p0 * cs;
    if (m == MR && cs == 1) {
      // Row-major A, a whole panel: rows read contiguously, G at a time into their lanes of the
      // panel (fixed trip counts, so the compiler unrolls them without bounds tests).
      constexpr std::int64_t G = MR % 4 == 0 ? 4 : 3;
      static_assert(MR % G == 0);
      for (std::int64_t i = 0; i < MR; i += G) {
        const T* s[G];
        for (std::int64_t g = 0; g < G; ++g) s[g] = src + (i + g) * rs;
        T* d = out + i;
        for (std::int64_t k = 0; k < kc; ++k, d += MR)
          for (std::int64_t g = 0; g < G; ++g) d[g] = s[g][k];
      }
    } else {  // any strides, or the last, partial panel (zero rows below the matrix)
      for (std::int64_t k = 0; k < kc; ++k) {
        for (std::int64_t i = 0; i < m; ++i) out[k * MR + i] = src[i * rs + k * cs];
        for (std::int64_t i = m; i < MR; ++i) out[k * MR + i] = T(0);
      }
    }
  }
}

/// Packs rows [p0, p0+kc) x columns [j0, j0+nc) of B into NR-column panels: panel c holds
/// B[p0 + k, j0 + c*NR + j] at [k * NR + j], zero beyond the matrix. Reads B row by row, so a
/// row-major B streams sequentially.
template <class T>
void pack_b(const matrix_view<const T>& b, std::int64_t p0, std::int64_t kc, std::int64_t j0, std::int64_t nc, T* out) {
  constexpr std::int64_t NR = shape<T>::NR;
  const std::int64_t panels = (nc + NR - 1) / NR, full = nc / NR;
  for (std::int64_t k = 0; k < kc; ++k) {
    const T* src = b.data + (p0 + k) * b.row_stride + j0 * b.col_stride;
    T* dst = out + k * NR;
    if (b.col_stride == 1) {  // two vectors per panel row (a memcpy call would cost more than the copy)
      using V = batch<T>;
      constexpr std::int64_t W = shape<T>::W;
      for (std::int64_t c = 0; c < full; ++c) {
        V::load_unaligned(src + c * NR).store_aligned(dst + c * kc * NR);
        V::load_unaligned(src + c * NR + W).store_aligned(dst + c * kc * NR + W);
      }
    } else {
      for (std::int64_t c = 0; c < full; ++c)
        for (std::int64_t j = 0; j < NR; ++j) dst[c * kc * NR + j] = src[(c * NR + j) * b.col_stride];
    }
    if (full < panels) {  // the last, partial panel
      T* d = dst + full * kc * NR;
      const std::int64_t n = nc - full * NR;
      for (std::int64_t j = 0; j < n; ++j) d[j] = src[(full * NR + j) * b.col_stride];
      for (std::int64_t j = n; j < NR; ++j) d[j] = T(0);
    }
  }
}

/// How far ahead of the micro-kernel a packed A that comes from memory (`prepacked_a`) is
/// prefetched: 4 KB, about 80 steps of k, more than a memory access takes at the micro-kernel's
/// rate (48 bytes of A per 24 FMAs). Prefetching a panel packed into L2 instead costs a little.
inline constexpr std::int64_t prefetch_bytes = 4096;

/// Prefetches the cache line `bytes` from `p`, which may lie outside the object `p` points into:
/// a prefetch never faults, and the address is computed as an integer, not as a pointer.
__attribute__((always_inline)) inline void prefetch_address(const void* p, std::int64_t bytes) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(p) + std::uintptr_t(bytes)));
}

/// The micro-kernel: acc = sum over k of A(i, k) * b[k*ldb + j] for the R x NR block (R = MR, or
/// fewer for the last rows of A); then C = acc (when `first`) or C += acc, into the `m` x `n`
/// corner of C at `c` (m <= R). A(i, k) is a[k*MR + i] in a packed panel (`lda` == 0), or
/// a[i*lda + k] read in place from a row-major A; B's rows are a packed panel's (`ldb` == NR)
/// or, read in place, a row-major B's (`ldb` its row stride). `Prefetch`: the packed panel comes from memory
/// (`prefetch_bytes`). `Narrow`: C's block has at most W columns (n <= W): only the first vector
/// of B's panel is read and multiplied (a product with few columns, such as a classifier's last
/// layer of 10, would otherwise compute 2W columns for each W). `Fused`: the block is finished by
/// `*fused` (for its first row; on blocks of K before the last, one that changes nothing) before
/// it is stored: its bias added, its activation applied (`register_epilogue`).
template <class T, std::int64_t R = shape<T>::MR, bool Prefetch = false, bool Narrow = false, bool Fused = false>
__attribute__((always_inline)) inline void micro_kernel(std::int64_t kc, const T* __restrict a, std::int64_t lda, const T* __restrict b,
                                                        std::int64_t ldb, T* c, std::int64_t rs, std::int64_t cs, std::int64_t m, std::int64_t n,
                                                        bool first, const register_epilogue<T>* fused = nullptr) {
  using S = shape<T>;
  using V = typename S::V;
  constexpr std::int64_t MR = S::MR, W = S::W, NR = S::NR;
  static_assert(R >= 1 && R <= MR);
  // (A packed panel is aligned, B's rows in place need not be: an unaligned load of an aligned
  // address costs the same.)
  V acc0[R], acc1[R];
  [&]<std::size_t... I>(std::index_sequence<I...>) __attribute__((always_inline)) {
    ((acc0[I] = V(T(0)), acc1[I] = V(T(0))), ...);
  }(std::make_index_sequence<R>{});
  if constexpr (Narrow) {
    // A's element (i, k) at a[k * step + i * lda]: packed (step MR, lda 0 standing for 1) or in place.
    const std::int64_t step = lda == 0 ? MR : 1, row = lda == 0 ? 1 : lda;
    for (std::int64_t k = 0; k < kc; ++k) {
      if constexpr (Prefetch) __builtin_prefetch(a + prefetch_bytes / std::int64_t(sizeof(T)));
      const V b0 = V::load_unaligned(b);
      [&]<std::size_t... I>(std::index_sequence<I...>) __attribute__((always_inline)) {
        ((acc0[I] = xsimd::fma(V(a[std::int64_t(I) * row]), b0, acc0[I])), ...);
      }(std::make_index_sequence<R>{});
      a += step;
      b += ldb;
    }
  } else if (lda == 0) {
    for (std::int64_t k = 0; k < kc; ++k) {
      if constexpr (Prefetch) __builtin_prefetch(a + prefetch_bytes / std::int64_t(sizeof(T)));
      const V b0 = V::load_unaligned(b), b1 = V::load_unaligned(b + W);
      [&]<std::size_t... I>(std::index_sequence<I...>) __attribute__((always_inline)) {
        ((acc0[I] = xsimd::fma(V(a[I]), b0, acc0[I]), acc1[I] = xsimd::fma(V(a[I]), b1, acc1[I])), ...);
      }(std::make_index_sequence<R>{});
      a += MR;
      b += ldb;
    }
  } else {
    constexpr std::int64_t line = 64 / std::int64_t(sizeof(T));  // elements per cache line
    for (std::int64_t k = 0; k < kc; ++k) {
      // A's next panel of rows (the next block's, R rows on), one line ahead of this column,
      // once per line: rows of a few lines (a 1x1 convolution with 160 input channels has
      // 640-byte rows) end before the hardware prefetcher follows them, and a weight read from
      // L3 or memory, twelve such rows at a time, cost half as much again as one in L2
      // (960 x 160 at 7 x 7, Zen 4: 280 against 176 us; with this, 210).
      // (The address is formed as an integer: after the last panel it lies past A's end, where a
      // prefetch does no harm but a pointer may not point.)
      if (k % line == 0) {
        [&]<std::size_t... I>(std::index_sequence<I...>) __attribute__((always_inline)) {
          (prefetch_address(a, ((R + std::int64_t(I)) * lda + line) * std::int64_t(sizeof(T))), ...);
        }(std::make_index_sequence<R>{});
      }
      const V b0 = V::load_unaligned(b), b1 = V::load_unaligned(b + W);
      [&]<std::size_t... I>(std::index_sequence<I...>) __attribute__((always_inline)) {
        ((acc0[I] = xsimd::fma(V(a[std::int64_t(I) * lda]), b0, acc0[I]), acc1[I] = xsimd::fma(V(a[std::int64_t(I) * lda]), b1, acc1[I])), ...);
      }(std::make_index_sequence<R>{});
      a += 1;
      b += ldb;
    }
  }
  // C = acc (first) or C + acc, then, `Fused`, finished: `finish(v, i)` of row i's vector v.
  if (!Narrow && m == R && n == NR && cs == 1) {
    const auto store = [&](const auto& finish) __attribute__((always_inline)) {
      [&]<std::size_t... I>(std::index_sequence<I...>) __attribute__((always_inline)) {
        if (first) {
          ((finish(acc0[I], std::int64_t(I)).store_unaligned(c + std::int64_t(I) * rs),
            finish(acc1[I], std::int64_t(I)).store_unaligned(c + std::int64_t(I) * rs + W)),
           ...);
        } else {
          ((finish(V::load_unaligned(c + std::int64_t(I) * rs) + acc0[I], std::int64_t(I)).store_unaligned(c + std::int64_t(I) * rs),
            finish(V::load_unaligned(c + std::int64_t(I) * rs + W) + acc1[I], std::int64_t(I)).store_unaligned(c + std::int64_t(I) * rs + W)),
           ...);
        }
      }(std::make_index_sequence<R>{});
    };
    finish_stores<Fused>(fused, store);
    return;
  }
  // An edge block, or C with a column stride: through a buffer.
  alignas(64) T buf[R * NR];
  [&]<std::size_t... I>(std::index_sequence<I...>) __attribute__((always_inline)) {
    ((acc0[I].store_aligned(buf + I * NR), acc1[I].store_aligned(buf + I * NR + W)), ...);
  }(std::make_index_sequence<R>{});
  if constexpr (Fused) {  // the sums, finished a vector at a time in the buffer
    for (std::int64_t i = 0; i < m; ++i) {
      if (!first)
        for (std::int64_t j = 0; j < n; ++j) buf[i * NR + j] = c[i * rs + j * cs] + buf[i * NR + j];
      for (std::int64_t v = 0; v < (Narrow ? 1 : 2); ++v) (*fused)(V::load_aligned(buf + i * NR + v * W), i).store_aligned(buf + i * NR + v * W);
    }
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) c[i * rs + j * cs] = buf[i * NR + j];
    return;
  }
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      T& dst = c[i * rs + j * cs];
      dst = first ? buf[i * NR + j] : dst + buf[i * NR + j];
    }
}

/// Keeps each vector in a register: the compiler may not fold its load into the FMAs that use it.
/// GCC 12 did in `micro_kernel_wide`, where each of B's four vectors serves R rows: 4R + R loads
/// per 4R FMAs instead of 4 + R, so that the loads, not the FMAs, set the pace (the 4 rows left of
/// M = 64 ran at 60 % of the other rows' rate).
template <class... V>
__attribute__((always_inline)) inline void in_register([[maybe_unused]] V&... v) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  ((void)[&]() __attribute__((always_inline)) {
    auto r = static_cast<typename V::register_type>(v);
    asm("" : "+v"(r));
    v = V(r);
  }(), ...);
#endif
}

/// The micro-kernel for the last, short panel of A (R = MR / 3 rows, of which `m` are C's) over
/// two column panels at once (`b` and `b2`, each kc x NR, rows `ldb` apart): R x 4 accumulators, so that the
/// broadcasts of A and the loads of B keep the FMA units as busy as MR x 2 do (with R x 2 alone,
/// the 4 rows left of M = 64 cost 1.8x as much per row as the others). A(i, k) is a[k*MR + i] in
/// a packed panel (`lda` == 0), or a[i*lda + k] read in place from a row-major A (rows past `m`
/// read row m - 1 again, and are not stored).
template <class T, bool Prefetch = false, bool Fused = false>
KILN_GEMM_KERNEL_INLINE void micro_kernel_wide(std::int64_t kc, const T* __restrict a, std::int64_t lda, const T* __restrict b,
                                               const T* __restrict b2, std::int64_t ldb, T* c, std::int64_t rs, std::int64_t m, bool first,
                                               const register_epilogue<T>* fused = nullptr) {
  using S = shape<T>;
  using V = typename S::V;
  constexpr std::int64_t MR = S::MR, W = S::W, R = MR / 3;
  V acc[R][4];
  for (std::int64_t i = 0; i < R; ++i)
    for (std::int64_t v = 0; v < 4; ++v) acc[i][v] = V(T(0));
  // One step of k: A's column as a(i), B's two panels' rows at b and b2.
  const auto step = [&](const auto& a_at, const T* bk, const T* b2k) __attribute__((always_inline)) {
    V b0 = V::load_unaligned(bk), b1 = V::load_unaligned(bk + W), b2v = V::load_unaligned(b2k), b3 = V::load_unaligned(b2k + W);
    in_register(b0, b1, b2v, b3);
    for (std::int64_t i = 0; i < R; ++i) {
      const V ai(a_at(i));
      acc[i][0] = xsimd::fma(ai, b0, acc[i][0]);
      acc[i][1] = xsimd::fma(ai, b1, acc[i][1]);
      acc[i][2] = xsimd::fma(ai, b2v, acc[i][2]);
      acc[i][3] = xsimd::fma(ai, b3, acc[i][3]);
    }
  };
  if (lda == 0) {
    for (std::int64_t k = 0; k < kc; ++k, a += MR, b += ldb, b2 += ldb) {
      if constexpr (Prefetch) __builtin_prefetch(a + prefetch_bytes / std::int64_t(sizeof(T)));
      step([a](std::int64_t i) __attribute__((always_inline)) { return a[i]; }, b, b2);
    }
  } else {
    std::array<const T*, R> row;
    for (std::int64_t i = 0; i < R; ++i) row[std::size_t(i)] = a + std::min(i, m - 1) * lda;
    for (std::int64_t k = 0; k < kc; ++k, b += ldb, b2 += ldb)
      step([&row, k](std::int64_t i) __attribute__((always_inline)) { return row[std::size_t(i)][k]; }, b, b2);
  }
  const auto store = [&](const auto& finish) __attribute__((always_inline)) {
    for (std::int64_t i = 0; i < m; ++i)  // C's columns: the first panel's NR, then the second's
      for (std::int64_t v = 0; v < 4; ++v) {
        T* dst = c + i * rs + v * W;
        finish(first ? acc[i][v] : V::load_unaligned(dst) + acc[i][v], i).store_unaligned(dst);
      }
  };
  finish_stores<Fused>(fused, store);
}

/// The micro-kernel for an `m`-row block: a shorter one when m is at most a third or two
/// thirds of MR (the last rows of A), so that few zero rows are multiplied.
template <class T, bool Prefetch = false, bool Fused = false>
KILN_GEMM_KERNEL_INLINE void block_kernel(std::int64_t kc, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T* c, std::int64_t rs,
                                          std::int64_t cs, std::int64_t m, std::int64_t n, bool first, const register_epilogue<T>* fused = nullptr) {
  constexpr std::int64_t MR = shape<T>::MR;
  static_assert(MR % 3 == 0);
  if (n <= shape<T>::W)
    micro_kernel<T, MR, Prefetch, true, Fused>(kc, a, lda, b, ldb, c, rs, cs, m, n, first, fused);
  else if (m <= MR / 3)
    micro_kernel<T, MR / 3, Prefetch, false, Fused>(kc, a, lda, b, ldb, c, rs, cs, m, n, first, fused);
  else if (m <= 2 * MR / 3)
    micro_kernel<T, 2 * MR / 3, Prefetch, false, Fused>(kc, a, lda, b, ldb, c, rs, cs, m, n, first, fused);
  else
    micro_kernel<T, MR, Prefetch, false, Fused>(kc, a, lda, b, ldb, c, rs, cs, m, n, first, fused);
}

/// The most rows of A the unpacked small-M paths take (`gemm` below).
inline constexpr std::int64_t small_m_rows = 4;

/// The most panels of A's rows (MR each) for which `gemm` reads a B of few columns (fewer than
/// `in_place_b_min_panels` panels of NR) with contiguous rows in place (`in_place_b`) rather than
/// packing it.
inline constexpr std::int64_t in_place_b_panels = 8;

/// The fewest panels of B's columns from which `gemm` reads B in place whatever A's rows.
inline constexpr std::int64_t in_place_b_min_panels = 4;

/// Whether `gemm` reads B (K x N) in place for an A of `m` rows (`in_place_b`): B's rows are
/// contiguous, one panel of B, K rows of NR values, fits the L1 data cache
/// (`blocking::in_place_b_bytes`) with its rows not a multiple of 4 KB apart (rows that are
/// would share cache sets), and either A has at most
/// `in_place_b_panels` panels of rows (each of B's panels then serves few micro-kernel calls,
/// and packing it would cost about as much as they do) or B has at least `in_place_b_min_panels`
/// panels of columns. Read in place, a panel comes from B's rows on its first use and from L1 on
/// the others, as a packed one would after the packing's extra pass over B: products of 96 to 512
/// rows, K of 128 to 256 and N of 196 to 3136 (the 1x1 convolutions of DenseNet and ResNet-50,
/// B their image) took 0.85-0.98x the time with B in place on Zen 5, with the AVX-512 and the
/// AVX2 kernels. With few columns and many rows packing stays ahead (1024 x 256 x 49: 1.01-1.04x
/// in place). With more rows of B than the L1 bound lets in, the micro-kernel's K row streams
/// outrun the prefetchers: a 16 x 4096 x 1000 product took 2.4x as long with B in place (Zen 4).
template <class T>
bool read_b_in_place(const matrix_view<const T>& b, std::int64_t m, const blocking& blocks) {
  using S = shape<T>;
  const bool few_rows = (m + S::MR - 1) / S::MR <= in_place_b_panels, many_columns = b.cols >= in_place_b_min_panels * S::NR;
  return b.col_stride == 1 && (few_rows || many_columns) && b.rows * S::NR * std::int64_t(sizeof(T)) <= blocks.in_place_b_bytes &&
         b.row_stride * std::int64_t(sizeof(T)) % 4096 != 0;
}

/// Adds R x NV vector accumulators into C's columns [j, j + n) (C = acc where `first`; n <= NV W,
/// all of them by default): one block of K's sums, as the micro-kernels store theirs.
template <class T, std::int64_t R, std::int64_t NV>
__attribute__((always_inline)) inline void small_m_store(batch<T> (&acc)[R][NV], const matrix_view<T>& c, std::int64_t j, bool first,
                                                         std::int64_t n = NV * std::int64_t(batch<T>::size)) {
  using V = batch<T>;
  constexpr std::int64_t W = std::int64_t(V::size);
  if (n < NV * W) {  // the last columns, through a buffer
    alignas(64) T buf[NV * W];
    for (std::int64_t i = 0; i < R; ++i) {
      for (std::int64_t v = 0; v < NV; ++v) acc[i][v].store_aligned(buf + v * W);
      for (std::int64_t q = 0; q < n; ++q) {
        T& dst = c.data[i * c.row_stride + (j + q) * c.col_stride];
        dst = first ? buf[q] : dst + buf[q];
      }
    }
    return;
  }
  for (std::int64_t i = 0; i < R; ++i)
    for (std::int64_t v = 0; v < NV; ++v) {
      T* dst = c.data + i * c.row_stride + (j + v * W) * c.col_stride;
      if (c.col_stride == 1) {
        (first ? acc[i][v] : V::load_unaligned(dst) + acc[i][v]).store_unaligned(dst);
      } else {
        alignas(64) T tmp[W];
        acc[i][v].store_aligned(tmp);
        for (std::int64_t q = 0; q < W; ++q) dst[q * c.col_stride] = first ? tmp[q] : dst[q * c.col_stride] + tmp[q];
      }
    }
}

/// Columns [j, j + NV W) of C[0..R) = A[0..R) * B for a B with contiguous rows: R x NV vector
/// accumulators (one broadcast of A and NV loads of B per k) over each block of K the blocked
/// GEMM uses (`block_rows`), each block's sums added into C: the sums the micro-kernels form,
/// and a chain of at most KC multiply-adds rather than one down all of K (a dense layer over
/// 2,048 features at batch 1 rounded 4x as far from the exact product as ONNX Runtime's).
template <class T, std::int64_t R, std::int64_t NV>
__attribute__((always_inline)) inline void small_m_rows_block(const matrix_view<const T>& a, const matrix_view<const T>& b, const matrix_view<T>& c,
                                                              std::int64_t j, bool accumulate) {
  using V = batch<T>;
  constexpr std::int64_t W = std::int64_t(V::size);
  const std::int64_t K = a.cols, KB = block_rows<T>(K);
  for (std::int64_t p0 = 0; p0 < K; p0 += KB) {
    V acc[R][NV];
    for (std::int64_t i = 0; i < R; ++i)
      for (std::int64_t v = 0; v < NV; ++v) acc[i][v] = V(T(0));
    const T* bp = b.data + p0 * b.row_stride + j;
    for (std::int64_t k = p0; k < std::min(K, p0 + KB); ++k, bp += b.row_stride) {
      V bv[NV];
      for (std::int64_t v = 0; v < NV; ++v) bv[v] = V::load_unaligned(bp + v * W);
      for (std::int64_t i = 0; i < R; ++i) {
        const V av(a.data[i * a.row_stride + k * a.col_stride]);
        for (std::int64_t v = 0; v < NV; ++v) acc[i][v] = xsimd::fma(av, bv[v], acc[i][v]);
      }
    }
    small_m_store<T, R, NV>(acc, c, j, p0 == 0 && !accumulate);
  }
}

/// C[0..R) = A[0..R) * B, columns [j0, j1), for a B with contiguous rows (col_stride 1), read in
/// place: blocks of NV vectors, then single vectors, then scalars. B is read exactly once, with no
/// packing: a matrix-vector product (batch 1 through a dense layer) is bound by reading B, and
/// packing B would read and write it once more.
template <class T, std::int64_t R>
void small_m_rows_b(const matrix_view<const T>& a, const matrix_view<const T>& b, const matrix_view<T>& c, std::int64_t j0, std::int64_t j1,
                    bool accumulate) {
  constexpr std::int64_t W = std::int64_t(batch<T>::size), NV = sizeof(batch<T>) >= 64 ? 4 : 2;
  std::int64_t j = j0;
  for (; j + NV * W <= j1; j += NV * W) small_m_rows_block<T, R, NV>(a, b, c, j, accumulate);
  for (; j + W <= j1; j += W) small_m_rows_block<T, R, 1>(a, b, c, j, accumulate);
  const std::int64_t K = a.cols, KB = block_rows<T>(K);
  for (; j < j1; ++j)  // the last columns, fewer than a vector (in the same blocks of K)
    for (std::int64_t i = 0; i < R; ++i) {
      T& dst = c.data[i * c.row_stride + j * c.col_stride];
      for (std::int64_t p0 = 0; p0 < K; p0 += KB) {
        T s = 0;
        for (std::int64_t k = p0; k < std::min(K, p0 + KB); ++k) s += a.data[i * a.row_stride + k * a.col_stride] * b.data[k * b.row_stride + j];
        dst = p0 == 0 && !accumulate ? s : dst + s;
      }
    }
}

/// C[0..R) = A[0..R) * B for a B with contiguous columns (row_stride 1: a transposed weight, as
/// ONNX's Gemm with transB stores it) and a row-major A: each element of C is a dot product of
/// two contiguous rows, NC columns at a time, vectorised along K.
template <class T, std::int64_t R>
void small_m_cols_b(const matrix_view<const T>& a, const matrix_view<const T>& b, const matrix_view<T>& c, std::int64_t j0, std::int64_t j1,
                    bool accumulate) {
  using V = batch<T>;
  constexpr std::int64_t W = std::int64_t(V::size), NC = 4;
  const std::int64_t K = a.cols, kv = K / W * W;
  for (std::int64_t j = j0; j < j1; j += NC) {
    const std::int64_t nc = std::min(NC, j1 - j);
    V acc[R][NC];
    for (std::int64_t i = 0; i < R; ++i)
      for (std::int64_t q = 0; q < NC; ++q) acc[i][q] = V(T(0));
    const T* col[NC];
    for (std::int64_t q = 0; q < NC; ++q) col[q] = b.data + std::min(j + q, j1 - 1) * b.col_stride;  // a short block repeats its last column
    for (std::int64_t k = 0; k < kv; k += W) {
      V bv[NC];
      for (std::int64_t q = 0; q < NC; ++q) bv[q] = V::load_unaligned(col[q] + k);
      for (std::int64_t i = 0; i < R; ++i) {
        const V av = V::load_unaligned(a.data + i * a.row_stride + k);
        for (std::int64_t q = 0; q < NC; ++q) acc[i][q] = xsimd::fma(av, bv[q], acc[i][q]);
      }
    }
    for (std::int64_t i = 0; i < R; ++i)
      for (std::int64_t q = 0; q < nc; ++q) {
        T s = xsimd::hadd(acc[i][q]);
        for (std::int64_t k = kv; k < K; ++k) s += a.data[i * a.row_stride + k] * col[q][k];
        T& dst = c.data[i * c.row_stride + (j + q) * c.col_stride];
        dst = accumulate ? dst + s : s;
      }
  }
}

/// The small-M product, R rows dispatched to a compile-time count.
template <class T, class Kernel>
void small_m_dispatch(std::int64_t rows, Kernel&& kernel) {
  static_assert(small_m_rows == 4);
  switch (rows) {
    case 1: kernel(std::integral_constant<std::int64_t, 1>{}); break;
    case 2: kernel(std::integral_constant<std::int64_t, 2>{}); break;
    case 3: kernel(std::integral_constant<std::int64_t, 3>{}); break;
    default: kernel(std::integral_constant<std::int64_t, 4>{}); break;
  }
}

}  // namespace gemm_detail

/// The epilogue of a GEMM that has none (see `gemm_packed`).
struct no_epilogue {
  template <class T>
  void operator()(T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t) const {}
};

namespace gemm_detail {

/// Below this many multiply-adds (M * N * K) a GEMM runs on the calling thread: handing it out
/// would cost more than it saves (about 5 us of work at one core's rate).
inline constexpr std::int64_t min_parallel_work = std::int64_t(1) << 17;

/// Whether `gemm` takes A (M x K) times a vector (N = 1) as `matrix_vector`: more rows than the
/// small-M product takes, and A's rows or columns contiguous.
template <class T>
bool use_matrix_vector(const matrix_view<const T>& a, std::int64_t n) {
  return n == 1 && a.rows > small_m_rows && a.cols > 0 && (a.col_stride == 1 || a.row_stride == 1);
}

/// C = A * B (or C += A * B) for a B of one column (a squeeze-and-excitation block's 1x1
/// convolutions at one position): the small-M product of the transposition, C^T = B^T A^T, with A
/// read in place — dot products along its rows, or multiples of its columns added up — where the
/// blocked loops would pack it into panels for a micro-kernel that fills one column of 2W. B is
/// copied first when its elements are not contiguous, so that every layout of B (a prepacked one
/// too) gives the same sums. Blocks of 256 rows of C among the threads (below `min_parallel_work`
/// multiply-adds, on the calling thread); `epilogue` on each.
template <class T, class Epilogue>
void matrix_vector(const matrix_view<const T>& a, const matrix_view<const T>& b, const matrix_view<T>& c, bool accumulate, const Epilogue& epilogue) {
  const std::int64_t M = c.rows, K = a.cols;
  std::vector<T> copy;
  const T* x = b.data;
  if (b.row_stride != 1) {
    copy.resize(std::size_t(K));
    for (std::int64_t k = 0; k < K; ++k) copy[std::size_t(k)] = b.data[k * b.row_stride];
    x = copy.data();
  }
  const matrix_view<const T> bt{x, 1, K, K, 1}, at{a.data, K, M, a.col_stride, a.row_stride};
  const matrix_view<T> ct{c.data, 1, M, c.col_stride, c.row_stride};
  constexpr std::int64_t block = 256;
  const auto rows = [&](std::int64_t t) {
    const std::int64_t i0 = t * block, i1 = std::min(M, i0 + block);
    if (a.row_stride == 1) small_m_rows_b<T, 1>(bt, at, ct, i0, i1, accumulate);
    else small_m_cols_b<T, 1>(bt, at, ct, i0, i1, accumulate);
    if constexpr (!std::is_same_v<Epilogue, no_epilogue>) epilogue(c.data + i0 * c.row_stride, c.row_stride, c.col_stride, i0, 0, i1 - i0, 1);
  };
  const std::int64_t tasks = (M + block - 1) / block;
  if (M * K < min_parallel_work) {
    for (std::int64_t t = 0; t < tasks; ++t) rows(t);
  } else {
    parallel_for(tasks, rows);
  }
}

/// Where the blocked loops find B's panels: `panels(p0, kc, j0, nc, buffer)` returns rows
/// [p0, p0+kc) x columns [j0, j0+nc) of B in the layout of `pack_b` — packed into `buffer` by a
/// packing callback (`packing`), or found in place in a B packed ahead of time (`prepacked`).
template <class PackB>
struct packing {
  static constexpr bool needs_buffer = true;
  PackB& pack;
  template <class T>
  const T* operator()(std::int64_t p0, std::int64_t kc, std::int64_t j0, std::int64_t nc, T* buffer) const {
    pack(p0, kc, j0, nc, buffer);
    return buffer;
  }
  /// The panel of columns [jr, jr + NR) of the block at `block`, and the distance between its rows.
  template <class T>
  std::pair<const T*, std::int64_t> panel(const T* block, std::int64_t jr, std::int64_t kc, std::int64_t, const T*) const {
    return {block + jr * kc, shape<T>::NR};
  }
};
template <class T>
struct prepacked {
  static constexpr bool needs_buffer = false;
  const T* data;          ///< the whole of B, as `prepack_b` wrote it
  std::int64_t padded_n;  ///< N rounded up to whole panels
  const T* operator()(std::int64_t p0, std::int64_t kc, std::int64_t j0, std::int64_t, T*) const {
    // Block p0 follows p0 whole rows of every panel; column j0 (a panel's first) follows j0 / NR
    // panels of this block's kc rows.
    return data + p0 * padded_n + j0 * kc;
  }
  std::pair<const T*, std::int64_t> panel(const T* block, std::int64_t jr, std::int64_t kc, std::int64_t, const T*) const {
    return {block + jr * kc, shape<T>::NR};
  }
};

/// A B with contiguous rows read in place, not packed: each whole panel of NR columns is read
/// straight from B's rows (`ldb` = its row stride) by the micro-kernels; a last, partial panel
/// is packed (with its zero padding), since whole vectors of it would read past B's columns.
/// Packing B copies all of it once per block of rows of A: where few panels of A's rows share
/// each of B's panels (a 1x1 convolution with few output channels: M = 16 to 96 over N = 784 to
/// 12,544 positions) the copy costs about as much as the multiply-adds.
template <class T>
struct in_place_b {
  static constexpr bool needs_buffer = true;
  matrix_view<const T> b;
  const T* operator()(std::int64_t p0, std::int64_t kc, std::int64_t j0, std::int64_t nc, T* buffer) const {
    constexpr std::int64_t NR = shape<T>::NR;
    if (const std::int64_t full = nc / NR * NR; full < nc) pack_b(b, p0, kc, j0 + full, nc - full, buffer);
    return b.data + p0 * b.row_stride + j0;
  }
  std::pair<const T*, std::int64_t> panel(const T* block, std::int64_t jr, std::int64_t, std::int64_t nc, const T* buffer) const {
    if (jr + shape<T>::NR <= nc) return {block + jr, b.row_stride};
    return {buffer, shape<T>::NR};
  }
};

/// An A packed ahead of time in this build's layout (`native_packed_a_layout`), which the blocked
/// loops read in place instead of packing: the rows from row0 (a multiple of MR) on of a matrix of
/// `padded_rows` rows (whole panels) and `cols` columns at `data`; C's view says how many.
template <class T>
struct prepacked_a {
  const T* data;
  std::int64_t cols, padded_rows, row0;
  /// The panel of rows [i, i + MR) (i relative to row0, a multiple of MR) in the block of columns
  /// [p0, p0 + kc): block p0 follows p0 whole columns of every panel.
  const T* panel(std::int64_t p0, std::int64_t kc, std::int64_t i) const { return data + p0 * padded_rows + (row0 + i) * kc; }
};

/// The blocked loops of `gemm_packed` over rows [i0, i1) and columns [j0, j1) of C, on this
/// thread, with this thread's packing buffers. `a` is a `matrix_view` (packed here, or read in
/// place) or a `prepacked_a` (i0 a multiple of MR); `b_panels` is a `packing` or a `prepacked`;
/// `blocks` the MC and NC of the running CPU (`current_blocking`, read once per product).
template <class T, class A, class BPanels, class Epilogue>
void gemm_rectangle(const A& a, const BPanels& b_panels, const matrix_view<T>& c, std::int64_t i0, std::int64_t i1, std::int64_t j0,
                    std::int64_t j1, bool accumulate, const Epilogue& epilogue, const blocking& blocks) {
  constexpr bool has_epilogue = !std::is_same_v<Epilogue, no_epilogue>;
  constexpr bool a_prepacked = std::is_same_v<A, prepacked_a<T>>;
  static_assert(a_prepacked || std::is_same_v<A, matrix_view<const T>>, "gemm_rectangle: A is a matrix_view<const T> or a prepacked_a<T>");
  // An epilogue the micro-kernels apply themselves, on the last block of K, as they store it: it
  // is then not called on the finished blocks.
  // (float only: each such epilogue compiles the micro-kernels' stores once more.)
  constexpr bool fusable = offers_register_form<Epilogue, T> && std::is_same_v<T, float>;
  const register_epilogue<T>* in_register = nullptr;
  if constexpr (fusable) in_register = epilogue.register_form();
  // What the micro-kernels finish the block whose first row is C's row i with: the register
  // epilogue on the last block of K, before it nothing (a clip to the whole line).
  [[maybe_unused]] register_epilogue<T> tile_epilogue;
  const auto fused_from = [&](std::int64_t i, bool last_k) -> const register_epilogue<T>* {
    if constexpr (fusable) {
      tile_epilogue = last_k && in_register ? in_register->from_row(i) : register_epilogue<T>{};
      return &tile_epilogue;
    }
    return nullptr;
  };
  using S = shape<T>;
  constexpr std::int64_t MR = S::MR, NR = S::NR, KC = S::KC;
  const std::int64_t MC = blocks.mc, NC = blocks.nc;
  const std::int64_t K = a.cols, KB = block_rows<T>(K);  // KB <= KC
  // Packed panels, reused across calls on this thread.
  thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> packed_a, packed_b;
  if constexpr (!a_prepacked) detail::grow(packed_a, MC * KC);
  if constexpr (BPanels::needs_buffer) detail::grow(packed_b, KC * ((std::min(NC, j1 - j0) + NR - 1) / NR * NR));
  for (std::int64_t jc = j0; jc < j1; jc += NC) {
    const std::int64_t nc = std::min(NC, j1 - jc);
    for (std::int64_t pc = 0; pc < K; pc += KB) {
      const std::int64_t kc = std::min(KB, K - pc);
      const bool first = pc == 0 && !accumulate;
      const bool last = pc + kc == K;
      const T* b_block = b_panels(pc, kc, jc, nc, packed_b.data());
      const auto b_panel = [&](std::int64_t jr) { return b_panels.panel(b_block, jr, kc, nc, static_cast<const T*>(packed_b.data())); };
      for (std::int64_t ic = i0; ic < i1; ic += MC) {
        const std::int64_t mc = std::min(MC, i1 - ic);
        // A row-major A is read in place when few column panels share each of its panels, so
        // that packing would be paid for by few uses, or when its rows are not a multiple of
        // 4 KB apart (but for its last panel when that is partial: packing pads it with zero
        // rows). Otherwise, and for any other layout, A is packed: its MR rows are then read
        // from one contiguous panel rather than MR streams that map to the same cache sets.
        // Read in place, the MLP's 64 x 784 x 512 and 64 x 512 x 512 layers took 4 and 7 % less
        // time than with A packed (Zen 5), the square 256³ and 512³ products 5-10 % less.
        // A prepacked A is read in place, panel by panel.
        //
        // A last panel of at most MR / 3 rows takes two column panels at a time (`micro_kernel_wide`),
        // right after the taller panels have run over those two: B's panels are then still in L2.
        // (Run after all the column panels instead, it read them back from L3 when the block of B
        // is larger than L2.) Where A is read in place, so is that panel, unless some columns are
        // left over for the shorter kernels: packing it cost more than computing it (the 4 rows
        // left of the MLP's 64 x 784 x 512 on Zen 5, packing 12 x 392 values one by one).
        const std::int64_t short_rows = mc % MR <= MR / 3 && c.col_stride == 1 ? mc % MR : 0, tall = mc - short_rows;
        const std::int64_t step = short_rows > 0 ? 2 * NR : NR;
        std::int64_t whole = 0;        // rows read in place from a row-major A
        bool short_in_place = false;  // the short panel too
        if constexpr (!a_prepacked) {
          const bool in_place = a.col_stride == 1 && (nc <= 4 * NR || a.row_stride * std::int64_t(sizeof(T)) % 4096 != 0);
          whole = in_place ? mc / MR * MR : 0;
          short_in_place = in_place && short_rows > 0 && nc % (2 * NR) == 0;
          if (!short_in_place) pack_a(a, ic + whole, mc - whole, pc, kc, packed_a.data());
        }
        // The packed panel of rows [ic + ir, ic + ir + MR) (ir >= whole).
        const auto a_panel = [&](std::int64_t ir) -> const T* {
          if constexpr (a_prepacked) return a.panel(pc, kc, ic + ir);
          else return packed_a.data() + ((ir - whole) / MR) * kc * MR;
        };
        // With few rows of K, C's writes are most of the traffic: each panel of A's rows then
        // takes `span` columns (B's panels for them stay in L1), so that C is written MR rows at
        // a time in long stretches, and the epilogue runs over each such strip at once, while it
        // is in L1, rather than over the whole block from L2.
        const bool strips = kc <= 32;
        const std::int64_t span = strips ? std::max<std::int64_t>(1, 24 * 1024 / (kc * std::int64_t(sizeof(T)) * 2 * NR)) * 2 * NR : step;
        [[maybe_unused]] const auto strip_epilogue = [&](std::int64_t i, std::int64_t rows, std::int64_t j, std::int64_t cols) {
          if constexpr (has_epilogue)
            if (strips && last && !in_register) epilogue(c.data + i * c.row_stride + j * c.col_stride, c.row_stride, c.col_stride, i, j, rows, cols);
        };
        // The MR x NR block of C at rows ic + ir, columns jc + jr.
        const auto tall_block = [&](std::int64_t ir, std::int64_t jr) __attribute__((always_inline)) {
          const T* ap = nullptr;
          std::int64_t lda = 0;
          if constexpr (!a_prepacked) {
            if (ir < whole) ap = a.data + (ic + ir) * a.row_stride + pc, lda = a.row_stride;
          }
          if (!ap) ap = a_panel(ir);
          const auto [bp, ldb] = b_panel(jr);
          T* cp = c.data + (ic + ir) * c.row_stride + (jc + jr) * c.col_stride;
          block_kernel<T, a_prepacked, fusable>(kc, ap, lda, bp, ldb, cp, c.row_stride, c.col_stride, std::min(MR, mc - ir), std::min(NR, nc - jr), first,
                                                fused_from(ic + ir, last));
        };
        for (std::int64_t js = 0; js < nc; js += span) {
          const std::int64_t js_end = std::min(nc, js + span);
          if (strips) {  // a row panel over the strip, then its epilogue
            for (std::int64_t ir = 0; ir < tall; ir += MR) {
              for (std::int64_t jr = js; jr < js_end; jr += NR) tall_block(ir, jr);
              strip_epilogue(ic + ir, std::min(MR, tall - ir), jc + js, js_end - js);
            }
          } else {  // each column panel of B over every row panel of A, while it is in L1
            for (std::int64_t jr = js; jr < js_end; jr += NR)
              for (std::int64_t ir = 0; ir < tall; ir += MR) tall_block(ir, jr);
          }
          for (std::int64_t js2 = js; short_rows > 0 && js2 < js_end; js2 += step) {
            T* cp = c.data + (ic + tall) * c.row_stride + jc;
            if (js2 + 2 * NR <= nc) {
              const T* ap = nullptr;
              std::int64_t lda = 0;
              if constexpr (!a_prepacked) {
                if (short_in_place) ap = a.data + (ic + tall) * a.row_stride + pc, lda = a.row_stride;
              }
              if (!ap) ap = a_panel(tall);
              const auto [b0, ldb] = b_panel(js2);
              micro_kernel_wide<T, a_prepacked, fusable>(kc, ap, lda, b0, b_panel(js2 + NR).first, ldb, cp + js2, c.row_stride, short_rows, first,
                                                         fused_from(ic + tall, last));
            } else {
              for (std::int64_t jr = js2; jr < js_end; jr += NR) {
                const auto [bp, ldb] = b_panel(jr);
                block_kernel<T, a_prepacked, fusable>(kc, a_panel(tall), 0, bp, ldb, cp + jr, c.row_stride, 1, short_rows, std::min(NR, nc - jr), first,
                                                      fused_from(ic + tall, last));
              }
            }
          }
          if (short_rows > 0) strip_epilogue(ic + tall, short_rows, jc + js, js_end - js);
        }
        if constexpr (has_epilogue) {
          // The finished mc x nc block is in L2 (the micro-kernels just wrote it): the epilogue
          // runs over its rows, MR at a time, long rows so that each of its steps is one call
          // over many vectors.
          if (last && !strips && !in_register)
            for (std::int64_t i = ic; i < ic + mc; i += MR)
              epilogue(c.data + i * c.row_stride + jc * c.col_stride, c.row_stride, c.col_stride, i, jc, std::min(MR, ic + mc - i), nc);
        }
      }
    }
  }
}

/// `gemm_packed`, with B's panels from `b_panels` (a `packing` or a `prepacked`), blocked by
/// `blocks`.
template <class T, class BPanels, class Epilogue>
void gemm_blocked(matrix_view<const T> a, std::int64_t n_cols, const BPanels& b_panels, matrix_view<T> c, bool accumulate,
                  const Epilogue& epilogue, const blocking& blocks = current_blocking<T>()) {
  constexpr bool has_epilogue = !std::is_same_v<Epilogue, no_epilogue>;
  using S = gemm_detail::shape<T>;
  const std::int64_t M = c.rows, N = n_cols, K = a.cols;
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate)
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j) c(i, j) = T(0);
    if constexpr (has_epilogue) epilogue(c.data, c.row_stride, c.col_stride, 0, 0, M, N);
    return;
  }
  const auto threads = static_cast<std::int64_t>(num_threads());
  const std::int64_t row_panels = (M + S::MR - 1) / S::MR, col_panels = (N + S::NR - 1) / S::NR;
  const bool by_columns = M <= N ? col_panels > 1 : row_panels < 2;
  const std::int64_t panels = by_columns ? col_panels : row_panels;
  const std::int64_t parts = std::min(threads, panels);
  if (parts < 2 || M * N * K < gemm_detail::min_parallel_work) {
    gemm_detail::gemm_rectangle<T>(a, b_panels, c, 0, M, 0, N, accumulate, epilogue, blocks);
    return;
  }
  parallel_for(parts, [&](std::int64_t part) {
    // Panels [part * panels / parts, (part + 1) * panels / parts): sizes differ by one at most.
    const std::int64_t first = part * panels / parts, end = (part + 1) * panels / parts;
    if (by_columns)
      gemm_detail::gemm_rectangle<T>(a, b_panels, c, 0, M, first * S::NR, std::min(N, end * S::NR), accumulate, epilogue, blocks);
    else
      gemm_detail::gemm_rectangle<T>(a, b_panels, c, first * S::MR, std::min(M, end * S::MR), 0, N, accumulate, epilogue, blocks);
  });
}

}  // namespace gemm_detail

/// C = A * B, or C += A * B when `accumulate`, where B (K x N) exists only through `pack_b`:
/// `pack_b(p0, kc, j0, nc, out)` writes rows [p0, p0+kc) x columns [j0, j0+nc) of B into `out`
/// in the layout of `gemm_detail::pack_b` (NR-column panels, k-major, zero-padded to whole
/// panels). This is how a convolution multiplies by its im2col matrix without building it
/// (`nn.hpp`). A is M x K; C is M x N and must not overlap A or what B is read from. `pack_b` may
/// be called from several threads at once, for different columns.
///
/// `epilogue(c, rs, cs, i, j, m, n)` is called on each finished m x n block of C, at (i, j), right
/// after the micro-kernels wrote it (still in L2: a block is at most MR x NC): it may rewrite the
/// block in place (`fused_epilogue` applies a bias, an activation, a residual). Its rows are long,
/// so that an interpreted epilogue makes few calls per element. An epilogue that can be put as a
/// bias per row and a simple activation says so with `register_form()` (`register_epilogue.hpp`):
/// the micro-kernels then apply it to the last block of K as they store it, and it is not called
/// on the blocks (it still is by the paths that bypass the blocked loops: few rows of A, a B of
/// one column).
///
/// Threads (`set_num_threads`): C is cut once into one rectangle per thread — column ranges when
/// C has no more rows than columns, row ranges otherwise, in whole panels — and each thread runs
/// the blocked loops on its own rectangle, packing its own columns of B (and its own copy of A's
/// panels, or of B's when rows are cut): one hand-out per product, packing on every thread, no
/// barrier between blocks. Every element of C is the same sum in the same order whatever the
/// thread count, so results are bit-identical.
template <class T, class PackB, class Epilogue = no_epilogue>
void gemm_packed(matrix_view<const T> a, std::int64_t n_cols, PackB&& pack_b, matrix_view<T> c, bool accumulate = false,
                 const Epilogue& epilogue = {}) {
  gemm_detail::gemm_blocked<T>(a, n_cols, gemm_detail::packing<std::remove_reference_t<PackB>>{pack_b}, c, accumulate, epilogue);
}

/// C = A * B, or C += A * B when `accumulate`. Shapes: A is M x K, B is K x N, C is M x N (the
/// caller checks them); C must not overlap A or B. `epilogue` as for `gemm_packed`.
///
/// At most `gemm_detail::small_m_rows` (4) rows of A — a matrix-vector product, a dense layer at
/// batch 1 — and a B with contiguous rows or columns, B is read in place instead of packed (see
/// `small_m_rows_b` and `small_m_cols_b`): column blocks are shared out among the threads. A B of
/// one column and an A with contiguous rows or columns is that product turned around
/// (`matrix_vector`).
template <class T, class Epilogue = no_epilogue>
void gemm(matrix_view<const T> a, matrix_view<const T> b, matrix_view<T> c, bool accumulate = false, const Epilogue& epilogue = {}) {
  const std::int64_t M = c.rows, N = c.cols;
  const bool rows_b = b.col_stride == 1, cols_b = b.row_stride == 1 && a.col_stride == 1;
  if (M > 0 && M <= gemm_detail::small_m_rows && N > 0 && a.cols > 0 && (rows_b || cols_b)) {
    // Column blocks of 256 (1 KB of float per row of C): few tasks for a thread pool, and the
    // epilogue sees each block while it is in L1.
    constexpr std::int64_t block = 256;
    parallel_for((N + block - 1) / block, [&](std::int64_t t) {
      const std::int64_t j0 = t * block, j1 = std::min(N, j0 + block);
      gemm_detail::small_m_dispatch<T>(M, [&](auto rows) {
        if (rows_b)
          gemm_detail::small_m_rows_b<T, decltype(rows)::value>(a, b, c, j0, j1, accumulate);
        else
          gemm_detail::small_m_cols_b<T, decltype(rows)::value>(a, b, c, j0, j1, accumulate);
      });
      if constexpr (!std::is_same_v<Epilogue, no_epilogue>) epilogue(c.data + j0 * c.col_stride, c.row_stride, c.col_stride, 0, j0, M, j1 - j0);
    });
    return;
  }
  if (gemm_detail::use_matrix_vector(a, N)) {
    gemm_detail::matrix_vector<T>(a, b, c, accumulate, epilogue);
    return;
  }
  const gemm_detail::blocking blocks = gemm_detail::current_blocking<T>();
  if (gemm_detail::read_b_in_place<T>(b, M, blocks)) {
    gemm_detail::gemm_blocked<T>(a, c.cols, gemm_detail::in_place_b<T>{b}, c, accumulate, epilogue, blocks);
    return;
  }
  const auto pack = [&](std::int64_t p0, std::int64_t kc, std::int64_t j0, std::int64_t nc, T* out) { gemm_detail::pack_b(b, p0, kc, j0, nc, out); };
  gemm_detail::gemm_blocked<T>(a, c.cols, gemm_detail::packing<decltype(pack)>{pack}, c, accumulate, epilogue, blocks);
}

// ---- B packed ahead of time ------------------------------------------------------------------------

// packed_b_layout, the layout of a B packed ahead of time, is in packing.hpp.

/// The layout this build's GEMM reads in place, for element type T and a B of `k` rows.
template <class T>
constexpr packed_b_layout native_packed_b_layout(std::int64_t k) noexcept {
  return {gemm_detail::shape<T>::NR, gemm_detail::block_rows<T>(k)};
}

/// Whether layouts `a` and `b` place a B of `k` rows alike: the same panels, and blocks that cut
/// K at the same rows (a block size of k or more is one block, whatever its number).
constexpr bool same_placement(const packed_b_layout& a, const packed_b_layout& b, std::int64_t k) noexcept {
  return a.nr == b.nr && std::min(a.kc, k) == std::min(b.kc, k);
}

/// The number of elements a K x N B takes in layout `l` (N rounded up to whole panels).
inline std::int64_t packed_b_size(std::int64_t k, std::int64_t n, packed_b_layout l) noexcept { return k * ((n + l.nr - 1) / l.nr * l.nr); }

/// Where element (p, j) of a K x N B is in layout `l`.
inline std::int64_t packed_b_index(std::int64_t k, std::int64_t n, packed_b_layout l, std::int64_t p, std::int64_t j) noexcept {
  const std::int64_t p0 = p / l.kc * l.kc, kc = std::min(l.kc, k - p0), padded_n = (n + l.nr - 1) / l.nr * l.nr;
  return p0 * padded_n + (j / l.nr) * l.nr * kc + (p - p0) * l.nr + j % l.nr;
}

/// Packs B (any strides) into `out` (`packed_b_size(B.rows, B.cols, native_packed_b_layout<T>(B.rows))`
/// elements, 64-byte aligned) in this build's layout.
template <class T>
void prepack_b(const matrix_view<const T>& b, T* out) {
  const packed_b_layout l = native_packed_b_layout<T>(b.rows);
  const std::int64_t padded_n = (b.cols + l.nr - 1) / l.nr * l.nr;
  for (std::int64_t p0 = 0; p0 < b.rows; p0 += l.kc)
    gemm_detail::pack_b(b, p0, std::min(l.kc, b.rows - p0), 0, b.cols, out + p0 * padded_n);
}

/// Writes the K x N matrix packed in layout `l` at `packed` into `b` (any layout, any strides).
template <class T>
void unpack_b(const T* packed, packed_b_layout l, const matrix_view<T>& b) {
  for (std::int64_t p = 0; p < b.rows; ++p)
    for (std::int64_t j = 0; j < b.cols; ++j) b(p, j) = packed[packed_b_index(b.rows, b.cols, l, p, j)];
}

/// Copies a K x N matrix packed in layout `from` at `in` into layout `to` at `out`
/// (`packed_b_size(k, n, to)` elements; its padding is zero). A row's elements are contiguous
/// within a panel in both layouts, so it copies runs that end where either layout's panel does.
template <class T>
void repack_b(const T* in, packed_b_layout from, std::int64_t k, std::int64_t n, packed_b_layout to, T* out) {
  std::fill(out, out + packed_b_size(k, n, to), T(0));
  for (std::int64_t p = 0; p < k; ++p)
    for (std::int64_t j = 0; j < n;) {
      const std::int64_t len = std::min({from.nr - j % from.nr, to.nr - j % to.nr, n - j});
      std::copy_n(in + packed_b_index(k, n, from, p, j), len, out + packed_b_index(k, n, to, p, j));
      j += len;
    }
}

// ---- A packed ahead of time ------------------------------------------------------------------------

/// The layout of an A (M x K) packed ahead of time, as the transformed weights of a Winograd
/// convolution are at compile time: the MR-row panels `pack_a` writes, for all of A, one block of
/// K after another. They are the panels of A^T packed as a B (K x M) with panels of MR columns,
/// so `packed_b_layout` describes them (nr = MR), `packed_b_index(k, m, l, p, i)` places A(i, p),
/// and `packed_b_size(k, m, l)` counts them. The GEMM reads them in place
/// (`gemm_detail::prepacked_a`): one contiguous stream per block of K, prefetched ahead of the
/// micro-kernel, where a row-major A read in place is MR streams, each restarted at every panel.
/// ResNet-18's Winograd convolutions with their weights coming from memory took 1.08-1.16x as
/// long on one thread with a row-major weight read in place, 1.09-1.28x on two (Zen 5).
template <class T>
constexpr packed_b_layout native_packed_a_layout(std::int64_t k) noexcept {
  return {gemm_detail::shape<T>::MR, gemm_detail::block_rows<T>(k)};
}

namespace gemm_detail {

/// Columns [j, j + n) of C[0..R) = A[0..R) * B (n <= P NR), B prepacked: R x 2P vector
/// accumulators over each block of K, through its P panels, each block's sums added into C.
/// Each element is the sum `small_m_rows_b` forms, so results do not depend on B's packing.
template <class T, std::int64_t R, std::int64_t P>
__attribute__((always_inline)) inline void small_m_packed_block(const matrix_view<const T>& a, const T* packed, std::int64_t padded_n,
                                                                const matrix_view<T>& c, std::int64_t j, std::int64_t n, bool accumulate) {
  using S = shape<T>;
  using V = typename S::V;
  constexpr std::int64_t W = S::W, NR = S::NR, NV = 2 * P;
  const std::int64_t K = a.cols, KB = block_rows<T>(K);
  for (std::int64_t p0 = 0; p0 < K; p0 += KB) {
    V acc[R][NV];
    for (std::int64_t i = 0; i < R; ++i)
      for (std::int64_t v = 0; v < NV; ++v) acc[i][v] = V(T(0));
    const std::int64_t kc = std::min(KB, K - p0);
    const T* bp = packed + p0 * padded_n + j * kc;  // panel p of the block at bp + p * NR * kc
    const T* ap = a.data + p0 * a.col_stride;
    for (std::int64_t k = 0; k < kc; ++k, bp += NR, ap += a.col_stride) {
      V bv[NV];
      for (std::int64_t v = 0; v < NV; ++v) bv[v] = V::load_aligned(bp + (v / 2) * NR * kc + (v % 2) * W);
      for (std::int64_t i = 0; i < R; ++i) {
        const V av(ap[i * a.row_stride]);
        for (std::int64_t v = 0; v < NV; ++v) acc[i][v] = xsimd::fma(av, bv[v], acc[i][v]);
      }
    }
    small_m_store<T, R, NV>(acc, c, j, p0 == 0 && !accumulate, n);
  }
}

/// Columns [j0, j1) of C[0..R) = A[0..R) * B, B prepacked (j0 a multiple of NR): the panels two
/// at a time when vectors are 64 bytes (as `small_m_rows_b` takes four vectors), then one.
template <class T, std::int64_t R>
void small_m_packed(const matrix_view<const T>& a, const T* packed, std::int64_t padded_n, const matrix_view<T>& c, std::int64_t j0, std::int64_t j1,
                    bool accumulate) {
  constexpr std::int64_t NR = shape<T>::NR, P = sizeof(batch<T>) >= 64 ? 2 : 1;
  std::int64_t j = j0;
  for (; j + P * NR <= j1; j += P * NR) small_m_packed_block<T, R, P>(a, packed, padded_n, c, j, P * NR, accumulate);
  for (; j < j1; j += NR) small_m_packed_block<T, R, 1>(a, packed, padded_n, c, j, std::min(NR, j1 - j), accumulate);
}

}  // namespace gemm_detail

/// C = A * B, or C += A * B when `accumulate`, with B (K x N, K = A.cols, N = C.cols) prepacked
/// at `packed` in this build's layout (`prepack_b`; 64-byte aligned). No packing of B at all:
/// the blocked loops read its panels in place (as `gemm_packed`, threads and all), and at most
/// `gemm_detail::small_m_rows` rows of A stream them once. C must not overlap A or B; `epilogue`
/// as for `gemm_packed`. Every element is the sum `gemm` forms from the unpacked B, row-major,
/// bit for bit (each block of K summed from zero, in order, and added into C), but for the last
/// columns of at most 4 rows when fewer than a vector.
template <class T, class Epilogue = no_epilogue>
void gemm_prepacked(matrix_view<const T> a, const T* packed, matrix_view<T> c, bool accumulate = false, const Epilogue& epilogue = {}) {
  constexpr std::int64_t NR = gemm_detail::shape<T>::NR;
  const std::int64_t M = c.rows, N = c.cols, padded_n = (N + NR - 1) / NR * NR;
  if (M > 0 && M <= gemm_detail::small_m_rows && N > 0 && a.cols > 0) {
    constexpr std::int64_t block = 256;  // as `gemm`'s small-M path; a multiple of NR
    static_assert(block % NR == 0);
    parallel_for((N + block - 1) / block, [&](std::int64_t t) {
      const std::int64_t j0 = t * block, j1 = std::min(N, j0 + block);
      gemm_detail::small_m_dispatch<T>(M, [&](auto rows) {
        gemm_detail::small_m_packed<T, decltype(rows)::value>(a, packed, padded_n, c, j0, j1, accumulate);
      });
      if constexpr (!std::is_same_v<Epilogue, no_epilogue>) epilogue(c.data + j0 * c.col_stride, c.row_stride, c.col_stride, 0, j0, M, j1 - j0);
    });
    return;
  }
  if (gemm_detail::use_matrix_vector(a, N)) {  // B's one column is element p at packed[p * NR]
    gemm_detail::matrix_vector<T>(a, {packed, a.cols, 1, NR, 1}, c, accumulate, epilogue);
    return;
  }
  gemm_detail::gemm_blocked<T>(a, N, gemm_detail::prepacked<T>{packed, padded_n}, c, accumulate, epilogue);
}

}  // namespace kiln::kernels
