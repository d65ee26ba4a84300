// stub
#include "kernels/x86/x86_impl.h"
namespace tern::kernels::x86 {
void avx2_quantize_q8_0(const float*, void*, int64_t) {}
void avx2_quantize_q8_1(const float*, void*, int64_t) {}
void avx2_quantize_q8_k(const float*, void*, int64_t) {}
void avx2_convert_bf16(const float*, void*, int64_t) {}
}
