// The C API (include/tern/tern.h) through libtern.so: the golden greedy text by
// polling and by callback, the tokenizer against the golden ids, concurrent
// requests against each alone, and every error path's code and message.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../model/model_fixture.h"
#include "tern/tern.h"

namespace {

struct ModelHandle {
  tern_model* m = nullptr;
  ~ModelHandle() { tern_model_free(m); }
};

struct EngineHandle {
  tern_engine* e = nullptr;
  ~EngineHandle() { tern_engine_free(e); }
};

tern_model* load_stories() {
  tern_model* m = nullptr;
  const tern_status s = tern_model_load(tern::test::stories_gguf().c_str(), &m);
  EXPECT_EQ(s, TERN_OK) << tern_last_error();
  return m;
}

tern_engine* start(const tern_model* m, int max_num_seqs = 4) {
  tern_engine_params p;
  tern_engine_params_init(&p);
  p.max_num_seqs = max_num_seqs;
  p.n_threads = 2;
  tern_engine* e = nullptr;
  const tern_status s = tern_engine_create(m, &p, &e);
  EXPECT_EQ(s, TERN_OK) << tern_last_error();
  return e;
}

tern_request_params greedy(int max_tokens) {
  tern_request_params p;
  tern_request_params_init(&p);
  p.max_tokens = max_tokens;
  p.temperature = 0.0f;
  return p;
}

struct Polled {
  std::string text;
  std::vector<int32_t> tokens;
  tern_finish finish = TERN_FINISH_NONE;
  int32_t n_generated = 0;
};

// Every output of a polled request, to its last.
Polled poll_all(tern_engine* e, tern_request_id id) {
  Polled r;
  for (;;) {
    tern_output o;
    const tern_status s = tern_engine_poll(e, id, -1, &o);
    EXPECT_EQ(s, TERN_OK) << tern_last_error();
    if (s != TERN_OK) return r;
    EXPECT_EQ(o.id, id);
    EXPECT_EQ(std::strlen(o.text), o.text_len);
    r.text.append(o.text, o.text_len);
    if (o.has_token) r.tokens.push_back(o.token);
    if (o.finish != TERN_FINISH_NONE) {
      r.finish = o.finish;
      r.n_generated = o.n_generated_tokens;
      return r;
    }
  }
}

TEST(CApi, VersionsAndNames) {
  EXPECT_EQ(tern_abi_version(), static_cast<uint32_t>(TERN_ABI_VERSION));
  EXPECT_STREQ(tern_version(), "0.1.0");
  EXPECT_STREQ(tern_status_name(TERN_E_BAD_HANDLE), "bad_handle");
  EXPECT_STREQ(tern_status_name(static_cast<tern_status>(999)), "unknown");
}

TEST(CApi, GoldenGreedyTextByPollAndByCallback) {
  TERN_REQUIRE_STORIES();
  ModelHandle m{load_stories()};
  ASSERT_TRUE(m.m);
  EXPECT_STREQ(tern_model_arch(m.m), "llama");
  EXPECT_EQ(tern_model_n_vocab(m.m), 512);
  EXPECT_EQ(tern_model_bos(m.m), 1);
  EXPECT_EQ(tern_model_eos(m.m), 2);
  EngineHandle e{start(m.m)};
  ASSERT_TRUE(e.e);
  const std::vector<int> golden = tern::test::golden_ids();  // BOS + 200
  ASSERT_EQ(golden.size(), 201u);

  // An empty text prompt is BOS alone: llama2.c's 200 greedy steps.
  const tern_request_params p = greedy(200);
  tern_request_id id = 0;
  ASSERT_EQ(tern_engine_add(e.e, "", 0, nullptr, 0, &p, nullptr, nullptr, &id), TERN_OK) << tern_last_error();
  const Polled got = poll_all(e.e, id);
  EXPECT_EQ(got.text, tern::test::golden_text());
  EXPECT_EQ(got.tokens, std::vector<int32_t>(golden.begin() + 1, golden.end()));
  EXPECT_EQ(got.finish, TERN_FINISH_LENGTH);
  EXPECT_EQ(got.n_generated, 200);
  tern_output o;
  EXPECT_EQ(tern_engine_poll(e.e, id, 0, &o), TERN_E_NOT_FOUND) << "the last output was polled: forgotten";
  EXPECT_NE(std::string(tern_last_error()).find("finished"), std::string::npos) << tern_last_error();

  // The same by callback, on the engine's output thread, with the prompt as token ids.
  struct Sink {
    std::mutex mu;
    std::condition_variable cv;
    std::string text;
    int calls = 0;
    tern_output last{};
    bool done = false;
  } sink;
  const auto on_output = [](const tern_output* out, void* user) {
    Sink& s = *static_cast<Sink*>(user);
    std::lock_guard lock(s.mu);
    s.text.append(out->text, out->text_len);
    ++s.calls;
    if (out->finish != TERN_FINISH_NONE) {
      s.last = *out;
      s.done = true;
      s.cv.notify_all();
    }
  };
  const int32_t bos[] = {1};
  ASSERT_EQ(tern_engine_add(e.e, nullptr, 0, bos, 1, &p, on_output, &sink, &id), TERN_OK) << tern_last_error();
  {
    std::unique_lock lock(sink.mu);
    sink.cv.wait(lock, [&] { return sink.done; });
  }
  EXPECT_EQ(sink.text, tern::test::golden_text());
  EXPECT_EQ(sink.last.finish, TERN_FINISH_LENGTH);
  EXPECT_EQ(sink.last.n_generated_tokens, 200);
  EXPECT_EQ(sink.last.n_prompt_tokens, 1);
  EXPECT_GE(sink.calls, 200);
  EXPECT_EQ(tern_engine_poll(e.e, id, 0, &o), TERN_E_NOT_FOUND) << "a callback request is not polled";

  tern_engine_stats st;
  ASSERT_EQ(tern_engine_get_stats(e.e, &st), TERN_OK);
  EXPECT_EQ(st.n_requests_finished, 2);
  EXPECT_EQ(st.n_tokens_generated, 400);
  EXPECT_EQ(st.n_ctx, 512);
  EXPECT_EQ(st.kv_blocks_used, 0);
}

TEST(CApi, TokenizerMatchesTheGoldenIds) {
  TERN_REQUIRE_STORIES();
  ModelHandle m{load_stories()};
  ASSERT_TRUE(m.m);
  const std::string text = tern::test::golden_text();
  const std::vector<int> golden = tern::test::golden_ids();
  size_t n = 0;
  // Asking the size first: no room, the count comes back.
  EXPECT_EQ(tern_tokenize(m.m, text.data(), text.size(), 1, nullptr, 0, &n), TERN_E_BUFFER_TOO_SMALL);
  ASSERT_EQ(n, golden.size());
  std::vector<int32_t> ids(n);
  ASSERT_EQ(tern_tokenize(m.m, text.data(), text.size(), 1, ids.data(), ids.size(), &n), TERN_OK);
  EXPECT_EQ(ids, std::vector<int32_t>(golden.begin(), golden.end()));
  size_t len = 0;
  EXPECT_EQ(tern_detokenize(m.m, ids.data() + 1, n - 1, nullptr, 0, &len), TERN_E_BUFFER_TOO_SMALL);
  std::string back(len, '\0');
  ASSERT_EQ(tern_detokenize(m.m, ids.data() + 1, n - 1, back.data(), back.size(), &len), TERN_OK);
  EXPECT_EQ(back, text);
  EXPECT_EQ(tern_tokenize(m.m, "Once upon", 9, 0, ids.data(), ids.size(), &n), TERN_OK);
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<long>(n)), (std::vector<int32_t>{403, 407}));
  const int32_t bad[] = {5, 512};
  EXPECT_EQ(tern_detokenize(m.m, bad, 2, back.data(), back.size(), &len), TERN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tern_last_error()).find("token 512 at 1 is outside the vocabulary (0..511)"), std::string::npos)
      << tern_last_error();
}

