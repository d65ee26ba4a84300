// tern's JSON reader and writer (core/json.h). The input is a text: read with a depth limit of
// 64 (the request limit); what is read is written back, and the written text must read back to
// the same text. Against an independent reader, nlohmann::json: the same texts accepted and the
// same values read (not in the allocation-failure build, where nlohmann's destructor would abort
// on a failed allocation — the reason core/json.h exists).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/json.h"
#include "fuzz.h"
#ifndef TERN_FUZZ_ALLOC_FAULTS
#include "../core/json_reference.h"
#endif

namespace {
constexpr int kDepth = 64;

[[noreturn]] void fail(const char* what, std::string_view text, const std::string& detail) {
  std::fprintf(stderr, "fuzz_json: %s\ninput: %.*s\n%s\n", what, static_cast<int>(text.size()), text.data(),
               detail.c_str());
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto ours = tern::Json::parse(text, kDepth);
  if (ours.is_ok()) {
    const std::string written = ours->dump();
    const auto again = tern::Json::parse(written, kDepth);
    if (!again.is_ok()) fail("what was written does not read back", text, again.status().message());
    if (again->dump() != written) fail("written twice differently", text, written + "\n" + again->dump());
  }
#ifndef TERN_FUZZ_ALLOC_FAULTS
  // nlohmann stops reading at a NUL byte (it takes it for the end of a C string), so texts with
  // one are not compared; ours refuses the NUL, as RFC 8259 does.
  if (tern::test::json_nesting(text) <= kDepth && text.find('\0') == std::string_view::npos) {
    const auto ref = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (ours.is_ok() == ref.is_discarded())
      fail(ours.is_ok() ? "accepted what the reference refuses" : "refused what the reference accepts", text,
           ours.status().message());
    if (ours.is_ok()) {
      const std::string d = tern::test::json_difference(*ours, ref);
      if (!d.empty()) fail("read differently from the reference", text, d);
    }
  }
#endif
  return 0;
}
