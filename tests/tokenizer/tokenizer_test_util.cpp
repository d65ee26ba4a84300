#include "tokenizer_test_util.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "tokenizer/byte_level.h"
#include "core/utf8.h"

namespace tern::test {

TinySpm::TinySpm() {
  auto add = [&](std::string text, float score, int32_t type) {
    tokens.push_back(std::move(text));
    scores.push_back(score);
    types.push_back(type);
  };
  add("<unk>", 0, 2);
  add("<s>", 0, 3);
  add("</s>", 0, 3);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    add(buf, 0, 6);
  }
  const std::string sp = "\xE2\x96\x81";
  add(sp, -1, 1);
  for (const char* c : {"h", "e", "l", "o", "w", "r", "d"}) add(c, -2, 1);
  add(sp + "h", -3, 1);
  add("ll", -3.5f, 1);
  add(sp + "he", -4, 1);
  add("llo", -4.5f, 1);
  add(sp + "hello", -5, 1);
  add("<|user|>", 0, 4);
  add("<|im_end|>", 0, 3);
  add(sp + "w", -3, 1);
  add("or", -3, 1);
  add(sp + "wor", -4, 1);
  add(sp + "world", -5, 1);
  add("ld", -3, 1);
}

gguf::GgufWriter TinySpm::writer() const {
  gguf::GgufWriter w;
  w.set("general.architecture", gguf::Value::of_string("llama"));
  w.set("tokenizer.ggml.model", gguf::Value::of_string("llama"));
  w.set("tokenizer.ggml.pre", gguf::Value::of_string("default"));
  w.set("tokenizer.ggml.tokens", gguf::Value::of_strings(tokens));
  w.set("tokenizer.ggml.scores", gguf::Value::of_f32s(scores));
  w.set("tokenizer.ggml.token_type", gguf::Value::of_i32s(types));
  w.set("tokenizer.ggml.bos_token_id", gguf::Value::of_u32(kBos));
  w.set("tokenizer.ggml.eos_token_id", gguf::Value::of_u32(kEos));
  w.set("tokenizer.ggml.unknown_token_id", gguf::Value::of_u32(kUnk));
  w.set("tokenizer.ggml.add_bos_token", gguf::Value::of_bool(true));
  w.set("tokenizer.ggml.add_eos_token", gguf::Value::of_bool(false));
  return w;
}

Result<gguf::GgufFile> to_file(const gguf::GgufWriter& w) { return gguf::GgufFile::from_bytes(w.to_bytes()); }

std::unique_ptr<Tokenizer> build(const gguf::GgufWriter& w) {
  auto file = to_file(w);
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  if (!file.is_ok()) return nullptr;
  auto tok = Tokenizer::from_gguf(*file);
  EXPECT_TRUE(tok.is_ok()) << tok.status().message();
  if (!tok.is_ok()) return nullptr;
  return std::move(tok).value();
}

gguf::GgufWriter tiny_bpe_writer(const std::string& pre) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b)
    tokens.push_back(utf8::encode(byte_level::byte_to_codepoint(static_cast<uint8_t>(b))));
  const std::string g = "\xC4\xA0";  // 'Ġ', the spelling of a space
  const std::vector<std::string> merges = {"h e", "l l",      "he ll", "hell o",     g + " w",
                                           "o r", g + "w or", "l d",   g + "wor ld", "1 2"};
  for (const std::string& m : merges) {
    const size_t sep = m.find(' ');
    tokens.push_back(m.substr(0, sep) + m.substr(sep + 1));
  }
  tokens.push_back("<|endoftext|>");
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;
  gguf::GgufWriter w;
  w.set("general.architecture", gguf::Value::of_string("gpt2"));
  w.set("tokenizer.ggml.model", gguf::Value::of_string("gpt2"));
  w.set("tokenizer.ggml.pre", gguf::Value::of_string(pre));
  w.set("tokenizer.ggml.tokens", gguf::Value::of_strings(tokens));
  w.set("tokenizer.ggml.token_type", gguf::Value::of_i32s(types));
  w.set("tokenizer.ggml.merges", gguf::Value::of_strings(merges));
  w.set("tokenizer.ggml.bos_token_id", gguf::Value::of_u32(static_cast<uint32_t>(tokens.size() - 1)));
  w.set("tokenizer.ggml.eos_token_id", gguf::Value::of_u32(static_cast<uint32_t>(tokens.size() - 1)));
  return w;
}

std::filesystem::path vectors_dir() { return std::filesystem::path(TERN_SHARED_DIR) / "testdata" / "tokenizers"; }

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split_inputs(const std::string& data) {
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> items;
  size_t pos = 0;
  for (size_t hit; (hit = data.find(separator, pos)) != std::string::npos; pos = hit + separator.size())
    items.push_back(data.substr(pos, hit - pos));
  if (pos < data.size()) items.push_back(data.substr(pos));
  return items;
}

std::vector<std::vector<TokenId>> parse_outputs(const std::string& data) {
  std::vector<std::vector<TokenId>> rows;
  std::istringstream lines(data);
  for (std::string line; std::getline(lines, line);) {
    std::vector<TokenId> ids;
    std::istringstream fields(line);
    for (long id; fields >> id;) ids.push_back(static_cast<TokenId>(id));
    rows.push_back(std::move(ids));
  }
  return rows;
}

}  // namespace tern::test
