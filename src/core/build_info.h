// core/build_info.h — what built this binary (for benchmark records).
#pragma once

namespace tern {

const char* build_git_sha();   // short sha, "-dirty" when tracked files had changes
const char* build_compiler();  // compiler id and version

}  // namespace tern
