#include "gguf/gguf_format.h"

namespace tern::gguf {

const char* value_type_name(ValueType t) {
  static const char* const kNames[] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                       "bool", "string", "array", "u64", "i64", "f64"};
  auto i = static_cast<uint32_t>(t);
  return i < kValueTypeCount ? kNames[i] : "?";
}

size_t value_type_size(ValueType t) {
  switch (t) {
    case ValueType::U8: case ValueType::I8: case ValueType::Bool: return 1;
    case ValueType::U16: case ValueType::I16: return 2;
    case ValueType::U32: case ValueType::I32: case ValueType::F32: return 4;
    case ValueType::U64: case ValueType::I64: case ValueType::F64: return 8;
    case ValueType::String: case ValueType::Array: return 0;
  }
  return 0;
}

std::optional<TypeSize> type_size(uint32_t ggml_type) {
  switch (static_cast<GgmlType>(ggml_type)) {
    case GgmlType::F32: return TypeSize{"F32", 1, 4};
    case GgmlType::F16: return TypeSize{"F16", 1, 2};
    case GgmlType::BF16: return TypeSize{"BF16", 1, 2};
    case GgmlType::F64: return TypeSize{"F64", 1, 8};
    case GgmlType::I8: return TypeSize{"I8", 1, 1};
    case GgmlType::I16: return TypeSize{"I16", 1, 2};
    case GgmlType::I32: return TypeSize{"I32", 1, 4};
    case GgmlType::I64: return TypeSize{"I64", 1, 8};
    case GgmlType::Q4_0: return TypeSize{"Q4_0", 32, 18};
    case GgmlType::Q4_1: return TypeSize{"Q4_1", 32, 20};
    case GgmlType::Q5_0: return TypeSize{"Q5_0", 32, 22};
    case GgmlType::Q5_1: return TypeSize{"Q5_1", 32, 24};
    case GgmlType::Q8_0: return TypeSize{"Q8_0", 32, 34};
    case GgmlType::Q8_1: return TypeSize{"Q8_1", 32, 36};
    case GgmlType::Q2_K: return TypeSize{"Q2_K", 256, 84};
    case GgmlType::Q3_K: return TypeSize{"Q3_K", 256, 110};
    case GgmlType::Q4_K: return TypeSize{"Q4_K", 256, 144};
    case GgmlType::Q5_K: return TypeSize{"Q5_K", 256, 176};
    case GgmlType::Q6_K: return TypeSize{"Q6_K", 256, 210};
    case GgmlType::Q8_K: return TypeSize{"Q8_K", 256, 292};
    case GgmlType::IQ2_XXS: return TypeSize{"IQ2_XXS", 256, 66};
    case GgmlType::IQ2_XS: return TypeSize{"IQ2_XS", 256, 74};
    case GgmlType::IQ3_XXS: return TypeSize{"IQ3_XXS", 256, 98};
    case GgmlType::IQ1_S: return TypeSize{"IQ1_S", 256, 50};
    case GgmlType::IQ4_NL: return TypeSize{"IQ4_NL", 32, 18};
    case GgmlType::IQ3_S: return TypeSize{"IQ3_S", 256, 110};
    case GgmlType::IQ2_S: return TypeSize{"IQ2_S", 256, 82};
    case GgmlType::IQ4_XS: return TypeSize{"IQ4_XS", 256, 136};
    case GgmlType::IQ1_M: return TypeSize{"IQ1_M", 256, 56};
    case GgmlType::TQ1_0: return TypeSize{"TQ1_0", 256, 54};
    case GgmlType::TQ2_0: return TypeSize{"TQ2_0", 256, 66};
    case GgmlType::MXFP4: return TypeSize{"MXFP4", 32, 17};
    case GgmlType::F8_E4M3: return TypeSize{"F8_E4M3", 1, 1};
    case GgmlType::F8_E5M2: return TypeSize{"F8_E5M2", 1, 1};
    case GgmlType::Q8_0_S24: return TypeSize{"Q8_0_S24", 32, 22};
  }
  return std::nullopt;
}

std::string_view type_name(GgmlType t) {
  auto s = type_size(static_cast<uint32_t>(t));
  return s ? s->name : std::string_view("unknown");
}

}  // namespace tern::gguf
