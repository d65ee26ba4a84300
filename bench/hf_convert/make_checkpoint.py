#!/usr/bin/env python3
"""Writes a Llama-3.2-1B-shaped Hugging Face checkpoint (F16, random-looking
weights) for benchmarking `tern convert --from hf`: config.json,
model.safetensors and a byte-level tokenizer.json (256 byte tokens; ids up to
vocab_size are padding). Only the standard library: a 1 MiB block of valid
F16 values in [-0.1, 0.1] is repeated to fill every tensor.

usage: make_checkpoint.py DIR [--layers 16] [--hidden 2048] [--ff 8192] [--vocab 128256]
"""
import argparse
import json
import os
import random
import struct


def bytes_to_unicode():
    # GPT-2's byte → printable character table, which byte-level BPE vocabularies spell tokens with.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--ff", type=int, default=8192)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=128256)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    hd = a.hidden // a.heads
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": a.hidden,
        "intermediate_size": a.ff, "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads, "head_dim": hd, "vocab_size": a.vocab, "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "float16",
        "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192},
        "bos_token_id": 0, "eos_token_id": 1,
    }
    with open(os.path.join(a.dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)

    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    tok = {"version": "1.0", "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "post_processor": None, "decoder": {"type": "ByteLevel"},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": []}}
    with open(os.path.join(a.dir, "tokenizer.json"), "w") as f:
        json.dump(tok, f)

    shapes = [("model.embed_tokens.weight", [a.vocab, a.hidden])]
    for i in range(a.layers):
        p = f"model.layers.{i}."
        shapes += [(p + "input_layernorm.weight", [a.hidden]),
                   (p + "self_attn.q_proj.weight", [a.heads * hd, a.hidden]),
                   (p + "self_attn.k_proj.weight", [a.kv_heads * hd, a.hidden]),
                   (p + "self_attn.v_proj.weight", [a.kv_heads * hd, a.hidden]),
                   (p + "self_attn.o_proj.weight", [a.hidden, a.heads * hd]),
                   (p + "post_attention_layernorm.weight", [a.hidden]),
                   (p + "mlp.gate_proj.weight", [a.ff, a.hidden]),
                   (p + "mlp.up_proj.weight", [a.ff, a.hidden]),
                   (p + "mlp.down_proj.weight", [a.hidden, a.ff])]
    shapes.append(("model.norm.weight", [a.hidden]))
    header, off = {}, 0
    for name, shape in shapes:
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    rng = random.Random(1)
    block = struct.pack("<%de" % (1 << 19), *[rng.uniform(-0.1, 0.1) for _ in range(1 << 19)])  # 1 MiB
    with open(os.path.join(a.dir, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        left = off
        while left > 0:
            f.write(block[: min(left, len(block))])
            left -= len(block)
    print(f"{a.dir}: {off / 1e9:.2f} GB of F16 weights, {off // 2 / 1e9:.3f} B parameters")


if __name__ == "__main__":
    main()
