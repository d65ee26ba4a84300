// kernels/sparse24.h — the packed panel layout of Q8_0_S24 weights (the
// 2:4-sparse Q8_0 type of quant/blocks.h), shared by the packer (pack.cpp)
// and the AVX-512 kernel (x86/avx512_sparse24.cpp), which reads the sparse
// values and expands them in registers: the matrix streams from memory at
// 22 bytes per 32 weights instead of Q8_0's 34.
//
// One block (32 columns) of a panel of 32 rows, 32 x 22 = 704 bytes:
//
//   [fp16 d of rows 0..31]                                           64 bytes
//   for half h = 0, 1 (rows 16h .. 16h + 15), group k = 0..7 (columns 4k .. 4k + 3):
//     [u64: bits 4r .. 4r + 3 = row 16h + r's mask nibble of group k]  8 bytes
//     [the two kept values of group k of rows 16h .. 16h + 15, + 128]  32 bytes
//
// vpexpandb of the 32 values under the 64-bit mask puts row r's group in
// dword r, element by element as Q8_0's row-per-lane panels hold a dense
// block (zeros where a weight was pruned). The values are stored + 128 (as
// unsigned bytes), the form decode's vpdpbusd takes, merged into 128s where
// pruned: one instruction per group on the memory-bound path; prefill, which
// reuses a block for many tokens, takes the 128 back off. Rows past the matrix repeat its
// last row, as in every panel.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::kernels {

inline constexpr size_t kS24PackedBlock = 704;

// Block ib of the 32 rows rows[0..31] (each a row of Q8_0_S24 blocks) into dst.
void pack_s24_block(const uint8_t* const* rows, int64_t ib, uint8_t* dst);

// A row of n weights as Q8_0 blocks (zeros where pruned): what a level without
// a Q8_0_S24 kernel of its own computes with (matmul_kernels.cpp).
void expand_s24_to_q8_0(const void* src, void* dst, int64_t n);

}  // namespace tern::kernels
