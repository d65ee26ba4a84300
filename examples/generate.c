/* examples/generate.c — tern's C API in one page: load a model, start an
 * engine, stream one request's text as it is generated (by polling; a
 * callback is the other way), print its figures.
 *
 *   generate MODEL.gguf [PROMPT] [N_TOKENS]
 *
 * Greedy (temperature 0), so the same model and prompt always give the same
 * text. Build against an installed tern with
 *   cc generate.c $(pkg-config --cflags --libs tern)
 * or, in CMake, find_package(tern) and link tern::tern.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

static int check(tern_status s, const char* what) {
  if (s == TERN_OK) return 1;
  fprintf(stderr, "%s: %s (%s)\n", what, tern_last_error(), tern_status_name(s));
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.gguf [PROMPT] [N_TOKENS]\n", argv[0]);
    return 2;
  }
  if (tern_abi_version() != TERN_ABI_VERSION) {
    fprintf(stderr, "libtern's ABI is %u, this program was built for %u\n", tern_abi_version(), TERN_ABI_VERSION);
    return 1;
  }
  const char* prompt = argc > 2 ? argv[2] : "";
  const int n_tokens = argc > 3 ? atoi(argv[3]) : 200;

  tern_model* model = NULL;
  if (!check(tern_model_load(argv[1], &model), "loading the model")) return 1;

  tern_engine_params ep;
  tern_engine_params_init(&ep);
  ep.max_num_seqs = 1;
  tern_engine* engine = NULL;
  if (!check(tern_engine_create(model, &ep, &engine), "starting the engine")) {
    tern_model_free(model);
    return 1;
  }

  tern_request_params rp;
  tern_request_params_init(&rp);
  rp.max_tokens = n_tokens;
  rp.temperature = 0.0f;
  tern_request_id id = 0;
  int ok = check(tern_engine_add(engine, prompt, strlen(prompt), NULL, 0, &rp, NULL, NULL, &id), "adding the request");
  tern_output out;
  memset(&out, 0, sizeof out);
  while (ok) { /* each output as it is generated; the last one says why it ended */
    ok = check(tern_engine_poll(engine, id, -1, &out), "waiting for output");
    if (!ok) break;
    fwrite(out.text, 1, out.text_len, stdout);
    fflush(stdout);
    if (out.finish != TERN_FINISH_NONE) break;
  }
  if (ok)
    fprintf(stderr, "\n%d prompt tokens, %d generated, time to first token %.1f ms, %.1f ms in all\n",
            out.n_prompt_tokens, out.n_generated_tokens, out.ttft_ms, out.e2e_ms);
  if (ok && out.finish == TERN_FINISH_ERROR) {
    fprintf(stderr, "the request failed: %s\n", out.error);
    ok = 0;
  }
  tern_engine_release(engine, id);
  tern_engine_free(engine);
  tern_model_free(model);
  return ok ? 0 : 1;
}
