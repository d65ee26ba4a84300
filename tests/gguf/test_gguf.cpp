#include <gtest/gtest.h>
#include "gguf/reader.h"
#include "gguf/writer.h"
using namespace tern::gguf;
TEST(Gguf, Placeholder) { GgufWriter w; w.set("general.architecture", Value::of_string("llama"));
  auto f = GgufFile::from_bytes(w.to_bytes()); ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(*f->get_string("general.architecture"), "llama"); }
