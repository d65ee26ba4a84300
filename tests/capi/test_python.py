"""The Python binding (bindings/python) against libtern.so: the golden greedy text,
streaming, the tokenizer, concurrent requests, and errors as TernError.

Run by ctest with TERN_LIBRARY, TERN_TEST_MODEL and TERN_GOLDEN (the stories260K
greedy text) set; PYTHONPATH holds bindings/python.
"""
import os
import threading
import unittest

import tern

MODEL = os.environ["TERN_TEST_MODEL"]
with open(os.environ["TERN_GOLDEN"], "rb") as f:
    GOLDEN = f.read().decode("utf-8")
with open(os.environ["TERN_GOLDEN"].replace(".txt", ".ids.txt")) as f:
    GOLDEN_IDS = [int(x) for x in f.read().split()]


class BindingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = tern.Model(MODEL)

    @classmethod
    def tearDownClass(cls):
        cls.model.close()

    def test_golden_greedy_text(self):
        self.assertEqual(self.model.generate("", max_tokens=200, temperature=0), GOLDEN)

    def test_streaming_gives_the_same_text_in_pieces(self):
        pieces = list(self.model.stream("", max_tokens=200, temperature=0))
        self.assertGreater(len(pieces), 100)
        self.assertEqual("".join(pieces), GOLDEN)

    def test_tokenizer(self):
        self.assertEqual(self.model.tokenize(GOLDEN), GOLDEN_IDS)
        self.assertEqual(self.model.detokenize(GOLDEN_IDS[1:]), GOLDEN)
        self.assertEqual(self.model.tokenize("Once upon", add_special=False), [403, 407])
        self.assertEqual((self.model.n_vocab, self.model.bos, self.model.eos, self.model.arch), (512, 1, 2, "llama"))

    def test_chat(self):
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me a story."}]
        prompt = self.model.chat_prompt(messages)
        self.assertEqual(prompt, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nTell me a story."
                                 "<|im_end|>\n<|im_start|>assistant\n")
        reply = self.model.chat(messages, max_tokens=12, temperature=0)
        self.assertEqual(reply, self.model.generate(self.model.tokenize(prompt), max_tokens=12, temperature=0))
        with self.assertRaises(tern.TernError):
            self.model.chat_prompt([])

    def test_engine_options(self):
        with tern.Engine(self.model, max_num_seqs=1, use_mmap=False) as engine:
            self.assertEqual(engine.generate([1], max_tokens=20, temperature=0).tokens, GOLDEN_IDS[1:21])
        with self.assertRaises(tern.TernError) as e:
            tern.Engine(self.model, max_rss_bytes=1 << 20)
        self.assertIn("leaves", str(e.exception))

    def test_completion_figures_and_token_prompt(self):
        with tern.Engine(self.model, max_num_seqs=2) as engine:
            c = engine.generate([1], max_tokens=20, temperature=0)
            self.assertEqual(c.tokens, GOLDEN_IDS[1:21])
            self.assertEqual((c.finish_reason, c.n_prompt_tokens, c.n_generated_tokens), ("length", 1, 20))
            self.assertGreater(c.e2e_ms, 0)
            self.assertEqual(engine.stats()["n_requests_finished"], 1)

    def test_concurrent_requests_get_what_each_gets_alone(self):
        prompts = ["Once upon a time", "Tom had a red ball", "Lily", "The sun was", "A little dog", "One day"]
        with tern.Engine(self.model, max_num_seqs=1) as one:
            alone = [one.generate(p, max_tokens=30, temperature=0).text for p in prompts]
        with tern.Engine(self.model, max_num_seqs=8) as engine:
            requests = [engine.submit(p, max_tokens=30, temperature=0) for p in prompts]
            together = [None] * len(prompts)

            def collect(i):
                together[i] = requests[i].result().text

            threads = [threading.Thread(target=collect, args=(i,)) for i in range(len(prompts))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        self.assertEqual(together, alone)

    def test_cancel_ends_a_request(self):
        with tern.Engine(self.model, max_num_seqs=1) as engine:
            r = engine.submit("Once", max_tokens=400, ignore_eos=True, temperature=0)
            first = next(iter(r))
            self.assertIsNone(first.finish_reason)
            r.cancel()
            last = list(r)[-1]
            self.assertEqual(last.finish_reason, "cancelled")

    def test_errors_are_tern_errors(self):
        with self.assertRaises(tern.TernError) as e:
            tern.Model("/nonexistent/model.gguf")
        self.assertEqual(e.exception.status, "not_found")
        self.assertIn("/nonexistent/model.gguf", str(e.exception))
        with self.assertRaises(tern.TernError) as e:
            tern.Engine(self.model, kv_type="q5_1")
        self.assertEqual(e.exception.status, "invalid_argument")
        with tern.Engine(self.model, max_num_seqs=1) as engine:
            with self.assertRaises(tern.TernError) as e:
                engine.submit("Hi", top_p=1.5)
            self.assertIn("top_p", str(e.exception))
            with self.assertRaises(tern.TernError) as e:
                engine.submit([1] * 600)
            self.assertIn("context", str(e.exception))
        with self.assertRaises(tern.TernError) as e:
            self.model.detokenize([5, 512])
        self.assertEqual(e.exception.status, "invalid_argument")
        closed = tern.Model(MODEL)
        closed.close()
        with self.assertRaises(tern.TernError):
            closed.tokenize("a")


if __name__ == "__main__":
    unittest.main(verbosity=2)
