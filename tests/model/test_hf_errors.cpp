// Bad Hugging Face checkpoints give one clear error, never a crash: malformed
// safetensors (every number in the header checked against the file),
// unsupported model types and dtypes, missing shards and tensors, shapes the
// config does not imply. Each case starts from a directory that loads (the
// control) and breaks one thing.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>

#include "arch_checks.h"
#include "gguf/safetensors.h"
#include "hf_writer.h"
#include "model/hf_model.h"

namespace tern {
namespace {

using namespace test;
using json = nlohmann::json;

// The safetensors image with its header replaced by `header` (padded to 8).
std::vector<uint8_t> with_header(const std::string& header, size_t n_data) {
  std::string text = header;
  while (text.size() % 8) text += ' ';
  const uint64_t n = text.size();
  std::vector<uint8_t> out(8 + text.size() + n_data, 0);
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  return out;
}

void expect_st_error(std::vector<uint8_t> bytes, const std::string& mention) {
  auto f = safetensors::SafetensorsFile::from_bytes(std::move(bytes));
  ASSERT_FALSE(f.is_ok()) << mention;
  EXPECT_NE(f.status().message().find(mention), std::string::npos) << f.status().message();
}

TEST(Safetensors, ReadsWhatTheWriterWrote) {
  std::vector<uint8_t> a(12), b(4);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i);
  auto f = safetensors::SafetensorsFile::from_bytes(
      safetensors_bytes({{"a", "F32", {3}, a}, {"b", "BF16", {1, 2}, b}}));
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  const auto* t = f->find("a");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, (std::vector<uint64_t>{3}));
  EXPECT_EQ(t->bytes.size(), 12u);
  EXPECT_EQ(t->bytes[5], 5);
  EXPECT_EQ(f->find("b")->ggml_type(), gguf::GgmlType::BF16);
  EXPECT_EQ(f->metadata().at("format"), "pt");
}

TEST(Safetensors, MalformedFilesAreRefused) {
  expect_st_error({1, 2, 3}, "shorter than");
  std::vector<uint8_t> huge(16, 0);
  huge[0] = 0xff, huge[7] = 0x7f;
  expect_st_error(huge, "header length");
  expect_st_error(with_header("{not json", 0), "not a JSON object: invalid JSON at byte 1");
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                              R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), "'a' appears twice");
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4), "outside");
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 16), "needs 3 x 4 bytes");
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 16), "overlap");
  expect_st_error(with_header(R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[1,5]}})", 8), "not a multiple");
  expect_st_error(with_header(R"({"a":{"dtype":"Q9","shape":[2],"data_offsets":[0,2]}})", 8), "unknown dtype 'Q9'");
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 8), "shape entry");
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 8),
                  "larger than the file");
  expect_st_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8), "outside");
  expect_st_error(with_header(R"({"a":[1,2]})", 8), "not an object");
}

// Every prefix of a valid file is refused cleanly (a truncated download).
TEST(Safetensors, EveryTruncationIsAnError) {
  const auto full = safetensors_bytes({{"a", "F32", {4}, std::vector<uint8_t>(16, 1)}});
  for (size_t n = 0; n < full.size(); ++n) {
    auto f = safetensors::SafetensorsFile::from_bytes({full.begin(), full.begin() + n});
    EXPECT_FALSE(f.is_ok()) << n;
  }
}

// Random byte changes in a valid file (the header's digits, quotes, brackets):
// parsing never crashes, and whatever it accepts lies inside the image.
TEST(Safetensors, MutatedHeadersStayInBounds) {
  const auto full = safetensors_bytes({{"a", "F32", {4}, std::vector<uint8_t>(16, 1)},
                                       {"b", "F16", {2, 3}, std::vector<uint8_t>(12, 2)}});
  std::mt19937 rng(7);
  int n_ok = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> bytes = full;
    for (int k = 0; k < 1 + iter % 3; ++k) {
      const size_t at = rng() % bytes.size();
      bytes[at] = iter % 2 ? static_cast<uint8_t>(rng()) : static_cast<uint8_t>("0123456789[]{},\"\x00"[rng() % 17]);
    }
    auto f = safetensors::SafetensorsFile::from_bytes(bytes);
    if (!f.is_ok()) continue;
    ++n_ok;
    for (const auto& t : f->tensors()) {
      ASSERT_EQ(t.bytes.size(), t.n_elements * t.elem_bytes) << t.name;
      uint8_t sum = 0;  // read every byte: an out-of-bounds span fails under ASan
      for (uint8_t b : t.bytes) sum = static_cast<uint8_t>(sum + b);
      (void)sum;
    }
  }
  EXPECT_GT(n_ok, 0) << "some mutations (in tensor bytes) leave a valid file";
}

class HfErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_.seed = 40;
    sm_ = make_synthetic(spec_);
    dir_ = fresh_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    config_ = write_hf_dir(sm_, spec_, dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write_config(const json& c) { std::ofstream(dir_ + "/config.json") << c.dump(); }
  // Writes model.safetensors again with what `edit` appends for each of its tensors.
  void rewrite_checkpoint(const std::function<void(StTensor, std::vector<StTensor>&)>& edit) {
    auto st = safetensors::SafetensorsFile::open(dir_ + "/model.safetensors");
    ASSERT_TRUE(st.is_ok());
    std::vector<StTensor> ts;
    for (const auto& t : st->tensors()) edit({t.name, t.dtype, t.shape, {t.bytes.begin(), t.bytes.end()}}, ts);
    write_bytes(dir_ + "/model.safetensors", safetensors_bytes(ts));
  }
  void drop_tensor(const std::string& name) {
    rewrite_checkpoint([&](StTensor t, std::vector<StTensor>& out) {
      if (t.name != name) out.push_back(std::move(t));
    });
  }
  // Both paths (load and convert) fail with `kind`, naming each of `mentions`.
  void expect_error(ErrorKind kind, const std::vector<std::string>& mentions) {
    auto m = Model::load(dir_);
    ASSERT_FALSE(m.is_ok());
    EXPECT_EQ(m.status().kind(), kind) << m.status().message();
    for (const auto& s : mentions) EXPECT_NE(m.status().message().find(s), std::string::npos) << m.status().message();
    ThreadPool pool(1);
    auto c = hf::convert_hf_model(dir_, dir_ + ".gguf", *find_quant_scheme("F16"), {}, pool);
    ASSERT_FALSE(c.is_ok());
    EXPECT_EQ(c.status().message(), m.status().message().substr(m.status().message().size() - c.status().message().size()))
        << "one message for both paths";
    EXPECT_FALSE(std::filesystem::exists(dir_ + ".gguf"));
  }
  SynthSpec spec_;
  SyntheticModel sm_;
  std::string dir_;
  json config_;
};

TEST_F(HfErrors, ControlLoads) { EXPECT_TRUE(Model::load(dir_).is_ok()); }

TEST_F(HfErrors, UnsupportedModelTypeListsTheSupportedOnes) {
  config_["model_type"] = "gpt2";
  write_config(config_);
  expect_error(ErrorKind::Unsupported, {"'gpt2'", "llama, mistral, qwen2, qwen3, gemma2, gemma3, gemma3_text, phi3"});
}

// MoE checkpoints: what GGUF's architectures cannot express, and incomplete experts.
class HfMoeErrors : public HfErrors {
 protected:
  void SetUp() override {
    spec_.arch = "qwen3moe";
    spec_.n_expert = 4;
    spec_.n_expert_used = 2;
    spec_.n_ff_exp = 32;
    HfErrors::SetUp();
  }
};

TEST_F(HfMoeErrors, ControlLoads) { EXPECT_TRUE(Model::load(dir_).is_ok()); }

TEST_F(HfMoeErrors, RenormalisationQwen3MoeDoesNotDoIsRefused) {
  config_["norm_topk_prob"] = false;
  write_config(config_);
  expect_error(ErrorKind::Unsupported, {"norm_topk_prob", "qwen3moe"});
}

TEST_F(HfMoeErrors, DenseLayersAmongExpertsAreRefused) {
  config_["mlp_only_layers"] = {1};
  write_config(config_);
  expect_error(ErrorKind::Unsupported, {"mlp_only_layers"});
  config_["mlp_only_layers"] = json::array();
  config_["decoder_sparse_step"] = 2;
  write_config(config_);
  expect_error(ErrorKind::Unsupported, {"decoder_sparse_step"});
}

TEST_F(HfMoeErrors, BadExpertCounts) {
  config_["num_experts_per_tok"] = 5;
  write_config(config_);
  expect_error(ErrorKind::InvalidFile, {"num_experts_per_tok"});
  config_.erase("num_experts_per_tok");
  write_config(config_);
  expect_error(ErrorKind::InvalidFile, {"num_experts_per_tok"});
}

TEST_F(HfMoeErrors, MissingExpertNamesItsLayerAndCount) {
  drop_tensor("model.layers.1.mlp.experts.2.up_proj.weight");
  expect_error(ErrorKind::InvalidFile, {"expert 2", "layer 1", "blk.1.ffn_up_exps.weight", "3 of the 4"});
}