TEST(CApi, ErrorsHaveCodesAndMessages) {
  tern_model* m = reinterpret_cast<tern_model*>(0x1);
  EXPECT_EQ(tern_model_load("/nonexistent/model.gguf", &m), TERN_E_NOT_FOUND) << tern_last_error();
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(tern_last_error()).find("/nonexistent/model.gguf"), std::string::npos) << tern_last_error();
  EXPECT_EQ(tern_model_load(nullptr, &m), TERN_E_INVALID_ARGUMENT);
  EXPECT_EQ(tern_model_load("x", nullptr), TERN_E_INVALID_ARGUMENT);
  const std::string junk = std::string(TERN_BINARY_DIR) + "/capi_not_a_model.gguf";
  {
    std::ofstream f(junk, std::ios::binary);
    f << "this is not a GGUF file at all";
  }
  EXPECT_EQ(tern_model_load(junk.c_str(), &m), TERN_E_INVALID_FILE) << tern_last_error();
  std::remove(junk.c_str());
  EXPECT_EQ(tern_model_n_vocab(nullptr), -1);
  EXPECT_STREQ(tern_model_arch(nullptr), "");

  TERN_REQUIRE_STORIES();
  ModelHandle model{load_stories()};
  ASSERT_TRUE(model.m);
  tern_engine* e = reinterpret_cast<tern_engine*>(0x1);
  tern_engine_params ep;
  tern_engine_params_init(&ep);
  ep.kv_type = "q5_1";
  EXPECT_EQ(tern_engine_create(model.m, &ep, &e), TERN_E_INVALID_ARGUMENT);
  EXPECT_EQ(e, nullptr);
  EXPECT_NE(std::string(tern_last_error()).find("kv_type 'q5_1'"), std::string::npos) << tern_last_error();
  tern_engine_params_init(&ep);
  ep.struct_size = sizeof(ep) + 8;  // a newer header than the library
  EXPECT_EQ(tern_engine_create(model.m, &ep, &e), TERN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tern_last_error()).find("struct_size"), std::string::npos) << tern_last_error();
  tern_engine_params_init(&ep);
  ep.max_num_seqs = 0;
  EXPECT_EQ(tern_engine_create(model.m, &ep, &e), TERN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tern_last_error()).find("max_num_seqs"), std::string::npos) << tern_last_error();

  EngineHandle engine{start(model.m)};
  ASSERT_TRUE(engine.e);
  tern_request_id id = 7;
  tern_request_params p = greedy(10);
  p.top_p = 1.5f;
  EXPECT_EQ(tern_engine_add(engine.e, "Hi", 2, nullptr, 0, &p, nullptr, nullptr, &id), TERN_E_INVALID_ARGUMENT);
  EXPECT_EQ(id, 0u);
  EXPECT_NE(std::string(tern_last_error()).find("top_p"), std::string::npos) << tern_last_error();
  p = greedy(-1);
  EXPECT_EQ(tern_engine_add(engine.e, "Hi", 2, nullptr, 0, &p, nullptr, nullptr, &id), TERN_E_INVALID_ARGUMENT);
  p = greedy(10);
  const char* stops[] = {"end", nullptr};
  p.stop = stops;
  p.n_stop = 2;
  EXPECT_EQ(tern_engine_add(engine.e, "Hi", 2, nullptr, 0, &p, nullptr, nullptr, &id), TERN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tern_last_error()).find("stop[1] is NULL"), std::string::npos) << tern_last_error();
  p = greedy(10);
  EXPECT_EQ(tern_engine_add(engine.e, nullptr, 0, nullptr, 0, &p, nullptr, nullptr, &id), TERN_E_INVALID_ARGUMENT);
  const int32_t bad_ids[] = {1, 9999};
  EXPECT_NE(tern_engine_add(engine.e, nullptr, 0, bad_ids, 2, &p, nullptr, nullptr, &id), TERN_OK);
  EXPECT_NE(std::string(tern_last_error()).find("9999"), std::string::npos) << tern_last_error();
  // A prompt past the context (512) is refused before any output.
  std::vector<int32_t> long_prompt(600, 300);
  EXPECT_NE(tern_engine_add(engine.e, nullptr, 0, long_prompt.data(), long_prompt.size(), &p, nullptr, nullptr, &id),
            TERN_OK);
  EXPECT_NE(std::string(tern_last_error()).find("context"), std::string::npos) << tern_last_error();
  tern_output o;
  EXPECT_EQ(tern_engine_poll(engine.e, 12345, 0, &o), TERN_E_NOT_FOUND);
  EXPECT_EQ(tern_engine_release(engine.e, 12345), TERN_E_NOT_FOUND);
  EXPECT_EQ(tern_engine_get_stats(engine.e, nullptr), TERN_E_INVALID_ARGUMENT);
}

