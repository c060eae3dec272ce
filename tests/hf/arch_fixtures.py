"""Fixture models of the architectures besides plain LLaMA, for tests/hf/make_fixtures.py.

Each entry of ARCH_CONFIGS is built with transformers 4.47.1's own classes (eager attention):
LlamaForCausalLM under every rope_scaling type with T past the original context (one with mlp_bias; dynamic NTK
and default RoPE at T = 3 x max_position_embeddings, with a greedy generate() reference past it),
Qwen2ForCausalLM (also with use_sliding_window), MistralForCausalLM with a window shorter than T,
Gemma2ForCausalLM (soft-caps, query_pre_attn_scalar, a window on alternate layers), Phi3ForCausalLM with longrope
past the original context (long factors) and, as "su", within it (short factors), Olmo2ForCausalLM and
GPT2LMHeadModel.
"""

import math

import torch
from transformers import (Gemma2Config, Gemma2ForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                          LlamaForCausalLM, MistralConfig, MistralForCausalLM, Olmo2Config, Olmo2ForCausalLM,
                          Phi3Config, Phi3ForCausalLM, Qwen2Config, Qwen2ForCausalLM)

_BASE = dict(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, vocab=256, T=96, t=0.4)


def _c(name, seed, arch, **kw):
    c = dict(_BASE)
    c.update(name=name, seed=seed, arch=arch)
    c.update(kw)
    return c


ARCH_CONFIGS = [
    _c("llama_rope_linear", 2001, "llama", gguf=True, max_pos=64, rope_scaling={"rope_type": "linear", "factor": 2.0}),
    _c("llama_rope_dynamic", 2002, "llama", max_pos=64, rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
    # Past the trained context (issue 33): T = 3 x max_position_embeddings under dynamic NTK (frequencies recomputed
    # for the call's length), and default RoPE extrapolating. Both also record greedy generate() past the context.
    _c("llama_dynamic_3x", 2013, "llama", max_pos=32, rope_scaling={"rope_type": "dynamic", "factor": 2.0},
       generate=(40, 24)),
    _c("llama_default_past_ctx", 2014, "llama", max_pos=32, generate=(20, 30)),
    _c("llama_rope_yarn", 2003, "llama", gguf=True, max_pos=64, rope_scaling={"rope_type": "yarn", "factor": 4.0}),
    _c("llama3_rope_mlp_bias", 2004, "llama", gguf=True, max_pos=128, mlp_bias=True,
       rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 32}),
    _c("qwen2", 2005, "qwen2", gguf=True, max_pos=128),
    _c("qwen2_window", 2011, "qwen2", max_pos=128, window=24),
    _c("mistral_window", 2006, "mistral", max_pos=128, window=24),
    _c("gemma2", 2007, "gemma2", gguf=True, layers=3, head_dim=16, max_pos=128, window=24, attn_cap=5.0, final_cap=3.0,
       qpas=24, T=80),
    # generate: 20 + 24 tokens cross original_max_position_embeddings (32), where transformers runs the sequence
    # again with the long factors.
    _c("phi3_longrope", 2008, "phi3", gguf=True, max_pos=128, orig_max=32, T=80, generate=(20, 24)),
    # Within the original context: the short factors; the type under its older name "su".
    _c("phi3_su_short", 2012, "phi3", max_pos=128, orig_max=32, T=30, rope_type="su"),
    _c("olmo2", 2009, "olmo2", gguf=True, max_pos=128, T=80),
    _c("gpt2", 2010, "gpt2", gguf=True, kv_heads=4, intermediate=256, max_pos=128, T=100),
]


def _common(c):
    return dict(vocab_size=c["vocab"], hidden_size=c["hidden"], intermediate_size=c["intermediate"],
                num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
                num_key_value_heads=c["kv_heads"], max_position_embeddings=c["max_pos"], rms_norm_eps=1e-6,
                bos_token_id=1, eos_token_id=2, pad_token_id=None, tie_word_embeddings=False,
                torch_dtype="float32", attn_implementation="eager")


