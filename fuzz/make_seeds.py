#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (fuzz/corpus/{gguf,safetensors}/): small valid files that reach every
branch of the parsers: each supported tensor type, metadata of each value type, both tokenizer kinds, F32 / F16 /
BF16 safetensors. Run with the venv of tests/hf/setup_venv.sh (PyPI gguf, safetensors, numpy); the output is
committed, so CI's fuzz tier needs no Python.  usage: fuzz/make_seeds.py"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def gguf_seeds(out):
    import gguf
    from gguf import GGMLQuantizationType as Q
    rng = np.random.default_rng(1)
    # One tensor of every supported type, F32 / F16 / BF16 as plain arrays, the rest as raw blocks.
    w = gguf.GGUFWriter(os.path.join(out, "types.gguf"), "llama")
    w.add_uint8("t.u8", 7); w.add_int16("t.i16", -3); w.add_uint64("t.u64", 1 << 40); w.add_float64("t.f64", 0.5)
    w.add_bool("t.bool", True); w.add_array("t.arr", [1, 2, 3]); w.add_string("t.str", "x")
    w.add_tensor("a", rng.standard_normal(32).astype(np.float32))
    w.add_tensor("b", rng.standard_normal(32).astype(np.float16))
    for t in [Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0]:
        w.add_tensor("q" + t.name, gguf.quants.quantize(rng.standard_normal((1, 64)).astype(np.float32), t),
                     raw_dtype=t)
    for t, size in [(Q.Q2_K, 84), (Q.Q3_K, 110), (Q.Q4_K, 144), (Q.Q5_K, 176), (Q.Q6_K, 210)]:
        w.add_tensor("k" + t.name, np.zeros((1, size), dtype=np.uint8), raw_dtype=t)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

    def tiny_model(path, tok_model):
        w = gguf.GGUFWriter(path, "llama")
        w.add_block_count(1); w.add_context_length(64); w.add_embedding_length(8); w.add_feed_forward_length(8)
        w.add_head_count(2); w.add_head_count_kv(1); w.add_rope_freq_base(10000.0); w.add_layer_norm_rms_eps(1e-5)
        if tok_model == "gpt2":
            toks = ["a", "b", "Ġ", "Ġa", "ab", "<|s|>", "1", "Ċ"]
            w.add_tokenizer_model("gpt2"); w.add_tokenizer_pre("smollm"); w.add_token_list(toks)
            w.add_token_types([1, 1, 1, 1, 1, 3, 1, 1]); w.add_token_merges(["Ġ a", "a b"])
        else:
            toks = ["<unk>", "<s>", "</s>", "▁a", "b", "<0x0A>", "▁", "a"]
            w.add_tokenizer_model("llama"); w.add_token_list(toks)
            w.add_token_scores([0, 0, 0, -1, -2, 0, -3, -4]); w.add_token_types([2, 3, 3, 1, 1, 6, 1, 1])
        w.add_bos_token_id(1); w.add_eos_token_id(2)
        for name, shape in [("token_embd.weight", (8, 8)), ("output_norm.weight", (8,)),
                            ("blk.0.attn_q.weight", (8, 8)), ("blk.0.attn_k.weight", (4, 8))]:
            w.add_tensor(name, rng.standard_normal(shape).astype(np.float32))
        w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

    tiny_model(os.path.join(out, "bpe.gguf"), "gpt2")
    tiny_model(os.path.join(out, "spm.gguf"), "llama")


def safetensors_seeds(out):
    import torch
    from safetensors.torch import save_file
    g = torch.Generator().manual_seed(1)
    save_file({"a": torch.randn(4, 3, generator=g), "b": torch.randn(5, generator=g).half(),
               "c": torch.randn(2, 2, generator=g).bfloat16()}, os.path.join(out, "mixed.safetensors"),
              metadata={"format": "pt"})
    save_file({"empty": torch.zeros(0, 3)}, os.path.join(out, "empty.safetensors"))


if __name__ == "__main__":
    for k in ["gguf", "safetensors"]:
        os.makedirs(os.path.join(HERE, "corpus", k), exist_ok=True)
    gguf_seeds(os.path.join(HERE, "corpus", "gguf"))
    safetensors_seeds(os.path.join(HERE, "corpus", "safetensors"))
    print("make_seeds.py: wrote", os.path.join(HERE, "corpus"))
