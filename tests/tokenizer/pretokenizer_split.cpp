// pretokenizer_split NAME: reads texts separated by NUL from stdin and writes
// each one's words, joined by \x01, each text's list ended by NUL. The driver
// for tools/pretokenizer_diff.py, which compares the hand-written split rules
// with the original regexes.
#include <iostream>
#include <iterator>
#include <string>

#include "tokenizer/pre_tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: pretokenizer_split NAME < texts\n";
    return 2;
  }
  auto pre = tern::PreTokenizer::from_name(argv[1]);
  if (!pre.is_ok()) {
    std::cerr << pre.status().message() << "\n";
    return 1;
  }
  const std::string all((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  for (size_t pos = 0; pos < all.size();) {
    size_t end = all.find('\0', pos);
    if (end == std::string::npos) end = all.size();
    const std::string_view text(all.data() + pos, end - pos);
    bool first = true;
    for (const tern::ByteRange& w : pre->split(text)) {
      if (!first) std::cout << '\x01';
      first = false;
      std::cout << text.substr(w.begin, w.end - w.begin);
    }
    std::cout << '\0';
    pos = end + 1;
  }
  return 0;
}