TEST(CApi, FreedHandlesAreRefusedNotUsed) {
  TERN_REQUIRE_STORIES();
  tern_model* m = load_stories();
  ASSERT_TRUE(m);
  tern_engine* e = start(m);
  ASSERT_TRUE(e);
  tern_engine_free(e);
  tern_request_params p = greedy(5);
  tern_request_id id = 0;
  EXPECT_EQ(tern_engine_add(e, "Hi", 2, nullptr, 0, &p, nullptr, nullptr, &id), TERN_E_BAD_HANDLE);
  EXPECT_NE(std::string(tern_last_error()).find("not a live handle"), std::string::npos) << tern_last_error();
  tern_engine_stats st;
  EXPECT_EQ(tern_engine_get_stats(e, &st), TERN_E_BAD_HANDLE);
  EXPECT_EQ(tern_engine_cancel(e, 1), TERN_E_BAD_HANDLE);
  tern_engine_free(e);  // twice: nothing happens
  tern_model_free(m);
  size_t n = 0;
  EXPECT_EQ(tern_tokenize(m, "a", 1, 0, nullptr, 0, &n), TERN_E_BAD_HANDLE);
  EXPECT_EQ(tern_engine_create(m, nullptr, &e), TERN_E_BAD_HANDLE);
  EXPECT_EQ(tern_model_n_vocab(m), -1);
  tern_model_free(m);
  tern_model_free(nullptr);
  tern_engine_free(nullptr);
}

