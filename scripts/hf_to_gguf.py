#!/usr/bin/env python3
"""Converts a focalscope / Hugging Face directory (config.json, model.safetensors, optional sentencepiece
tokenizer.model) into a GGUF file with the PyPI `gguf` package's writer, under llama.cpp's architecture and tensor
names: LlamaForCausalLM -> llama, Qwen2ForCausalLM -> qwen2, Gemma2ForCausalLM -> gemma2, Phi3ForCausalLM -> phi3,
Olmo2ForCausalLM -> olmo2, GPT2LMHeadModel -> gpt2.

Weights: 2-D matrices in --type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), norms in F32. As llama.cpp's
converter does: llama q_proj / k_proj rows are permuted to GGUF's interleaved RoPE layout (the other architectures
keep NEOX order); Gemma 2 norms are stored as 1 + w; GPT-2's Conv1D matrices are stored transposed ([out, in]) and
the tied head is written as output.weight; Phi-3's longrope factors become rope_factors_{long,short}.weight. Gemma
2's query_pre_attn_scalar is written as gemma2.attention.scale (its inverse square root). Used by the GGUF tests
(tests/gguf/make_fixtures.py); run with the venv of tests/hf/setup_venv.sh:
  .venv/bin/python scripts/hf_to_gguf.py assets/models/standard /tmp/standard-q8_0.gguf --type Q8_0
"""
import argparse
import json
import os
import sys

import numpy as np


