// tern convert --from llama2c --model M.bin --vocab tok.bin -o OUT.gguf
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "model/llama2c.h"

namespace tern::cli {

int cmd_convert(int argc, char** argv) {
  std::string from;
  Llama2cConvertOptions o;
  ArgParser args("convert", "tern convert --from llama2c --model MODEL.bin --vocab TOKENIZER.bin -o OUT.gguf");
  args.add("--from", &from, "source format (llama2c)");
  args.add("-m,--model", &o.model_path, "source checkpoint");
  args.add("--vocab", &o.vocab_path, "source tokenizer");
  args.add("-o,--output", &o.out_path, "GGUF file to write");
  args.add("--name", &o.name, "general.name (default: the checkpoint's file name)");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  if (from != "llama2c")
    return report(error(ErrorKind::InvalidArgument, from.empty() ? "convert: --from is required (llama2c)"
                                                                  : "convert: unknown --from format '" + from + "' (llama2c)"));
  if (o.model_path.empty() || o.vocab_path.empty() || o.out_path.empty())
    return report(error(ErrorKind::InvalidArgument, "convert: --model, --vocab and -o are required"));
  if (auto s = convert_llama2c(o); !s) return report(s);
  std::fprintf(stderr, "tern: wrote %s\n", o.out_path.c_str());
  return 0;
}

}  // namespace tern::cli
