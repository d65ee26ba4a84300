// kernels/matmul_kernels.h — the per-weight-type kernel table behind matmul.
//
// A weight matrix W [n_rows][n] (rows of type T, GGUF blocks) multiplies
// activations X [n_cols][n] (f32 rows). Fast kernels first quantize each
// activation row to act_type (Q8_0, Q8_1, Q8_K, or F16/BF16/F32 for float
// weights) so the inner loops run on integer or narrow dot products, then a
// tile kernel computes an (n_rows x n_cols) block of outputs, loading each
// weight block once for all columns of the tile and each activation block
// once for all rows:
//
//      y[c * ldy + r] = dot(W row r, X row c)     r < n_rows, c < n_cols
//
// Tile kernels accept any n_rows <= max_rows and n_cols <= max_cols. The
// table for a type is chosen once per CpuLevel; the Scalar level is the
// reference (act_type F32, vec_dot of quant traits) every other level is
// tested against. Tables are immutable; kernels are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/gguf_format.h"
#include "kernels/cpu_features.h"

namespace tern::kernels {

struct MatmulKernels {
  gguf::GgmlType act_type;
  // x: [n] f32 -> xq: one row of act_type blocks (n a multiple of its block size).
  void (*quantize_act)(const float* x, void* xq, int64_t n);
  // Rows w + r * w_stride (bytes), activation rows xq + c * x_stride (bytes).
  void (*tile)(int64_t n, const void* w, size_t w_stride, int n_rows, const void* xq, size_t x_stride, int n_cols,
               float* y, size_t ldy);
  int max_rows;
  int max_cols;
  CpuLevel level;
  // Optional packed form (the 32-row panel kernels): the weights re-ordered
  // once, at load, into panels of 32 rows whose blocks hold, for each dword of
  // the block, that dword of 16 rows side by side -- what the kernel would
  // otherwise build with transposes on every call. Same values in the same
  // lanes, so packed_tile gives bit-identical results to tile.
  //
  //   panel p (rows 32p .. 32p+31; rows past the matrix repeat its last row),
  //   block b:  [lead bytes of rows 0..31] [half h = 0,1][dword j][16 rows x 4 bytes]
  //             [trailing bytes of rows 0..31]            block = lead + 4 n_dwords + trail
  //
  // by_element (one-element "blocks", F16): for each element k, the values of
  // the panel's 32 rows side by side; lead/dwords/trail are unused.
  struct PackLayout {
    int lead_bytes = 0;
    int n_dwords = 0;
    int trail_bytes = 0;
    bool by_element = false;
    // Q8_0_S24's own layout (kernels/sparse24.h); lead/dwords/trail unused.
    bool sparse24 = false;
    // Q8_0_S24 rows expanded to Q8_0 blocks at load, then packed as Q8_0
    // (lead/dwords/trail Q8_0's): levels without a sparse kernel run at Q8_0's
    // speed with Q8_0's memory instead of expanding every tile.
    bool s24_as_q8_0 = false;
  };
  PackLayout pack{};
  // Like tile, over one packed panel of n_rows <= 32 real rows (nullptr: no packed form).
  void (*packed_tile)(int64_t n, const void* panel, int n_rows, const void* xq, size_t x_stride, int n_cols, float* y,
                      size_t ldy) = nullptr;
  // Activation bytes the driver passes over every row tile before moving to
  // the next columns: each pass streams the weights once more. 512 KiB keeps
  // them in L2; a kernel whose activations are cheap to stream from L3 (F16's
  // broadcasts) asks for more, so its weights are read fewer times.
  size_t act_block_bytes = size_t{512} << 10;
  // quantize_act writes act_type blocks whose int8 quants are stored + 128
  // (unsigned bytes, for vpdpbusd's unsigned operand); scales as act_type.
  bool act_biased = false;
};

// Kernels for `weight_type` at the best level this CPU supports (nullptr when
// the type has no traits).
const MatmulKernels* matmul_kernels(gguf::GgmlType weight_type);
// Kernels at exactly `level` (nullptr when this CPU or build lacks it); tests
// use this to compare every level with the Scalar reference.
const MatmulKernels* matmul_kernels_at(gguf::GgmlType weight_type, CpuLevel level);

// Bytes of one activation row of n elements quantized for these kernels.
size_t act_row_bytes(const MatmulKernels& k, int64_t n);

}  // namespace tern::kernels
