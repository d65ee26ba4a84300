/* tern/tern.h — tern's C API, for programs that embed the engine (and for
 * bindings through any FFI: the Python one in bindings/python uses ctypes).
 *
 * C99 and C++ (any standard from C++11); no C++ type crosses it. Objects are
 * opaque handles made by *_create / *_load and given back by *_free. Every
 * call that can fail returns a tern_status; the message that goes with it is
 * tern_last_error(), kept per thread until that thread's next failing call.
 *
 * A model (tern_model_load) is a GGUF file's metadata and vocabulary: cheap,
 * enough to tokenize. An engine (tern_engine_create) maps the weights and
 * serves any number of concurrent requests, continuously batched. Each
 * request's outputs — one per generated token, the last one carrying the
 * finish reason — reach the caller through a callback (called on the
 * engine's output thread, in order) or through tern_engine_poll.
 *
 * Every function is thread-safe, except that a handle must not be freed while
 * another thread is inside a call with it. Handles are checked: one that was
 * freed (or never made) is refused with TERN_E_BAD_HANDLE instead of being used.
 *
 * ABI: TERN_ABI_VERSION changes whenever a struct, an enum value or a
 * signature here changes incompatibly; tern_abi_version() is the library's.
 * Parameter structs carry their size (set by their *_init function), so a
 * library may grow them at the end without breaking older callers.
 */
#ifndef TERN_TERN_H
#define TERN_TERN_H

#include <stddef.h>
#include <stdint.h>

#define TERN_ABI_VERSION 1

#if defined(__GNUC__)
#define TERN_API __attribute__((visibility("default")))
#else
#define TERN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tern_status {
  TERN_OK = 0,
  TERN_E_INVALID_ARGUMENT = 1, /* a parameter out of range, a NULL where a value is needed */
  TERN_E_NOT_FOUND = 2,        /* no such file, or no such request (finished and released) */
  TERN_E_INVALID_FILE = 3,     /* the file exists but is not a model tern reads */
  TERN_E_UNSUPPORTED = 4,      /* well-formed, but an architecture or type tern lacks */
  TERN_E_IO = 5,               /* the system refused (open, mmap) */
  TERN_E_OUT_OF_RANGE = 6,     /* a prompt longer than the context, a value too large */
  TERN_E_UNAVAILABLE = 7,      /* the engine is shutting down */
  TERN_E_BUFFER_TOO_SMALL = 8, /* the size needed was written; call again with that much room */
  TERN_E_TIMEOUT = 9,          /* tern_engine_poll: no output within the wait */
  TERN_E_BAD_HANDLE = 10,      /* a handle that was freed, or never made by this library */
  TERN_E_OUT_OF_MEMORY = 11,
  TERN_E_INTERNAL = 12
} tern_status;

/* The library's TERN_ABI_VERSION (compare with the header's). */
TERN_API uint32_t tern_abi_version(void);
/* tern's version, "MAJOR.MINOR.PATCH". */
TERN_API const char* tern_version(void);
/* The message of this thread's last failing call ("" if none); valid until its next failing call. */
TERN_API const char* tern_last_error(void);
/* "ok", "invalid_argument", ... (never NULL). */
TERN_API const char* tern_status_name(tern_status status);

/* ---- Models: metadata and vocabulary ---------------------------------- */

typedef struct tern_model tern_model;

TERN_API tern_status tern_model_load(const char* path, tern_model** out);
TERN_API void tern_model_free(tern_model* model); /* NULL is a no-op */

TERN_API int32_t tern_model_n_vocab(const tern_model* model);     /* -1 for a bad handle */
TERN_API int32_t tern_model_n_ctx_train(const tern_model* model); /* the training context */
TERN_API int32_t tern_model_bos(const tern_model* model);         /* -1 when the vocabulary has none */
TERN_API int32_t tern_model_eos(const tern_model* model);
/* The architecture ("llama", "qwen2", ...); "" for a bad handle. */
TERN_API const char* tern_model_arch(const tern_model* model);

/* Text (len bytes of UTF-8) to token ids. add_special: BOS/EOS as the model
 * wants and special-token text read as those tokens. Writes at most capacity
 * ids; *n_tokens is the count, also when TERN_E_BUFFER_TOO_SMALL says it did
 * not fit (tokens may be NULL with capacity 0 to ask the size). */
