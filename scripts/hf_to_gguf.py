#!/usr/bin/env python3
"""Converts a focalscope / Hugging Face LlamaForCausalLM directory (config.json, model.safetensors, optional
sentencepiece tokenizer.model) into a llama-architecture GGUF file with the PyPI `gguf` package's writer.

Weights: 2-D matrices in --type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), norms in F32. q_proj / k_proj rows are
permuted to GGUF's interleaved RoPE layout, as llama.cpp's converter does. Used by the GGUF tests
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

    import gguf
    import torch
    from safetensors.torch import load_file

    cfg = json.load(open(os.path.join(a.model_dir, "config.json")))
    if cfg.get("architectures", ["LlamaForCausalLM"])[0] != "LlamaForCausalLM" or cfg.get("focal", {}).get("mode",
                                                                                                         "standard") == "learned":
        sys.exit("hf_to_gguf.py: only standard LlamaForCausalLM models convert (no learned-tau tensors in GGUF)")
    qtype = gguf.GGMLQuantizationType[a.type]
    st = {k: v.float().numpy() for k, v in load_file(os.path.join(a.model_dir, "model.safetensors")).items()}
    n_head, n_kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    d_head = cfg.get("head_dim", cfg["hidden_size"] // n_head)

    tmp = a.out + ".tmp"
    w = gguf.GGUFWriter(tmp, "llama")
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
    w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
    w.add_vocab_size(cfg["vocab_size"])

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

    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    per_layer = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
                 "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
                 "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
                 "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
                 "mlp.down_proj.weight": "ffn_down.weight"}
    for l in range(cfg["num_hidden_layers"]):
        for k, v in per_layer.items():
            names[f"model.layers.{l}.{k}"] = f"blk.{l}.{v}"
    for hf, g in names.items():
        if hf not in st:
            continue
        x = st[hf].astype(np.float32)
        if hf.endswith("q_proj.weight"):
            x = permute_rope(x, n_head)
        elif hf.endswith("k_proj.weight"):
            x = permute_rope(x, n_kv)
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