def build_arch_model(c):
    """The transformers model of fixture c (random weights re-initialised by the caller)."""
    a = c["arch"]
    if a == "llama":
        cfg = LlamaConfig(**_common(c), rope_scaling=c.get("rope_scaling"), mlp_bias=c.get("mlp_bias", False),
                          attention_bias=c.get("mlp_bias", False))
        return LlamaForCausalLM(cfg)
    if a == "qwen2":
        w = c.get("window")
        return Qwen2ForCausalLM(Qwen2Config(**_common(c), use_sliding_window=w is not None,
                                            sliding_window=w if w is not None else 4096))
    if a == "mistral":
        return MistralForCausalLM(MistralConfig(**_common(c), sliding_window=c["window"]))
    if a == "gemma2":
        kw = _common(c)
        kw.update(tie_word_embeddings=True, pad_token_id=0)
        cfg = Gemma2Config(**kw, head_dim=c["head_dim"], query_pre_attn_scalar=c["qpas"],
                           sliding_window=c["window"], attn_logit_softcapping=c["attn_cap"],
                           final_logit_softcapping=c["final_cap"], hidden_activation="gelu_pytorch_tanh")
        return Gemma2ForCausalLM(cfg)
    if a == "phi3":
        half = c["hidden"] // c["heads"] // 2
        g = torch.Generator().manual_seed(c["seed"] + 11)
        short = [round(1.0 + 0.5 * float(x), 4) for x in torch.rand(half, generator=g)]
        long = [round(1.0 + 6.0 * i / (half - 1) + float(x), 4) for i, x in enumerate(torch.rand(half, generator=g))]
        cfg = Phi3Config(**_common(c), original_max_position_embeddings=c["orig_max"],
                         rope_scaling={"type": c.get("rope_type", "longrope"), "short_factor": short,
                                       "long_factor": long})
        return Phi3ForCausalLM(cfg)
    if a == "olmo2":
        return Olmo2ForCausalLM(Olmo2Config(**_common(c)))
    if a == "gpt2":
        cfg = GPT2Config(vocab_size=c["vocab"], n_embd=c["hidden"], n_layer=c["layers"], n_head=c["heads"],
                         n_inner=c["intermediate"], n_positions=c["max_pos"], bos_token_id=1, eos_token_id=2,
                         activation_function="gelu_new", torch_dtype="float32", attn_implementation="eager")
        return GPT2LMHeadModel(cfg)
    raise ValueError(a)


def reinit_value(c, name, p, g):
    """Fan-in scaled random values for parameter `name` (see make_fixtures.build_model)."""
    hidden = c["hidden"]
    if name.endswith(("embed_tokens.weight", "wte.weight")):
        return torch.randn(p.shape, generator=g) * 0.5
    if name.endswith("wpe.weight"):
        return torch.randn(p.shape, generator=g) * 0.3
    if name.endswith(("norm.weight", "ln_1.weight", "ln_2.weight", "ln_f.weight")):
        if c["arch"] == "gemma2":  # Gemma scales by (1 + w)
            return 0.1 * torch.randn(p.shape, generator=g)
        return 1.0 + 0.1 * torch.randn(p.shape, generator=g)
    if name.endswith(".bias"):
        return 0.1 * torch.randn(p.shape, generator=g)
    if name.endswith(("q_proj.weight", "k_proj.weight")):
        return torch.randn(p.shape, generator=g) * (1.3 / math.sqrt(hidden))
    if p.dim() == 2:
        fan_in = p.shape[0] if c["arch"] == "gpt2" else p.shape[1]  # GPT-2 Conv1D stores [in, out]
        return torch.randn(p.shape, generator=g) / math.sqrt(fan_in)
    raise RuntimeError(f"unexpected parameter {name}")


def scale_queries(c, model, t):
    """Multiplies every attention logit q.k by 1/t by scaling what produces q last before RoPE (linear in q)."""
    a = c["arch"]
    qd = c["heads"] * (c.get("head_dim") or c["hidden"] // c["heads"])
    if a == "gpt2":
        for blk in model.transformer.h:
            blk.attn.c_attn.weight[:, :qd].mul_(1.0 / t)
            blk.attn.c_attn.bias[:qd].mul_(1.0 / t)
        return
    for layer in model.model.layers:
        at = layer.self_attn
        if a == "olmo2":  # q_norm over the whole projection comes after q_proj: scale its weight
            at.q_norm.weight.mul_(1.0 / t)
        elif a == "phi3":
            at.qkv_proj.weight[:qd].mul_(1.0 / t)
        else:
            at.q_proj.weight.mul_(1.0 / t)
            if at.q_proj.bias is not None:
                at.q_proj.bias.mul_(1.0 / t)


def window_layers(c):
    """Layers with a sliding window and its size: Mistral every layer, Gemma 2 the even ones."""
    if c["arch"] == "mistral":
        return {L: c["window"] for L in range(c["layers"])}
    if c["arch"] == "gemma2":
        return {L: c["window"] for L in range(0, c["layers"], 2)}
    return {}