TEST(CApi, PollWaitsCancelsAndReleases) {
  TERN_REQUIRE_STORIES();
  ModelHandle m{load_stories()};
  EngineHandle e{start(m.m, /*max_num_seqs=*/1)};
  ASSERT_TRUE(e.e);
  // One sequence at a time: the second request waits behind the first's 400 steps.
  tern_request_params p = greedy(400);
  p.ignore_eos = 1;
  tern_request_id first = 0, second = 0;
  ASSERT_EQ(tern_engine_add(e.e, "Once", 4, nullptr, 0, &p, nullptr, nullptr, &first), TERN_OK);
  p = greedy(5);
  ASSERT_EQ(tern_engine_add(e.e, "Once", 4, nullptr, 0, &p, nullptr, nullptr, &second), TERN_OK);
  tern_output o;
  EXPECT_EQ(tern_engine_poll(e.e, second, 0, &o), TERN_E_TIMEOUT);
  EXPECT_EQ(tern_engine_poll(e.e, second, 20, &o), TERN_E_TIMEOUT);
  EXPECT_NE(std::string(tern_last_error()).find("no output within 20 ms"), std::string::npos) << tern_last_error();
  ASSERT_EQ(tern_engine_poll(e.e, first, -1, &o), TERN_OK) << tern_last_error();
  EXPECT_EQ(o.finish, TERN_FINISH_NONE);
  ASSERT_EQ(tern_engine_cancel(e.e, first), TERN_OK);
  const Polled rest = poll_all(e.e, first);
  EXPECT_EQ(rest.finish, TERN_FINISH_CANCELLED);
  EXPECT_LT(rest.n_generated, 400);
  const Polled two = poll_all(e.e, second);
  EXPECT_EQ(two.finish, TERN_FINISH_LENGTH);
  EXPECT_EQ(two.tokens.size(), 5u);
  // Released before its end: cancelled, and its id forgotten.
  p = greedy(400);
  p.ignore_eos = 1;
  tern_request_id third = 0;
  ASSERT_EQ(tern_engine_add(e.e, "Once", 4, nullptr, 0, &p, nullptr, nullptr, &third), TERN_OK);
  EXPECT_EQ(tern_engine_release(e.e, third), TERN_OK);
  EXPECT_EQ(tern_engine_poll(e.e, third, 0, &o), TERN_E_NOT_FOUND);
  // The engine goes on: the slot came back.
  ASSERT_EQ(tern_engine_add(e.e, "Once", 4, nullptr, 0, &p, nullptr, nullptr, &third), TERN_OK);
  p = greedy(3);
  tern_request_id fourth = 0;
  ASSERT_EQ(tern_engine_add(e.e, "Once", 4, nullptr, 0, &p, nullptr, nullptr, &fourth), TERN_OK);
  EXPECT_EQ(tern_engine_cancel(e.e, third), TERN_OK);
  EXPECT_EQ(poll_all(e.e, fourth).tokens.size(), 3u);
}

