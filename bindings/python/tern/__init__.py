"""tern for Python: the C API (include/tern/tern.h) through ctypes, nothing to compile.

    import tern
    model = tern.Model("stories260K.gguf")
    print(model.generate("Once upon a time", max_tokens=50, temperature=0))
    for piece in model.stream("Once upon a time", max_tokens=50):
        print(piece, end="", flush=True)

    with tern.Engine(model, max_num_seqs=16) as engine:   # concurrent requests
        requests = [engine.submit(p, max_tokens=64) for p in prompts]
        texts = [r.result().text for r in requests]

libtern.so is found through $TERN_LIBRARY, then the build tree beside this
checkout (build/src), then the system's library path.
"""

import ctypes
import ctypes.util
import os
import pathlib

from ctypes import (POINTER, Structure, byref, c_char, c_char_p, c_double, c_float, c_int, c_int32, c_int64,
                    c_size_t, c_uint32, c_uint64, c_void_p)

__all__ = ["TernError", "Model", "Engine", "Request", "Output", "Completion", "ABI_VERSION"]

ABI_VERSION = 1  # the tern.h this module was written against (TERN_ABI_VERSION)

_STATUS = ["ok", "invalid_argument", "not_found", "invalid_file", "unsupported", "io", "out_of_range",
           "unavailable", "buffer_too_small", "timeout", "bad_handle", "out_of_memory", "internal"]
_FINISH = [None, "length", "stop", "eos", "context", "cancelled", "error"]
_OK, _E_BUFFER_TOO_SMALL, _E_TIMEOUT = 0, 8, 9


class TernError(Exception):
    """A failed call: .status is the C API's name for it ("not_found", ...), .code its number."""

    def __init__(self, code, message):
        self.code = code
        self.status = _STATUS[code] if 0 <= code < len(_STATUS) else "unknown"
        super().__init__(f"{message} ({self.status})")


class _EngineParams(Structure):
    _fields_ = [("struct_size", c_uint32), ("n_threads", c_int32), ("n_ctx", c_int32), ("max_num_seqs", c_int32),
                ("max_batched_tokens", c_int32), ("kv_memory_bytes", c_int64), ("kv_type", c_char_p),
                ("prefix_caching", c_int32), ("max_rss_bytes", c_int64), ("use_mmap", c_int32), ("mlock", c_int32)]


class _RequestParams(Structure):
    _fields_ = [("struct_size", c_uint32), ("max_tokens", c_int32), ("temperature", c_float), ("top_k", c_int32),
                ("top_p", c_float), ("min_p", c_float), ("repetition_penalty", c_float),
                ("frequency_penalty", c_float), ("presence_penalty", c_float), ("seed", c_uint64),
                ("ignore_eos", c_int32), ("add_special", c_int32), ("logprobs", c_int32), ("priority", c_int32),
                ("stop", POINTER(c_char_p)), ("n_stop", c_size_t)]


class _Output(Structure):
    _fields_ = [("id", c_uint64), ("has_token", c_int32), ("token", c_int32), ("text", POINTER(c_char)),
                ("text_len", c_size_t), ("logprob", c_float), ("finish", c_int), ("error", c_char_p),
                ("n_prompt_tokens", c_int32), ("n_generated_tokens", c_int32), ("n_cached_tokens", c_int32),
                ("ttft_ms", c_double), ("e2e_ms", c_double)]


