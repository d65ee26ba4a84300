// One line of a `tern batch` JSONL file (tools/tern/batch_line.h): JSON → GenerationRequest with
// all its validation. Whatever the line, the answer is a request or an error message, never a
// throw or undefined behaviour; an error must say something.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "batch_line.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  const std::string line(reinterpret_cast<const char*>(data), size);
  tern::cli::BatchLine item;
  const std::string err = tern::cli::parse_batch_line(line, item);
  if (err.empty() && item.request.prompt.empty() && item.request.prompt_tokens.empty() &&
      line.find("\"prompt\"") == std::string::npos && line.find("\\u") == std::string::npos) {
    std::fprintf(stderr, "fuzz_batch_line: accepted a line without a prompt\n");
    std::abort();
  }
  return 0;
}