TEST(CApi, AnOlderSmallerParamsStructKeepsTheDefaultsPastItsEnd) {
  TERN_REQUIRE_STORIES();
  ModelHandle m{load_stories()};
  EngineHandle e{start(m.m)};
  ASSERT_TRUE(e.e);
  tern_request_params p = greedy(6);
  p.ignore_eos = 1;  // past the smaller struct's end: ignored, the default (0) applies
  p.struct_size = offsetof(tern_request_params, seed);
  tern_request_id id = 0;
  ASSERT_EQ(tern_engine_add(e.e, "", 0, nullptr, 0, &p, nullptr, nullptr, &id), TERN_OK) << tern_last_error();
  const Polled got = poll_all(e.e, id);
  const std::vector<int> golden = tern::test::golden_ids();
  EXPECT_EQ(got.tokens, std::vector<int32_t>(golden.begin() + 1, golden.begin() + 7));
}

TEST(CApi, SmallMemoryOptions) {
  TERN_REQUIRE_STORIES();
  ModelHandle m{load_stories()};
  ASSERT_TRUE(m.m);
  tern_engine_params ep;
  tern_engine_params_init(&ep);
  EXPECT_EQ(ep.use_mmap, 1);
  EXPECT_EQ(ep.mlock, 0);
  EXPECT_EQ(ep.max_rss_bytes, 0);
  ep.use_mmap = 0;  // the file read into memory: the same text
  EngineHandle e;
  ASSERT_EQ(tern_engine_create(m.m, &ep, &e.e), TERN_OK) << tern_last_error();
  const tern_request_params p = greedy(20);
  tern_request_id id = 0;
  ASSERT_EQ(tern_engine_add(e.e, "", 0, nullptr, 0, &p, nullptr, nullptr, &id), TERN_OK);
  const std::vector<int> golden = tern::test::golden_ids();
  EXPECT_EQ(poll_all(e.e, id).tokens, std::vector<int32_t>(golden.begin() + 1, golden.begin() + 21));
  tern_engine_params_init(&ep);
  ep.max_rss_bytes = 1 << 20;  // less than the process already holds
  tern_engine* none = nullptr;
  EXPECT_EQ(tern_engine_create(m.m, &ep, &none), TERN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tern_last_error()).find("leaves"), std::string::npos) << tern_last_error();
  ep.max_rss_bytes = -1;
  EXPECT_EQ(tern_engine_create(m.m, &ep, &none), TERN_E_INVALID_ARGUMENT);
}

