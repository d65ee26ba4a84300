// kernels/x86/x86_impl.h — the per-family entry points behind x86_kernels.h (internal).
//
// Files per level and family (each compiled with its level's flags, see
// kernels/CMakeLists.txt):
//
//   act_quant_avx512.cpp / act_quant_avx2.cpp   f32 activations -> Q8_0, Q8_1, Q8_K, BF16
//   avx512_legacy.cpp / avx2_legacy.cpp         Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 IQ4_NL (32-element blocks; avx2: Q4_1 Q5_0 Q5_1)
//   avx512_kquants.cpp / avx2_kquants.cpp       Q2_K Q3_K Q4_K Q5_K Q6_K (256-element super-blocks; avx2: the table only)
//   avx512_float.cpp / avx2_float.cpp           F32 BF16 (avx2: F32 FP8)
//   avx2_f16.cpp                                F16 BF16: 32-row panels read by element (avx2)
//   avx512_f16.cpp                              F16: 32-row panels read by element, packed or in place
//   avx512_panel_kquants.cpp                    32-row GEMM panels for Q4_K, Q5_K, Q6_K (row-per-lane layout)
//   avx512_panel_legacy.cpp                     32-row GEMM panels for Q4_0, Q8_0, IQ4_NL
//   avx512_sparse24.cpp                         the Q8_0 panel reading 2:4-sparse Q8_0_S24 (+VBMI2)
//   avx2_panel_legacy.cpp                       32-row panels for Q4_0, Q8_0, IQ4_NL, MXFP4 (8-row groups)
//   avx2_panel_kquants.cpp                      32-row panels for Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (8-row groups)
//   avx512_w8a8.cpp / avx2_w8a8.cpp             W8A8: per-token int8 activations x per-row int8 weights
//   avx512_matmul.cpp / avx2_matmul.cpp         the level's table: asks each family in turn
//   kv_quant_avx512.cpp                         the q8_0 KV cache's roundings
//   peak_loops_x86.cpp                          the roofline's throughput loops (target attributes)
//
// ODR rule for every file compiled with -mavx*: include only <immintrin.h>,
// <cstdint>, <cstddef>, <cstring> and headers that declare plain structs and
// non-inline functions; keep helpers in an anonymous namespace. An inline
// function or template instantiated both here and in baseline code could be
// merged by the linker into the AVX copy and break the portable build.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/matmul_kernels.h"

namespace tern::kernels::x86 {

// Activation quantizers: x [n] f32 -> one row of blocks, bit-exact with
// quant::traits(T)->from_float (and with float_to_bf16 for BF16).
void avx512_quantize_q8_0(const float* x, void* xq, int64_t n);
void avx512_quantize_q8_0_biased(const float* x, void* xq, int64_t n);  // quants stored + 128
void avx512_quantize_q8_1(const float* x, void* xq, int64_t n);
void avx512_quantize_q8_k(const float* x, void* xq, int64_t n);
void avx512_convert_bf16(const float* x, void* xq, int64_t n);
void avx2_quantize_q8_0(const float* x, void* xq, int64_t n);
void avx2_quantize_q8_1(const float* x, void* xq, int64_t n);
void avx2_quantize_q8_k(const float* x, void* xq, int64_t n);
void avx2_convert_bf16(const float* x, void* xq, int64_t n);

// A panel tile: n_rows <= 32 rows x any n_cols, arguments as MatmulKernels::tile.
// Types with one run every tile through it (decode too): a result is then the
// same operations whatever the tile shape, i.e. bit-exact across batch sizes.
using PanelFn = void (*)(int64_t n, const uint8_t* w, size_t w_stride, int n_rows, const uint8_t* xq, size_t x_stride,
                         int n_cols, float* y, size_t ldy);
// packed: the kernel reading one packed panel (MatmulKernels::pack) instead of rows in place.
PanelFn avx512_kquant_panel(gguf::GgmlType weight_type, bool packed);   // Q4_K Q5_K Q6_K
PanelFn avx512_legacy_panel(gguf::GgmlType weight_type, bool packed);   // Q4_0 Q8_0 IQ4_NL
PanelFn avx512_sparse24_panel(bool packed);                             // Q8_0_S24 (needs VBMI2)
PanelFn avx2_legacy_panel(gguf::GgmlType weight_type, bool packed);     // Q4_0 Q8_0 IQ4_NL MXFP4
PanelFn avx2_kquant_panel(gguf::GgmlType weight_type, bool packed);     // Q2_K Q3_K Q4_K Q5_K Q6_K

// The q8_0 KV cache's roundings (kernels/kv_quant.cpp): max |x| over n, and
// the codes of x * inv rounded as core/kv_format.cpp does.
float avx512_abs_max(const float* x, int n);
void avx512_round_codes(const float* x, int n, float inv, int8_t* q);

// Each returns its family's row for the type, or nullptr.
const MatmulKernels* avx512_legacy_kernels(gguf::GgmlType weight_type);
const MatmulKernels* avx512_kquant_kernels(gguf::GgmlType weight_type);
const MatmulKernels* avx512_float_kernels(gguf::GgmlType weight_type);
const MatmulKernels* avx512_f16_kernels();
// FP8 weights in F16's by-element panels (one byte per element); nullptr for other types.
const MatmulKernels* avx512_fp8_kernels(gguf::GgmlType t);
const MatmulKernels* avx512_w8a8_kernels(gguf::GgmlType weight_type);  // I8 (W8A8, kernels/w8a8.h)
const MatmulKernels* avx2_legacy_kernels(gguf::GgmlType weight_type);
const MatmulKernels* avx2_kquant_kernels(gguf::GgmlType weight_type);
const MatmulKernels* avx2_float_kernels(gguf::GgmlType weight_type);
const MatmulKernels* avx2_by_element_kernels(gguf::GgmlType weight_type);  // F16 BF16
const MatmulKernels* avx2_w8a8_kernels(gguf::GgmlType weight_type);  // I8 (W8A8)

}  // namespace tern::kernels::x86
