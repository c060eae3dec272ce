#!/usr/bin/env python3
"""Exports a llama-architecture GGUF file as a Hugging Face LlamaForCausalLM directory (config.json +
model.safetensors, fp32): weights dequantised by the PyPI `gguf` package (gguf.quants), Q/K rows un-permuted from
GGUF's interleaved RoPE layout to HF's rotate_half one. The reference side of the GGUF tests
(tests/gguf/make_fixtures.py) and of the SmolLM2 benchmark (bench/run_smollm2.sh). Run with the venv of
tests/hf/setup_venv.sh:
  .venv/bin/python scripts/gguf_to_hf.py MODEL.gguf OUT_DIR
"""
import argparse
import os
import sys

import numpy as np


def unpermute(w, n_head):
    # GGUF interleaved rows (h, i, s) -> HF rotate_half rows (h, s, i).
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_model_from_gguf(path):
    """transformers' LlamaForCausalLM (eager, fp32) on the GGUF's weights dequantised by gguf.quants, Q/K rows
    un-permuted to HF's rotate_half layout."""
    import gguf
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    r = gguf.GGUFReader(path)
    f = lambda k: r.fields[k].contents()
    cfg = LlamaConfig(vocab_size=int(next(t for t in r.tensors if t.name == "token_embd.weight").shape[1]),
                      hidden_size=int(f("llama.embedding_length")),
                      head_dim=int(f("llama.attention.key_length")) if "llama.attention.key_length" in r.fields
                      else None,
                      intermediate_size=int(f("llama.feed_forward_length")),
                      num_hidden_layers=int(f("llama.block_count")),
                      num_attention_heads=int(f("llama.attention.head_count")),
                      num_key_value_heads=int(f("llama.attention.head_count_kv")),
                      max_position_embeddings=int(f("llama.context_length")),
                      rope_theta=float(f("llama.rope.freq_base")),
                      rms_norm_eps=float(f("llama.attention.layer_norm_rms_epsilon")),
                      tie_word_embeddings=not any(t.name == "output.weight" for t in r.tensors),
                      bos_token_id=int(f("tokenizer.ggml.bos_token_id")),
                      eos_token_id=int(f("tokenizer.ggml.eos_token_id")), attn_implementation="eager")
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    per = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm", "attn_q": "self_attn.q_proj",
           "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
           "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    sd = {}
    for t in r.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w = w.reshape([int(x) for x in reversed(t.shape)])
        if t.name in names:
            hf = names[t.name]
        else:
            _, l, kind, suffix = t.name.split(".")
            hf = f"model.layers.{l}.{per[kind]}.{suffix}"
        if ".attn_q." in t.name:
            w = unpermute(w, cfg.num_attention_heads)
        elif ".attn_k." in t.name:
            w = unpermute(w, cfg.num_key_value_heads)
        sd[hf] = torch.from_numpy(np.ascontiguousarray(w))
    torch.manual_seed(0)
    m = LlamaForCausalLM(cfg).eval()
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert not unexpected and all("lm_head" in k for k in missing), (missing, unexpected)
    if cfg.tie_word_embeddings:
        m.tie_weights()

    return m, cfg


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf_file")
    ap.add_argument("out_dir")
    a = ap.parse_args()
    m, cfg = hf_model_from_gguf(a.gguf_file)
    tmp = a.out_dir.rstrip("/") + ".tmp"
    m.save_pretrained(tmp, safe_serialization=True)
    if os.path.exists(a.out_dir):
        sys.exit(f"gguf_to_hf.py: {a.out_dir} exists; remove it first")
    os.replace(tmp, a.out_dir)
    print(a.out_dir)


if __name__ == "__main__":
    main()