TEST(CApi, ChatPromptAndChatRequests) {
  TERN_REQUIRE_STORIES();
  ModelHandle m{load_stories()};
  ASSERT_TRUE(m.m);
  // stories260K carries no chat template: ChatML.
  const tern_chat_message chat[] = {{"system", "Be brief."}, {"user", "Tell me a story."}};
  size_t len = 0;
  EXPECT_EQ(tern_chat_prompt(m.m, chat, 2, 1, nullptr, 0, &len), TERN_E_BUFFER_TOO_SMALL);
  std::string text(len, '\0');
  ASSERT_EQ(tern_chat_prompt(m.m, chat, 2, 1, text.data(), text.size(), &len), TERN_OK) << tern_last_error();
  EXPECT_EQ(text, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nTell me a story.<|im_end|>\n"
                  "<|im_start|>assistant\n");
  const tern_chat_message bad[] = {{"user", "Hi"}, {nullptr, "x"}};
  EXPECT_EQ(tern_chat_prompt(m.m, bad, 2, 1, nullptr, 0, &len), TERN_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tern_last_error()).find("messages[1].role"), std::string::npos) << tern_last_error();
  EXPECT_EQ(tern_chat_prompt(m.m, chat, 0, 1, nullptr, 0, &len), TERN_E_INVALID_ARGUMENT);

  // A chat request runs that prompt (BOS added, as the model wants): the same tokens as adding its ids.
  EngineHandle e{start(m.m)};
  ASSERT_TRUE(e.e);
  std::vector<int32_t> ids(1024);
  size_t n = 0;
  ASSERT_EQ(tern_tokenize(m.m, text.data(), text.size(), 1, ids.data(), ids.size(), &n), TERN_OK);
  ids.resize(n);
  const tern_request_params p = greedy(12);
  tern_request_id by_chat = 0, by_ids = 0;
  ASSERT_EQ(tern_engine_add_chat(e.e, chat, 2, &p, nullptr, nullptr, &by_chat), TERN_OK) << tern_last_error();
  ASSERT_EQ(tern_engine_add(e.e, nullptr, 0, ids.data(), ids.size(), &p, nullptr, nullptr, &by_ids), TERN_OK);
  const Polled a = poll_all(e.e, by_chat), b = poll_all(e.e, by_ids);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.tokens.size(), 12u);
  EXPECT_EQ(tern_engine_add_chat(e.e, bad, 2, &p, nullptr, nullptr, &by_chat), TERN_E_INVALID_ARGUMENT);
}

// Requests from several threads at once, each polled by its own thread, get
// what each gets alone.
TEST(CApi, ConcurrentRequestsGetWhatEachGetsAlone) {
  TERN_REQUIRE_STORIES();
  ModelHandle m{load_stories()};
  ASSERT_TRUE(m.m);
  const char* prompts[] = {"Once upon a time", "Tom had a red ball", "Lily", "The sun was", "A little dog",
                           "She went to the park", "Ben and Sue", "One day"};
  constexpr int kN = 8;
  std::vector<std::vector<int32_t>> alone(kN);
  {
    EngineHandle one{start(m.m, 1)};
    ASSERT_TRUE(one.e);
    for (int i = 0; i < kN; ++i) {
      const tern_request_params p = greedy(20 + 5 * i);
      tern_request_id id = 0;
      ASSERT_EQ(tern_engine_add(one.e, prompts[i], std::strlen(prompts[i]), nullptr, 0, &p, nullptr, nullptr, &id),
                TERN_OK);
      alone[i] = poll_all(one.e, id).tokens;
    }
  }
  EngineHandle e{start(m.m, kN)};
  ASSERT_TRUE(e.e);
  std::vector<std::vector<int32_t>> together(kN);
  std::vector<std::thread> threads;
  for (int i = 0; i < kN; ++i) {
    threads.emplace_back([&, i] {
      const tern_request_params p = greedy(20 + 5 * i);
      tern_request_id id = 0;
      if (tern_engine_add(e.e, prompts[i], std::strlen(prompts[i]), nullptr, 0, &p, nullptr, nullptr, &id) != TERN_OK)
        return;
      together[i] = poll_all(e.e, id).tokens;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(together[i], alone[i]) << "request " << i;
    EXPECT_EQ(together[i].size(), static_cast<size_t>(20 + 5 * i));
  }
  tern_engine_stats st;
  ASSERT_EQ(tern_engine_get_stats(e.e, &st), TERN_OK);
  EXPECT_EQ(st.n_requests_finished, kN);
  EXPECT_LT(st.n_steps, 20 + 5 * (kN - 1) + kN * 8) << "the requests ran together";
}

}  // namespace
