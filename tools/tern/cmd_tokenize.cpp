// tern tokenize -m MODEL (-p TEXT | -f FILE) [--no-special] — ids on one line.
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "model/hf_model.h"
#include "core/input_file.h"
#include "gguf/reader.h"
#include "output.h"
#include "tokenizer/tokenizer.h"

namespace tern::cli {

int cmd_tokenize(int argc, char** argv) {
  std::string model_path, text, file;
  bool no_special = false, have_text = false;
  ArgParser args("tokenize", "tern tokenize -m MODEL (-p TEXT | -f FILE) [--no-special]");
  args.add("-m,--model", &model_path, "GGUF model or vocabulary file");
  args.add("-p,--prompt", &text, "text to tokenize");
  args.add("-f,--file", &file, "tokenize this file's bytes exactly (regular file, up to 1 GiB)");
  args.add_flag("--no-special", &no_special, "add no BOS/EOS and treat special-token text as plain text");
  text = "\x01unset";
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  have_text = text != "\x01unset";
  if (model_path.empty()) return report(error(ErrorKind::InvalidArgument, "tokenize: -m MODEL is required"));
  if (have_text == !file.empty())
    return report(error(ErrorKind::InvalidArgument, "tokenize: give exactly one of -p TEXT or -f FILE"));
  if (!file.empty()) {
    auto data = read_file(file);
    if (!data) return report(data.status());
    text = *data;
  }
  auto gguf = hf::open_model_file(model_path);  // a GGUF file or an HF directory
  if (!gguf) return report(gguf.status());
  auto tok = Tokenizer::from_gguf(*gguf);
  if (!tok) return report(tok.status().with_context(model_path));
  const auto ids = (*tok)->encode(text, !no_special, !no_special);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  if (auto s = write_stdout(line + "\n"); !s) return report(s);
  return 0;
}

}  // namespace tern::cli