class _ChatMessage(Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


def _chat_messages(messages):
    """[{"role": ..., "content": ...}] or [(role, content)] as a C array (and the bytes it points into)."""
    pairs = [(m["role"], m["content"]) if isinstance(m, dict) else tuple(m) for m in messages]
    encoded = [(r.encode("utf-8"), c.encode("utf-8")) for r, c in pairs]
    array = (_ChatMessage * max(1, len(encoded)))(*[_ChatMessage(r, c) for r, c in encoded])
    return array, len(encoded), encoded


class _Stats(Structure):
    _fields_ = [("n_waiting", c_int32), ("n_running", c_int32), ("n_swapped", c_int32),
                ("kv_blocks_total", c_int32), ("kv_blocks_used", c_int32), ("n_ctx", c_int32),
                ("n_requests_finished", c_int64), ("n_tokens_prompt", c_int64), ("n_tokens_generated", c_int64),
                ("prefix_hit_tokens", c_int64), ("n_preemptions", c_int64), ("n_steps", c_int64)]


def _library_path():
    env = os.environ.get("TERN_LIBRARY")
    if env:
        return env
    here = pathlib.Path(__file__).resolve().parent
    for build in ("build", "build-release"):
        candidate = here.parents[2] / build / "src" / "libtern.so"
        if candidate.exists():
            return str(candidate)
    found = ctypes.util.find_library("tern")
    if found:
        return found
    raise OSError("libtern.so not found: set TERN_LIBRARY to its path, or build tern (cmake --build build)")


def _load():
    lib = ctypes.CDLL(_library_path())
    sigs = {
        "tern_abi_version": (c_uint32, []),
        "tern_version": (c_char_p, []),
        "tern_last_error": (c_char_p, []),
        "tern_model_load": (c_int, [c_char_p, POINTER(c_void_p)]),
        "tern_model_free": (None, [c_void_p]),
        "tern_model_n_vocab": (c_int32, [c_void_p]),
        "tern_model_n_ctx_train": (c_int32, [c_void_p]),
        "tern_model_bos": (c_int32, [c_void_p]),
        "tern_model_eos": (c_int32, [c_void_p]),
        "tern_model_arch": (c_char_p, [c_void_p]),
        "tern_tokenize": (c_int, [c_void_p, c_char_p, c_size_t, c_int, POINTER(c_int32), c_size_t, POINTER(c_size_t)]),
        "tern_detokenize": (c_int, [c_void_p, POINTER(c_int32), c_size_t, c_char_p, c_size_t, POINTER(c_size_t)]),
        "tern_chat_prompt": (c_int, [c_void_p, POINTER(_ChatMessage), c_size_t, c_int, c_char_p, c_size_t,
                                     POINTER(c_size_t)]),
        "tern_engine_add_chat": (c_int, [c_void_p, POINTER(_ChatMessage), c_size_t, POINTER(_RequestParams), c_void_p,
                                         c_void_p, POINTER(c_uint64)]),
        "tern_engine_params_init": (None, [POINTER(_EngineParams)]),
        "tern_engine_create": (c_int, [c_void_p, POINTER(_EngineParams), POINTER(c_void_p)]),
        "tern_engine_free": (None, [c_void_p]),
        "tern_request_params_init": (None, [POINTER(_RequestParams)]),
        "tern_engine_add": (c_int, [c_void_p, c_char_p, c_size_t, POINTER(c_int32), c_size_t, POINTER(_RequestParams),
                                    c_void_p, c_void_p, POINTER(c_uint64)]),
        "tern_engine_poll": (c_int, [c_void_p, c_uint64, c_int32, POINTER(_Output)]),
        "tern_engine_release": (c_int, [c_void_p, c_uint64]),
        "tern_engine_cancel": (c_int, [c_void_p, c_uint64]),
        "tern_engine_get_stats": (c_int, [c_void_p, POINTER(_Stats)]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    if lib.tern_abi_version() != ABI_VERSION:
        raise OSError(f"libtern's ABI is {lib.tern_abi_version()}, this module speaks {ABI_VERSION}")
    return lib


_lib = None


def _c():
    global _lib
    if _lib is None:
        _lib = _load()
    return _lib


def _check(code):
    if code != _OK:
        raise TernError(code, _c().tern_last_error().decode("utf-8", "replace"))


def version():
    """libtern's version string."""
    return _c().tern_version().decode()


def _request_params(max_tokens=128, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repetition_penalty=1.0,
                    frequency_penalty=0.0, presence_penalty=0.0, seed=None, ignore_eos=False, add_special=True,
                    logprobs=False, priority=0, stop=()):
    p = _RequestParams()
    _c().tern_request_params_init(byref(p))
    p.max_tokens, p.temperature, p.top_k, p.top_p, p.min_p = max_tokens, temperature, top_k, top_p, min_p
    p.repetition_penalty, p.frequency_penalty = repetition_penalty, frequency_penalty
    p.presence_penalty, p.priority = presence_penalty, priority
    if seed is not None:
        p.seed = seed
    p.ignore_eos, p.add_special, p.logprobs = int(ignore_eos), int(add_special), int(logprobs)
    if isinstance(stop, str):
        stop = [stop]
    stops = (c_char_p * max(1, len(stop)))(*[s.encode("utf-8") for s in stop])
    p.stop, p.n_stop = ctypes.cast(stops, POINTER(c_char_p)), len(stop)
    return p, stops  # the strings must live until the call returns


class Output:
    """One output of a request: a token and its text, or (the last) why it ended."""

    __slots__ = ("token", "text", "logprob", "finish_reason", "error", "n_prompt_tokens", "n_generated_tokens",
                 "n_cached_tokens", "ttft_ms", "e2e_ms")

    def __init__(self, o):
        self.token = o.token if o.has_token else None
        self.text = ctypes.string_at(o.text, o.text_len).decode("utf-8", "replace")
        self.logprob = o.logprob
        self.finish_reason = _FINISH[o.finish] if 0 <= o.finish < len(_FINISH) else "error"
        self.error = o.error.decode("utf-8", "replace") if o.error else ""
        self.n_prompt_tokens = o.n_prompt_tokens
        self.n_generated_tokens = o.n_generated_tokens
        self.n_cached_tokens = o.n_cached_tokens
        self.ttft_ms = o.ttft_ms
        self.e2e_ms = o.e2e_ms


class Completion:
    """A finished request: its text, tokens, finish reason and figures."""

    def __init__(self, text, tokens, last):
        self.text = text
        self.tokens = tokens
        self.finish_reason = last.finish_reason
        self.n_prompt_tokens = last.n_prompt_tokens
        self.n_generated_tokens = last.n_generated_tokens
        self.ttft_ms = last.ttft_ms
        self.e2e_ms = last.e2e_ms

    def __str__(self):
        return self.text


class _Owned:
    """A C handle this object frees: on close(), on leaving a with block, or when collected."""

    _h = None
    _what = "object"

    def _free(self):
        raise NotImplementedError

    def close(self):
        if self._h:
            self._free()
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _handle(self):
        if not self._h:
            raise TernError(10, f"the {self._what} was closed")
        return self._h


class Model(_Owned):
    """A GGUF file's vocabulary and metadata (cheap); generate/stream start an engine on first use."""

    _what = "model"

    def __init__(self, path):
        handle = c_void_p()
        _check(_c().tern_model_load(os.fsencode(path), byref(handle)))
        self._h = handle
        self._engine = None

    @property
    def n_vocab(self):
        return _c().tern_model_n_vocab(self._handle())

    @property
    def n_ctx_train(self):
        return _c().tern_model_n_ctx_train(self._handle())

    @property
    def bos(self):
        return _c().tern_model_bos(self._handle())

    @property
    def eos(self):
        return _c().tern_model_eos(self._handle())

    @property
    def arch(self):
        return _c().tern_model_arch(self._handle()).decode()

    def tokenize(self, text, add_special=True):
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        n = c_size_t(0)
        code = _c().tern_tokenize(self._handle(), data, len(data), int(add_special), None, 0, byref(n))
        if code not in (_OK, _E_BUFFER_TOO_SMALL):
            _check(code)
        ids = (c_int32 * max(1, n.value))()
        _check(_c().tern_tokenize(self._handle(), data, len(data), int(add_special), ids, n.value, byref(n)))
        return list(ids[:n.value])

    def detokenize_bytes(self, tokens):
        ids = (c_int32 * max(1, len(tokens)))(*tokens)
        n = c_size_t(0)
        code = _c().tern_detokenize(self._handle(), ids, len(tokens), None, 0, byref(n))
        if code not in (_OK, _E_BUFFER_TOO_SMALL):
            _check(code)
        buf = ctypes.create_string_buffer(max(1, n.value))
        _check(_c().tern_detokenize(self._handle(), ids, len(tokens), buf, n.value, byref(n)))
        return buf.raw[:n.value]

    def detokenize(self, tokens):
        return self.detokenize_bytes(tokens).decode("utf-8", "replace")

    def chat_prompt(self, messages, add_generation_prompt=True):
        """The prompt text the model's chat template (ChatML when it has none) renders for messages."""
        array, n, _keep = _chat_messages(messages)
        size = c_size_t(0)
        code = _c().tern_chat_prompt(self._handle(), array, n, int(add_generation_prompt), None, 0, byref(size))
        if code not in (_OK, _E_BUFFER_TOO_SMALL):
            _check(code)
        buf = ctypes.create_string_buffer(max(1, size.value))
        _check(_c().tern_chat_prompt(self._handle(), array, n, int(add_generation_prompt), buf, size.value,
                                     byref(size)))
        return buf.raw[:size.value].decode("utf-8", "replace")

    def chat(self, messages, **params):
        """The assistant's reply to messages ([{"role", "content"}]); parameters as Engine.submit's."""
        return self._default_engine().submit_chat(messages, **params).result().text

    def generate(self, prompt="", **params):
        """The completion of one prompt (text or token ids); parameters as Engine.submit's."""
        return self._default_engine().submit(prompt, **params).result().text

    def stream(self, prompt="", **params):
        """The completion's text pieces as they are generated."""
        for out in self._default_engine().submit(prompt, **params):
            if out.finish_reason == "error":
                raise TernError(12, out.error)
            if out.text:
                yield out.text

    def _free(self):
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        _c().tern_model_free(self._h)

    def _default_engine(self):
        if self._engine is None:
            self._engine = Engine(self, max_num_seqs=4)
        return self._engine


class Request:
    """A submitted request. Iterating yields its Outputs until the last; result() waits for all of it."""

    def __init__(self, engine, rid):
        self._engine = engine
        self.id = rid
        self._done = False
        self._text = []
        self._tokens = []
        self._last = None

    def __iter__(self):
        while not self._done:
            yield self._next()

    def _next(self):
        out = _Output()
        while True:  # short waits, so that Ctrl-C reaches Python between them
            code = _c().tern_engine_poll(self._engine._handle(), self.id, 200, byref(out))
            if code != _E_TIMEOUT:
                break
        _check(code)
        o = Output(out)
        self._text.append(o.text)
        if o.token is not None:
            self._tokens.append(o.token)
        if o.finish_reason is not None:
            self._done = True
            self._last = o
            _c().tern_engine_release(self._engine._handle(), self.id)
        return o

    def result(self):
        for _ in self:
            pass
        if self._last.finish_reason == "error":
            raise TernError(12, self._last.error)
        return Completion("".join(self._text), list(self._tokens), self._last)

    def cancel(self):
        _check(_c().tern_engine_cancel(self._engine._handle(), self.id))


class Engine(_Owned):
    """Concurrent requests over one model, continuously batched (any thread may submit and iterate)."""

    _what = "engine"

    def __init__(self, model, n_threads=0, n_ctx=0, max_num_seqs=64, max_batched_tokens=512, kv_memory_bytes=0,
                 kv_type=None, prefix_caching=True, max_rss_bytes=0, use_mmap=True, mlock=False):
        p = _EngineParams()
        _c().tern_engine_params_init(byref(p))
        p.n_threads, p.n_ctx, p.max_num_seqs = n_threads, n_ctx, max_num_seqs
        p.max_batched_tokens, p.kv_memory_bytes = max_batched_tokens, kv_memory_bytes
        p.kv_type = kv_type.encode() if kv_type else None
        p.prefix_caching = int(prefix_caching)
        p.max_rss_bytes, p.use_mmap, p.mlock = max_rss_bytes, int(use_mmap), int(mlock)
        handle = c_void_p()
        _check(_c().tern_engine_create(model._handle(), byref(p), byref(handle)))
        self._h = handle
        self.model = model

    def submit(self, prompt="", **params):
        """Queues a prompt (str, bytes, or a list of token ids); bad parameters raise TernError here.

        Parameters: max_tokens=128, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repetition_penalty=1.0,
        frequency_penalty=0.0, presence_penalty=0.0, seed=None (random), ignore_eos=False, add_special=True,
        logprobs=False, priority=0, stop=() (strings)."""
        p, keep = _request_params(**params)
        rid = c_uint64(0)
        if isinstance(prompt, (list, tuple)):
            ids = (c_int32 * max(1, len(prompt)))(*prompt)
            code = _c().tern_engine_add(self._handle(), None, 0, ids, len(prompt), byref(p), None, None, byref(rid))
        else:
            data = prompt.encode("utf-8") if isinstance(prompt, str) else bytes(prompt)
            code = _c().tern_engine_add(self._handle(), data, len(data), None, 0, byref(p), None, None, byref(rid))
        _check(code)
        return Request(self, rid.value)

    def submit_chat(self, messages, **params):
        """Queues chat messages ([{"role", "content"}]) rendered by the model's chat template; as submit."""
        p, keep = _request_params(**params)
        array, n, _keep = _chat_messages(messages)
        rid = c_uint64(0)
        _check(_c().tern_engine_add_chat(self._handle(), array, n, byref(p), None, None, byref(rid)))
        return Request(self, rid.value)

    def generate(self, prompt="", **params):
        return self.submit(prompt, **params).result()

    def stats(self):
        s = _Stats()
        _check(_c().tern_engine_get_stats(self._handle(), byref(s)))
        return {name: getattr(s, name) for name, _ in _Stats._fields_}

    def _free(self):
        _c().tern_engine_free(self._h)
