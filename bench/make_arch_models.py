#!/usr/bin/env python3
"""Writes three same-size random models for bench/arch_bench.cpp with transformers' own classes: LLaMA, Gemma 2
(soft-caps, 1 + w norms, pre/post norms, GeGLU, a window of --window keys on even layers) and GPT-2 (LayerNorm,
learned positions, GELU MLP widened to the same MLP parameter count). Same hidden size, layers, heads, vocabulary.

  .venv/bin/python bench/make_arch_models.py OUT_DIR [--hidden 512 --layers 8 --heads 8 --inter 1536]
"""
import argparse
import os

import torch
from transformers import (Gemma2Config, Gemma2ForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                          LlamaForCausalLM)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--inter", type=int, default=1536)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--window", type=int, default=256)
    a = ap.parse_args()
    torch.manual_seed(0)
    common = dict(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.inter, num_hidden_layers=a.layers,
                  num_attention_heads=a.heads, num_key_value_heads=a.heads, max_position_embeddings=4096,
                  bos_token_id=1, eos_token_id=2, pad_token_id=0, torch_dtype="float32")
    models = {
        "llama": LlamaForCausalLM(LlamaConfig(**common, tie_word_embeddings=True)),
        "gemma2": Gemma2ForCausalLM(Gemma2Config(**common, head_dim=a.hidden // a.heads,
                                                 query_pre_attn_scalar=a.hidden // a.heads, sliding_window=a.window)),
        # GPT-2's MLP has two matrices: 1.5x the width gives LLaMA's three-matrix parameter count.
        "gpt2": GPT2LMHeadModel(GPT2Config(vocab_size=a.vocab, n_embd=a.hidden, n_layer=a.layers, n_head=a.heads,
                                           n_inner=a.inter * 3 // 2, n_positions=4096, bos_token_id=1,
                                           eos_token_id=2)),
    }
    for name, m in models.items():
        d = os.path.join(a.out, name)
        m.float().save_pretrained(d, safe_serialization=True)
        print(f"{name:7s} {sum(p.numel() for p in m.parameters()) / 1e6:.2f}M parameters -> {d}")


if __name__ == "__main__":
    main()
