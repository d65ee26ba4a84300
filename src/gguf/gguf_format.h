// gguf/gguf_format.h — the GGUF container's byte layout and type ids.
//
//   file        := header tensor_info[n_tensors] pad(ALIGN) data
//   header      := u32 magic "GGUF" (0x46554747 LE), u32 version (2|3),
//                  u64 n_tensors, u64 n_kv, kv[n_kv]
//   string      := u64 len, bytes[len]          (UTF-8, no NUL terminator)
//   kv          := string key, u32 value_type, value
//   array value := u32 elem_type, u64 n, value[n]      (arrays may nest)
//   tensor_info := string name, u32 n_dims (1..4), u64 dims[n_dims],
//                  u32 ggml_type, u64 offset (relative to data, multiple of ALIGN)
//
// All integers little-endian, fields packed; only the data section is aligned
// (ALIGN = general.alignment, default 32). dims[0] is the contiguous row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tern::gguf {

inline constexpr uint32_t kMagic = 0x46554747u;  // "GGUF" read as little-endian u32
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxDims = 4;

enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
inline constexpr uint32_t kValueTypeCount = 13;
const char* value_type_name(ValueType t);
// Bytes of one scalar of this type on disk; 0 for String and Array.
size_t value_type_size(ValueType t);

// ggml tensor element types. Ids are fixed by the format; gaps are removed types.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21,
  IQ2_S = 22, IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28,
  IQ1_M = 29, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
  // tern's own (ggml has no FP8 type; ids far past ggml's so they never meet
  // one of its future types): one OCP FP8 code per weight, the row's f32 scale
  // in the tensor "<name>.scale" (docs/quantize.md). Other readers refuse the
  // type instead of misreading it.
  F8_E4M3 = 1000, F8_E5M2 = 1001,
  // tern's own: Q8_0 values of a 2:4-sparse row, kept values and their positions (quant/blocks.h).
  Q8_0_S24 = 1002,
};

// Storage facts of a type: a row of `n` elements takes n / block_elems * block_bytes bytes.
struct TypeSize {
  std::string_view name;
  uint32_t block_elems;
  uint32_t block_bytes;
};

// Known layout of a ggml type id, or nullopt for ids the format does not define.
std::optional<TypeSize> type_size(uint32_t ggml_type);
std::string_view type_name(GgmlType t);

}  // namespace tern::gguf