TERN_API tern_status tern_tokenize(const tern_model* model, const char* text, size_t len, int add_special,
                                   int32_t* tokens, size_t capacity, size_t* n_tokens);
/* Token ids to text (not NUL-terminated; *len bytes), as the same contract. */
TERN_API tern_status tern_detokenize(const tern_model* model, const int32_t* tokens, size_t n_tokens, char* text,
                                     size_t capacity, size_t* len);

/* ---- Chat --------------------------------------------------------------- */

typedef struct tern_chat_message {
  const char* role;    /* "system", "user", "assistant", "tool" */
  const char* content; /* UTF-8, NUL-terminated */
} tern_chat_message;

/* The prompt text the model's chat template (GGUF tokenizer.chat_template;
 * ChatML when the file has none) renders for these messages; with
 * add_generation_prompt the assistant's turn is opened at the end. The same
 * buffer contract as tern_detokenize. A template's own refusal ("roles must
 * alternate") comes back as TERN_E_INVALID_ARGUMENT with its message. */
TERN_API tern_status tern_chat_prompt(const tern_model* model, const tern_chat_message* messages, size_t n_messages,
                                      int add_generation_prompt, char* text, size_t capacity, size_t* len);

/* ---- Engines ------------------------------------------------------------ */

typedef struct tern_engine tern_engine;

typedef struct tern_engine_params {
  uint32_t struct_size;        /* sizeof(tern_engine_params); tern_engine_params_init sets it */
  int32_t n_threads;           /* compute threads; 0: every core */
  int32_t n_ctx;               /* context per sequence; 0: the model's training context */
  int32_t max_num_seqs;        /* sequences decoded together (64) */
  int32_t max_batched_tokens;  /* tokens one step computes (512) */
  int64_t kv_memory_bytes;     /* the KV cache's memory; 0: a quarter of free RAM, capped at max_num_seqs contexts */
  const char* kv_type;         /* "f16" (NULL: this), "f32", "q8_0", "q4_0", "fp8" */
  int32_t prefix_caching;      /* 1 (default): requests share the K/V of common prompt prefixes */
  int64_t max_rss_bytes;       /* > 0: the KV cache is sized to keep resident memory under this; 0: no bound */
  int32_t use_mmap;            /* 1 (default): map the file; 0: read it into memory */
  int32_t mlock;               /* 1: pin the weights in RAM (needs room under RLIMIT_MEMLOCK); 0 (default) */
} tern_engine_params;

TERN_API void tern_engine_params_init(tern_engine_params* params);
/* Maps the model's weights and starts the engine's threads. params NULL: the defaults. */
TERN_API tern_status tern_engine_create(const tern_model* model, const tern_engine_params* params,
                                        tern_engine** out);
/* Finishes every unfinished request as cancelled (callbacks see it), stops the threads, frees. */
TERN_API void tern_engine_free(tern_engine* engine);

typedef uint64_t tern_request_id;

#define TERN_SEED_RANDOM UINT64_MAX

typedef struct tern_request_params {
  uint32_t struct_size;       /* sizeof(tern_request_params); tern_request_params_init sets it */
  int32_t max_tokens;         /* 128 */
  float temperature;          /* 0.8; 0: greedy (argmax) */
  int32_t top_k;              /* 40; <= 0: off */
  float top_p;                /* 0.95; in (0, 1], 1: off */
  float min_p;                /* 0.05; in [0, 1], 0: off */
  float repetition_penalty;   /* 1: off; > 0 */
  float frequency_penalty;    /* 0; in [-2, 2] */
  float presence_penalty;     /* 0; in [-2, 2] */
  uint64_t seed;              /* TERN_SEED_RANDOM: a fresh one */
  int32_t ignore_eos;         /* 1: generate max_tokens even past end-of-sequence */
  int32_t add_special;        /* 1 (default): a text prompt gets BOS as the model wants */
  int32_t logprobs;           /* 1: each output carries its token's log-probability */
  int32_t priority;           /* lower runs first under a priority policy; 0 */
  const char* const* stop;    /* n_stop stop strings (copied): the text ends before one */
  size_t n_stop;
} tern_request_params;

