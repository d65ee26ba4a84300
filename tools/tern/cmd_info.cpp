// tern info MODEL.gguf — metadata and tensor table.
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "model/hf_model.h"
#include "gguf/reader.h"

namespace tern::cli {

int cmd_info(int argc, char** argv) {
  std::string path;
  int max_items = 8;
  ArgParser args("info", "tern info MODEL.gguf [--items N]");
  args.add_positional("MODEL", &path, "GGUF file");
  args.add("--items", &max_items, "array items to show per key (default 8)");
  if (auto s = args.parse(argc, argv); !s) return report(s);
  if (args.help_requested()) {
    std::fputs(args.help_text().c_str(), stdout);
    return 0;
  }
  auto file = hf::open_model_file(path);  // a GGUF file or an HF directory
  if (!file) return report(file.status());
  std::printf("file: %s\nversion: %u  alignment: %u  data offset: %llu  size: %llu bytes\n", path.c_str(),
              file->version(), file->alignment(), static_cast<unsigned long long>(file->data_offset()),
              static_cast<unsigned long long>(file->file_size()));
  std::printf("\nmetadata (%zu keys):\n", file->metadata().size());
  for (const auto& [key, value] : file->metadata())
    std::printf("  %-44s %-7s %s\n", key.c_str(), gguf::value_type_name(value.type()),
                value.to_display(static_cast<size_t>(std::max(0, max_items))).c_str());
  std::printf("\ntensors (%zu):\n", file->tensors().size());
  std::printf("  %-40s %-6s %-24s %14s %12s\n", "name", "type", "shape", "offset", "bytes");
  uint64_t total = 0, params = 0;
  for (const auto& t : file->tensors()) {
    std::printf("  %-40s %-6s %-24s %14llu %12llu\n", t.name.c_str(), std::string(gguf::type_name(t.type)).c_str(),
                t.shape_string().c_str(), static_cast<unsigned long long>(t.offset),
                static_cast<unsigned long long>(t.n_bytes));
    total += t.n_bytes;
    params += t.n_elements;
  }
  std::printf("\n%llu parameters, %.2f MiB of tensor data\n", static_cast<unsigned long long>(params),
              static_cast<double>(total) / (1 << 20));
  return 0;
}

}  // namespace tern::cli