def permute_rope(w, n_head):
    # HF rotate_half rows (h, s, i) -> GGUF interleaved rows (h, i, s), s in {0, 1}, i < d_head / 2.
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--type", default="F32", help="type of the 2-D weight matrices (default F32)")
    a = ap.parse_args()

    try:
        import gguf
        import torch
        from safetensors.torch import load_file
    except ModuleNotFoundError as e:
        sys.exit(f"hf_to_gguf.py: {e.name} is not installed: run it with the venv of tests/hf/setup_venv.sh "
                 "(.venv/bin/python scripts/hf_to_gguf.py ...)")

    cfg = json.load(open(os.path.join(a.model_dir, "config.json")))
    archs = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Gemma2ForCausalLM": "gemma2",
             "Phi3ForCausalLM": "phi3", "Olmo2ForCausalLM": "olmo2", "GPT2LMHeadModel": "gpt2"}
    cls = cfg.get("architectures", ["LlamaForCausalLM"])[0]
    if cls not in archs or cfg.get("focal", {}).get("mode", "standard") == "learned":
        sys.exit(f"hf_to_gguf.py: {cls} does not convert (supported: {', '.join(archs)}; no learned-tau tensors in GGUF)")
    arch = archs[cls]
    focal = cfg.get("focal", {})
    if focal.get("mode", "standard") == "focal":  # GGUF has no key for it: the file would run standard attention
        print(f"hf_to_gguf.py: warning: the model's focal t = {focal.get('focal_temp')} is not stored in GGUF; the "
              f".gguf runs standard attention unless given --temp {focal.get('focal_temp')}", file=sys.stderr)
    if arch == "gpt2":  # GPT-2's own config names
        for k, g in [("hidden_size", "n_embd"), ("num_hidden_layers", "n_layer"), ("num_attention_heads", "n_head"),
                     ("max_position_embeddings", "n_positions"), ("rms_norm_eps", "layer_norm_epsilon")]:
            cfg[k] = cfg[g]
        cfg["intermediate_size"] = cfg.get("n_inner") or 4 * cfg["n_embd"]
    qtype = gguf.GGMLQuantizationType[a.type]
    st = {k: v.float().numpy() for k, v in load_file(os.path.join(a.model_dir, "model.safetensors")).items()}
    n_head, n_kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    d_head = cfg.get("head_dim") or cfg["hidden_size"] // n_head

    tmp = a.out + ".tmp"
    w = gguf.GGUFWriter(tmp, arch)
    w.add_name(os.path.basename(os.path.normpath(a.model_dir)))
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg.get("max_position_embeddings", 2048))
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_key_length(d_head)
    w.add_value_length(d_head)
    w.add_rope_dimension_count(d_head)
    w.add_rope_freq_base(float(cfg.get("rope_theta", 10000.0)))
    if arch == "gpt2":
        w.add_layer_norm_eps(float(cfg.get("rms_norm_eps", 1e-5)))
    else:
        w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
    w.add_vocab_size(cfg["vocab_size"])
    if arch == "gemma2":
        w.add_float32("gemma2.attn_logit_softcapping", float(cfg["attn_logit_softcapping"]))
        w.add_float32("gemma2.final_logit_softcapping", float(cfg["final_logit_softcapping"]))
        w.add_sliding_window(int(cfg["sliding_window"]))
        w.add_float32("gemma2.attention.scale", float(cfg["query_pre_attn_scalar"]) ** -0.5)
    rs = cfg.get("rope_scaling") or {}
    rtype = rs.get("rope_type", rs.get("type", "default"))
    if arch == "llama" and rtype in ("linear", "yarn"):
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR if rtype == "linear" else gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(float(rs["factor"]))
        if rtype == "yarn":
            w.add_rope_scaling_orig_ctx_len(int(cfg.get("max_position_embeddings", 2048)))
            if rs.get("attention_factor"):
                w.add_rope_scaling_attn_factors(float(rs["attention_factor"]))
    elif arch == "llama" and rtype == "llama3":
        # llama.cpp's rope_freqs.weight: per-pair factors the default frequencies are divided by.
        base, factor = float(cfg.get("rope_theta", 10000.0)), float(rs["factor"])
        lo, hi, old = float(rs["low_freq_factor"]), float(rs["high_freq_factor"]), rs["original_max_position_embeddings"]
        freqs = 1.0 / (base ** (np.arange(0, d_head, 2, dtype=np.float32) / d_head))
        factors = []
        for f in freqs:
            wavelen = 2 * np.pi / f
            if wavelen < old / hi:
                factors.append(1.0)
            elif wavelen > old / lo:
                factors.append(factor)
            else:
                smooth = (old / wavelen - lo) / (hi - lo)
                factors.append(1.0 / ((1 - smooth) / factor + smooth))
        st["rope_freqs.weight"] = np.array(factors, dtype=np.float32)
    elif arch == "llama" and rtype != "default":
        sys.exit(f"hf_to_gguf.py: rope_scaling type '{rtype}' has no llama.cpp GGUF form (linear, yarn, llama3 do)")
    if arch == "qwen2" and cfg.get("use_sliding_window"):
        w.add_sliding_window(int(cfg["sliding_window"]))
    if arch == "phi3":  # as llama.cpp's converter: 0 for "sliding_window": null (Phi-4), which readers take as none
        w.add_sliding_window(int(cfg.get("sliding_window") or 0))
    if arch == "phi3" and cfg.get("rope_scaling"):
        rs = cfg["rope_scaling"]
        w.add_string("phi3.rope.scaling.type", "longrope")
        w.add_uint32("phi3.rope.scaling.original_context_length", int(cfg["original_max_position_embeddings"]))
        st["rope_factors_long.weight"] = np.array(rs["long_factor"], dtype=np.float32)
        st["rope_factors_short.weight"] = np.array(rs["short_factor"], dtype=np.float32)

    tok_path = os.path.join(a.model_dir, "tokenizer.model")
    if os.path.exists(tok_path):
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=tok_path)
        toks, scores, types = [], [], []
        for i in range(sp.get_piece_size()):
            toks.append(sp.id_to_piece(i))
            scores.append(sp.get_score(i))
            t = gguf.TokenType.NORMAL
            if sp.is_unknown(i): t = gguf.TokenType.UNKNOWN
            elif sp.is_control(i): t = gguf.TokenType.CONTROL
            elif sp.is_unused(i): t = gguf.TokenType.UNUSED
            elif sp.is_byte(i): t = gguf.TokenType.BYTE
            types.append(t)
        w.add_tokenizer_model("llama")
        w.add_token_list(toks)
        w.add_token_scores(scores)
        w.add_token_types(types)
        if sp.bos_id() >= 0: w.add_bos_token_id(sp.bos_id())
        if sp.eos_id() >= 0: w.add_eos_token_id(sp.eos_id())
        if sp.unk_id() >= 0: w.add_unk_token_id(sp.unk_id())
        w.add_add_bos_token(True)

    if arch == "gpt2":
        names = {"transformer.wte.weight": "token_embd.weight", "transformer.wpe.weight": "position_embd.weight",
                 "transformer.ln_f.weight": "output_norm.weight", "transformer.ln_f.bias": "output_norm.bias"}
        per_layer = {"ln_1.weight": "attn_norm.weight", "ln_1.bias": "attn_norm.bias",
                     "attn.c_attn.weight": "attn_qkv.weight", "attn.c_attn.bias": "attn_qkv.bias",
                     "attn.c_proj.weight": "attn_output.weight", "attn.c_proj.bias": "attn_output.bias",
                     "ln_2.weight": "ffn_norm.weight", "ln_2.bias": "ffn_norm.bias",
                     "mlp.c_fc.weight": "ffn_up.weight", "mlp.c_fc.bias": "ffn_up.bias",
                     "mlp.c_proj.weight": "ffn_down.weight", "mlp.c_proj.bias": "ffn_down.bias"}
        prefix = "transformer.h"
        st["lm_head.weight"] = st["transformer.wte.weight"]  # tied head, written out as llama.cpp does
        names["lm_head.weight"] = "output.weight"
    else:
        names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                 "lm_head.weight": "output.weight"}
        post_norms = arch in ("gemma2", "olmo2")
        per_layer = {"input_layernorm.weight": "attn_norm.weight",
                     "post_attention_layernorm.weight": "post_attention_norm.weight" if post_norms else "ffn_norm.weight",
                     "pre_feedforward_layernorm.weight": "ffn_norm.weight",
                     "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
                     "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
                     "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
                     "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
                     "self_attn.v_proj.bias": "attn_v.bias", "self_attn.o_proj.bias": "attn_output.bias",
                     "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
                     "self_attn.qkv_proj.weight": "attn_qkv.weight", "mlp.gate_up_proj.weight": "ffn_up.weight",
                     "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
                     "mlp.down_proj.weight": "ffn_down.weight", "mlp.gate_proj.bias": "ffn_gate.bias",
                     "mlp.up_proj.bias": "ffn_up.bias", "mlp.down_proj.bias": "ffn_down.bias"}
        prefix = "model.layers"
    names.update({k: k for k in ("rope_factors_long.weight", "rope_factors_short.weight", "rope_freqs.weight")
                  if k in st})
    for l in range(cfg["num_hidden_layers"]):
        for k, v in per_layer.items():
            names[f"{prefix}.{l}.{k}"] = f"blk.{l}.{v}"
    missing = [k for k in st if k not in names and not k.endswith(("attn.bias", "attn.masked_bias"))]
    if missing:
        sys.exit(f"hf_to_gguf.py: tensors with no GGUF name for {arch}: {missing[:5]}")
    for hf, g in names.items():
        if hf not in st:
            continue
        x = st[hf].astype(np.float32)
        if arch == "llama" and hf.endswith(("q_proj.weight", "q_proj.bias")):
            x = permute_rope(x, n_head)
        elif arch == "llama" and hf.endswith(("k_proj.weight", "k_proj.bias")):
            x = permute_rope(x, n_kv)
        if arch == "gemma2" and hf.endswith("norm.weight"):
            x = x + 1.0
        if arch == "gpt2" and x.ndim == 2 and (".attn." in hf or ".mlp." in hf):
            x = np.ascontiguousarray(x.T)  # Conv1D [in, out] -> [out, in]
        if x.ndim == 2 and qtype != gguf.GGMLQuantizationType.F32:
            if qtype == gguf.GGMLQuantizationType.F16:
                w.add_tensor(g, x.astype(np.float16))
            else:
                w.add_tensor(g, gguf.quants.quantize(x, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(g, x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, a.out)
    print(a.out)


if __name__ == "__main__":
    main()