TERN_API void tern_request_params_init(tern_request_params* params);

typedef enum tern_finish {
  TERN_FINISH_NONE = 0, /* not the last output */
  TERN_FINISH_LENGTH,   /* max_tokens generated */
  TERN_FINISH_STOP,     /* a stop string */
  TERN_FINISH_EOS,      /* end of sequence */
  TERN_FINISH_CONTEXT,  /* the context is full */
  TERN_FINISH_CANCELLED,
  TERN_FINISH_ERROR     /* tern_output.error says what */
} tern_finish;

typedef struct tern_output {
  tern_request_id id;
  int32_t has_token;         /* 0 on a last output that only finishes */
  int32_t token;
  const char* text;          /* UTF-8, text_len bytes, NUL-terminated; may be empty (held back by a stop string) */
  size_t text_len;
  float logprob;             /* with tern_request_params.logprobs */
  tern_finish finish;
  const char* error;         /* with TERN_FINISH_ERROR; otherwise "" */
  /* On the last output: */
  int32_t n_prompt_tokens;
  int32_t n_generated_tokens;
  int32_t n_cached_tokens;   /* prompt tokens served from the prefix cache */
  double ttft_ms;            /* time to first token */
  double e2e_ms;             /* arrival to the last output */
} tern_output;

/* Called on the engine's output thread, in order, once per output; the
 * pointers in *output are valid during the call only. It should return soon
 * (it holds back every request's outputs) and must not free the engine. */
typedef void (*tern_output_fn)(const tern_output* output, void* user_data);

/* Queues a request: a text prompt (prompt, prompt_len bytes) or, when tokens
 * is not NULL, n_tokens token ids. Outputs go to on_output with user_data; with
 * on_output NULL they wait for tern_engine_poll. Bad parameters and prompts
 * that do not fit are refused here, before any output. params NULL: defaults. */
TERN_API tern_status tern_engine_add(tern_engine* engine, const char* prompt, size_t prompt_len,
                                     const int32_t* tokens, size_t n_tokens, const tern_request_params* params,
                                     tern_output_fn on_output, void* user_data, tern_request_id* id);

/* A chat request: the messages rendered by the model's chat template with the
 * assistant's turn opened, and tokenized so that special-token text inside the
 * messages stays text (only the template's own control tokens are special).
 * Otherwise as tern_engine_add. */
TERN_API tern_status tern_engine_add_chat(tern_engine* engine, const tern_chat_message* messages, size_t n_messages,
                                          const tern_request_params* params, tern_output_fn on_output, void* user_data,
                                          tern_request_id* id);

/* The next output of a request added without a callback: waits up to
 * timeout_ms (0: does not wait; < 0: waits as long as it takes) and says
 * TERN_E_TIMEOUT if none came. The pointers in *output stay valid until the
 * next poll or release of the same request. After the last output, the
 * request is forgotten at its next poll (TERN_E_NOT_FOUND) or release. */
TERN_API tern_status tern_engine_poll(tern_engine* engine, tern_request_id id, int32_t timeout_ms,
                                      tern_output* output);
/* Forgets a polled request (cancelling it if unfinished): its remaining outputs are dropped. */
TERN_API tern_status tern_engine_release(tern_engine* engine, tern_request_id id);

/* The request finishes as TERN_FINISH_CANCELLED at the next step. Unknown or finished: TERN_OK. */
TERN_API tern_status tern_engine_cancel(tern_engine* engine, tern_request_id id);

typedef struct tern_engine_stats {
  int32_t n_waiting, n_running, n_swapped;
  int32_t kv_blocks_total, kv_blocks_used;
  int32_t n_ctx;             /* the context per sequence in force */
  int64_t n_requests_finished;
  int64_t n_tokens_prompt, n_tokens_generated;
  int64_t prefix_hit_tokens; /* prompt tokens served from the prefix cache */
  int64_t n_preemptions;
  int64_t n_steps;
} tern_engine_stats;

TERN_API tern_status tern_engine_get_stats(const tern_engine* engine, tern_engine_stats* stats);

#ifdef __cplusplus
}
#endif

#endif /* TERN_TERN_H */
