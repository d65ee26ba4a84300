// hf_tokenize [--parse-special] DIR < texts.json: reads a JSON list of strings, tokenizes each with
// the vocabulary read_hf_tokenizer(DIR) gives (through GGUF bytes, as a
// converted file would load) and prints a JSON list of id lists. The driver for
// tools/hf_tokenizer_diff.sh, which compares it with a Hugging Face tokenizers
// implementation on real tokenizer.json files. --parse-special: text of special
// tokens becomes those tokens (what Hugging Face tokenizers always do).
// hf_tokenize --info DIR: prints the metadata keys instead (arrays summarised).
#include <nlohmann/json.hpp>

#include <iostream>
#include <iterator>
#include <string>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  const bool parse_special = argc == 3 && std::string(argv[1]) == "--parse-special";
  const bool info = argc == 3 && std::string(argv[1]) == "--info";
  if (argc != 2 && !parse_special && !info) {
    std::cerr << "usage: hf_tokenize [--parse-special] DIR < texts.json | hf_tokenize --info DIR\n";
    return 2;
  }
  auto kv = tern::read_hf_tokenizer(argv[argc - 1]);
  if (!kv.is_ok()) {
    std::cerr << kv.status().message() << "\n";
    return 1;
  }
  if (info) {
    for (const auto& [key, value] : *kv) std::cout << key << " = " << value.to_display() << "\n";
    return 0;
  }
  tern::gguf::GgufWriter w;
  for (const auto& [key, value] : *kv) w.set(key, value);
  auto file = tern::gguf::GgufFile::from_bytes(w.to_bytes());
  if (!file.is_ok()) {
    std::cerr << file.status().message() << "\n";
    return 1;
  }
  auto tok = tern::Tokenizer::from_gguf(*file);
  if (!tok.is_ok()) {
    std::cerr << tok.status().message() << "\n";
    return 1;
  }
  const std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  const nlohmann::json texts = nlohmann::json::parse(input, nullptr, false);
  if (!texts.is_array()) {
    std::cerr << "stdin is not a JSON list of strings\n";
    return 2;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& t : texts) out.push_back((*tok)->encode(t.get<std::string>(), false, parse_special));
  std::cout << out.dump() << "\n";
  std::cerr << "model " << (*tok)->vocab().model << ", pre " << (*tok)->vocab().pre << ", " << (*tok)->n_vocab()
            << " tokens\n";
  return 0;
}