TEST_F(HfMoeErrors, ExpertBeyondTheCountIsUnknown) {
  rewrite_checkpoint([](StTensor t, std::vector<StTensor>& out) {
    if (t.name == "model.layers.0.mlp.experts.3.up_proj.weight")
      out.push_back({"model.layers.0.mlp.experts.4.up_proj.weight", t.dtype, t.shape, t.bytes});
    out.push_back(std::move(t));
  });
  expect_error(ErrorKind::Unsupported, {"model.layers.0.mlp.experts.4.up_proj.weight"});
}

TEST_F(HfMoeErrors, ExpertShapeAgainstConfig) {
  config_["moe_intermediate_size"] = 48;
  write_config(config_);
  expect_error(ErrorKind::InvalidFile, {"experts.0.", "[32, 64]", "[48, 64]"});
}

TEST_F(HfErrors, UnsupportedDtypeNamesTensorAndDtype) {
  rewrite_checkpoint([](StTensor t, std::vector<StTensor>& out) {
    if (t.name == "model.layers.1.mlp.down_proj.weight") {
      t.dtype = "F64";
      t.bytes.resize(t.bytes.size() * 2);
    }
    out.push_back(std::move(t));
  });
  expect_error(ErrorKind::Unsupported, {"model.layers.1.mlp.down_proj.weight", "F64"});
}

TEST_F(HfErrors, ShapeMismatchAgainstConfig) {
  config_["intermediate_size"] = spec_.n_ff + 32;
  write_config(config_);
  expect_error(ErrorKind::InvalidFile, {"model.layers.0.mlp.down_proj.weight", "[64, 96]", "[64, 128]"});
}

TEST_F(HfErrors, MissingTensor) {
  drop_tensor("model.layers.1.self_attn.k_proj.weight");
  expect_error(ErrorKind::InvalidFile, {"blk.1.attn_k.weight"});
}

TEST_F(HfErrors, UnknownTensor) {
  rewrite_checkpoint([](StTensor t, std::vector<StTensor>& out) {
    if (t.name == "model.embed_tokens.weight") out.push_back({"model.layers.0.mlp.experts.0.weight", "F32", {2}, std::vector<uint8_t>(8)});
    out.push_back(std::move(t));
  });
  expect_error(ErrorKind::Unsupported, {"model.layers.0.mlp.experts.0.weight"});
}

TEST_F(HfErrors, MissingShard) {
  SyntheticModel sm = make_synthetic(spec_);
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  HfDirOptions o;
  o.n_shards = 2;
  write_hf_dir(sm, spec_, dir_, o);
  ASSERT_TRUE(Model::load(dir_).is_ok());
  std::filesystem::remove(dir_ + "/model-00002-of-00002.safetensors");
  expect_error(ErrorKind::NotFound, {"model-00002-of-00002.safetensors"});
}

TEST_F(HfErrors, ShardOutsideTheDirectory) {
  std::filesystem::remove(dir_ + "/model.safetensors");
  std::ofstream(dir_ + "/model.safetensors.index.json") << R"({"weight_map": {"model.norm.weight": "../x.safetensors"}})";
  expect_error(ErrorKind::InvalidFile, {"not a plain file name"});
}

TEST_F(HfErrors, ShardIndexThatIsNotJsonOrNamesATensorTwice) {
  std::filesystem::remove(dir_ + "/model.safetensors");
  std::ofstream(dir_ + "/model.safetensors.index.json") << R"({"weight_map": {"a": "x.safetensors",})";
  expect_error(ErrorKind::InvalidFile, {"model.safetensors.index.json: invalid JSON at byte"});
  std::ofstream(dir_ + "/model.safetensors.index.json") << R"({"weight_map": {"a": "x", "a": "y"}})";
  expect_error(ErrorKind::InvalidFile, {"weight_map names 'a' twice"});
}

TEST_F(HfErrors, TruncatedCheckpoint) {
  const auto path = dir_ + "/model.safetensors";
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
  expect_error(ErrorKind::InvalidFile, {"outside"});
}

TEST_F(HfErrors, NoCheckpoint) {
  std::filesystem::remove(dir_ + "/model.safetensors");
  expect_error(ErrorKind::NotFound, {"model.safetensors"});
}

TEST_F(HfErrors, BadConfigValues) {
  config_["num_key_value_heads"] = 3;
  write_config(config_);
  expect_error(ErrorKind::InvalidFile, {"num_key_value_heads"});
}

TEST_F(HfErrors, GemmaQueryScalarGgufCannotExpress) {
  SynthSpec s;
  s.arch = "gemma2";
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.tied_output = true;
  SyntheticModel sm = make_synthetic(s);
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  json c = write_hf_dir(sm, s, dir_);
  ASSERT_TRUE(Model::load(dir_).is_ok());
  c["query_pre_attn_scalar"] = 144;
  write_config(c);
  expect_error(ErrorKind::Unsupported, {"query_pre_attn_scalar 144"});
}

}  // namespace
}  // namespace tern
