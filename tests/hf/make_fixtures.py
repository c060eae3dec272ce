#!/usr/bin/env python3
# Generates Hugging Face transformers (4.47.1, eager attention) reference fixtures for focalscope's
# C++ conformance tests: tiny random LLaMA models + their logits and attention probabilities,
# both plain and with a constant focal temperature t. Run with the venv from tests/hf/setup_venv.sh.
"""Write tiny random LlamaForCausalLM models and their reference outputs.

Each fixture directory DIR/<name>/ holds:
  config.json, model.safetensors   (save_pretrained; tied models have no lm_head.weight)
  reference.safetensors            (all float32, contiguous):
    input_ids      [T]             token ids as exact floats, first token = bos (1)
    logits         [T, vocab]
    attn.<L>       [n_heads, T, T] softmax probabilities of layer L (eager, output_attentions)
    logits_t       [T, vocab]      same with every attention logit multiplied by 1/t
    attn_t.<L>     [n_heads, T, T]
    focal_temp     [1]             t
    gen_prompt_len [1]             fixtures with "generate" = (P, N) only: greedy model.generate() from the
    gen_tokens     [N]             first P input ids, N new tokens (a fresh model: dynamic RoPE keeps state),
    gen_logits     [N, vocab]      and the raw logits of each step (output_logits): the KV-cache decode rule
DIR/index.json lists {"name", "T", "focal_temp", "n_layers", "attn_layers"} per fixture.
attn_layers says which layers have attn.<L>/attn_t.<L> stored: all of them, except for
long_1024 where only the last layer is stored to keep the fixtures under ~60 MB
(pass --all-attn to store every layer there too).

QK-norm (Qwen3-style) is not covered: transformers 4.47.1 has no Qwen3 (it arrived in 4.51).
"""

import argparse
import copy
import json
import math
import os
import sys
import time

import torch

try:
    import transformers
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError as e:  # pragma: no cover
    sys.exit(f"make_fixtures.py: {e}\nRun tests/hf/setup_venv.sh and use .venv/bin/python.")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from arch_fixtures import ARCH_CONFIGS, build_arch_model, reinit_value, scale_queries, window_layers  # noqa: E402

EXPECTED_TRANSFORMERS = "4.47.1"

# Scale of the re-initialised q_proj/k_proj weights: std = QK_GAIN / sqrt(hidden). With unit-RMS
# normalised inputs, q and k entries have std ~QK_GAIN, so attention logits q.k/sqrt(d) have std
# ~QK_GAIN^2: clearly peaked but not one-hot attention (checked below via the mean row max).
QK_GAIN = 1.3

CONFIGS = [
    dict(name="mha_tied", seed=1001, hidden=64, layers=2, heads=4, kv_heads=4, intermediate=160,
         vocab=256, tied=True, rope_theta=10000.0, eps=1e-6, T=64, t=0.4),
    dict(name="gqa_untied", seed=1002, hidden=96, layers=3, heads=6, kv_heads=2, intermediate=256,
         vocab=320, tied=False, rope_theta=500000.0, eps=1e-5, T=200, t=0.5),
    dict(name="mqa_odd", seed=1003, hidden=80, layers=2, heads=5, kv_heads=1, intermediate=200,
         vocab=97, tied=False, rope_theta=10000.0, eps=1e-6, T=131, t=0.3),
    dict(name="headdim_explicit", seed=1004, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=32,
         intermediate=160, vocab=200, tied=False, rope_theta=10000.0, eps=1e-6, T=96, t=0.4,
         attention_bias=False),
    dict(name="long_1024", seed=1005, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128,
         vocab=256, tied=True, rope_theta=10000.0, eps=1e-6, T=1024, t=0.4, long=True,
         attn_layers="last"),
] + ARCH_CONFIGS


def build_model(c):
    torch.manual_seed(c["seed"])
    if "arch" in c:  # the other architectures (arch_fixtures.py)
        model = build_arch_model(c).float().eval()
        assert model.config._attn_implementation == "eager"
        g = torch.Generator().manual_seed(c["seed"] * 7 + 3)
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(reinit_value(c, name, p, g))
        return model
    cfg = LlamaConfig(
        vocab_size=c["vocab"],
        hidden_size=c["hidden"],
        intermediate_size=c["intermediate"],
        num_hidden_layers=c["layers"],
        num_attention_heads=c["heads"],
        num_key_value_heads=c["kv_heads"],
        head_dim=c.get("head_dim"),
        hidden_act="silu",
        max_position_embeddings=2048,
        rms_norm_eps=c["eps"],
        rope_theta=c["rope_theta"],
        tie_word_embeddings=c["tied"],
        attention_bias=c.get("attention_bias", False),
        mlp_bias=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=None,
        torch_dtype="float32",
        attn_implementation="eager",  # LlamaForCausalLM.__init__ takes no such kwarg; the config does
    )
    model = LlamaForCausalLM(cfg)
    model = model.float().eval()
    assert model.config._attn_implementation == "eager"

    # Re-initialise with a fixed generator. Defaults (std 0.02) give near-uniform attention and
    # negligible residual updates, which would hide bugs; use fan-in scaled weights instead.
    g = torch.Generator().manual_seed(c["seed"] * 7 + 3)
    hidden = c["hidden"]
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
            elif name.endswith("norm.weight"):  # input_layernorm, post_attention_layernorm, model.norm
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(("q_proj.weight", "k_proj.weight")):
                p.copy_(torch.randn(p.shape, generator=g) * (QK_GAIN / math.sqrt(hidden)))
            elif name.endswith(".weight") and p.dim() == 2:  # v/o/gate/up/down/lm_head
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                raise RuntimeError(f"unexpected parameter {name}")
    if c.get("tied"):
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return model


def focal_copy(model, t):
    """Deep copy whose every attention logit is multiplied by 1/t.

    In 4.47.1 the eager path computes matmul(q, k^T) / sqrt(head_dim) inline (there is no
    `scaling` attribute). RoPE is linear in q, so scaling q_proj's weight (and bias) by 1/t
    scales every logit q.k by 1/t exactly (up to float rounding)."""
    m = copy.deepcopy(model)
    if "arch" in getattr(m, "_fixture", {}):
        with torch.no_grad():
            scale_queries(m._fixture, m, t)
        return m.eval()
    with torch.no_grad():
        for layer in m.model.layers:
            layer.self_attn.q_proj.weight.mul_(1.0 / t)
            if layer.self_attn.q_proj.bias is not None:
                layer.self_attn.q_proj.bias.mul_(1.0 / t)
    return m.eval()


def run(model, ids):
    with torch.no_grad():
        out = model(ids[None], output_attentions=True, use_cache=False)
    logits = out.logits[0].float().contiguous()
    attns = [a[0].float().contiguous() for a in out.attentions]
    return logits, attns


def greedy_generate(model, ids, prompt_len, n_new):
    """transformers' own generate(): greedy, KV cache, n_new tokens (no stop at eos), with each step's raw logits."""
    # generate() asks whether FSDP manages the model; Debian's torch 1.13 cannot import torch.distributed.fsdp under
    # Python 3.11 (a dataclass error), and nothing here is distributed: answer no, leave the decoding untouched.
    import transformers.generation.utils as gen_utils
    gen_utils.is_fsdp_managed_module = lambda module: False
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        prompt = ids[None, :prompt_len]
        # An explicit mask: generate() would otherwise infer one from pad_token_id, masking any prompt token that
        # happens to equal it (and shifting the positions after it).
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=n_new,
                             min_new_tokens=n_new, use_cache=True, return_dict_in_generate=True, output_logits=True)
    tokens = out.sequences[0, prompt_len:]
    assert tokens.numel() == n_new
    logits = torch.stack([x[0] for x in out.logits]).float().contiguous()
    assert torch.equal(logits.argmax(-1), tokens), "greedy tokens are not the raw logits' arg-max"
    return {"gen_prompt_len": torch.tensor([prompt_len], dtype=torch.float32),
            "gen_tokens": tokens.to(torch.float32).contiguous(), "gen_logits": logits}


def mean_entropy(a):
    a64 = a.double()
    return float(-(a64 * torch.log(a64.clamp_min(1e-300))).sum(-1).mean())


def check_fixture(c, ids, logits, attns, logits_t, attns_t, t):
    """Sanity checks; returns a dict of summary stats. Raises on hard failures."""
    T, H = c["T"], c["heads"]
    assert logits.shape == (T, c["vocab"]) and logits_t.shape == logits.shape
    assert torch.isfinite(logits).all() and torch.isfinite(logits_t).all()
    causal = torch.ones(T, T).triu(1).bool()
    windows = window_layers(c) if "arch" in c else {}
    for L, a in list(enumerate(attns)) + list(enumerate(attns_t)):
        assert a.shape == (H, T, T), a.shape
        rows = a.double().sum(-1)
        assert torch.allclose(rows, torch.ones_like(rows), atol=1e-5), float((rows - 1).abs().max())
        assert float(a[:, causal].abs().max()) == 0.0, "non-zero probability above the diagonal"
        if L in windows:  # keys j <= i - window are outside the window: exactly 0
            outside = torch.ones(T, T).tril(-windows[L]).bool()
            assert float(a[:, outside].abs().max()) == 0.0, f"layer {L}: probability outside the window"
    if c.get("attn_cap"):  # soft-capped logits: attn_t is not a re-tempering of attn
        ent = sum(mean_entropy(a) for a in attns) / len(attns)
        ent_t = sum(mean_entropy(a) for a in attns_t) / len(attns_t)
        rowmax = float(torch.stack([a.max(-1).values.mean() for a in attns]).mean())
        rowmax_t = float(torch.stack([a.max(-1).values.mean() for a in attns_t]).mean())
        return dict(mean_entropy=ent, mean_entropy_t=ent_t, mean_row_max=rowmax, mean_row_max_t=rowmax_t,
                    layer0_focal_err=0.0, logits_std=float(logits.std()), logits_t_std=float(logits_t.std()))
    # Layer 0 sees identical inputs in both models, so attn_t.0 must equal a row softmax of
    # log(attn.0)/t over the causal positions: an independent check of the q_proj trick.
    a0 = attns[0].double()
    z = torch.log(a0.clamp_min(1e-300)) / t
    z = z.masked_fill(causal, float("-inf"))
    pred = torch.softmax(z, dim=-1)
    err0 = float((pred - attns_t[0].double()).abs().max())
    assert err0 < 1e-4, f"attn_t.0 != softmax(log(attn.0)/t): max err {err0}"
    ent = sum(mean_entropy(a) for a in attns) / len(attns)
    ent_t = sum(mean_entropy(a) for a in attns_t) / len(attns_t)
    assert ent_t < ent, f"focal attention is not sharper: entropy {ent_t} >= {ent}"
    rowmax = float(torch.stack([a.max(-1).values.mean() for a in attns]).mean())
    rowmax_t = float(torch.stack([a.max(-1).values.mean() for a in attns_t]).mean())
    return dict(mean_entropy=ent, mean_entropy_t=ent_t, mean_row_max=rowmax,
                mean_row_max_t=rowmax_t, layer0_focal_err=err0,
                logits_std=float(logits.std()), logits_t_std=float(logits_t.std()))


def make_fixture(c, out_dir, all_attn):
    t0 = time.perf_counter()
    T, t = c["T"], c["t"]
    model = build_model(c)
    model._fixture = c
    d = os.path.join(out_dir, c["name"])
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    if c.get("rope_type"):  # the type name a checkpoint of that era carries (Phi3Config saves it as "longrope")
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        cfg["rope_scaling"]["type"] = c["rope_type"]
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)

    g = torch.Generator().manual_seed(c["seed"] + 500)
    ids = torch.randint(0, c["vocab"], (T,), generator=g, dtype=torch.long)
    ids[0] = 1

    gen = None
    if c.get("generate"):  # before any other call: a dynamic rotary embedding remembers the longest length it saw
        gen = greedy_generate(build_model(c), ids, *c["generate"])
    logits, attns = run(model, ids)
    logits_t, attns_t = run(focal_copy(model, t), ids)
    stats = check_fixture(c, ids, logits, attns, logits_t, attns_t, t)

    n_layers = c["layers"]
    if c.get("attn_layers") == "last" and not all_attn:
        attn_layers = [n_layers - 1]
    else:
        attn_layers = list(range(n_layers))

    ref = {
        "input_ids": ids.to(torch.float32).contiguous(),
        "logits": logits,
        "logits_t": logits_t,
        "focal_temp": torch.tensor([t], dtype=torch.float32),
    }
    if gen is not None:
        ref.update(gen)
    for L in attn_layers:
        ref[f"attn.{L}"] = attns[L]
        ref[f"attn_t.{L}"] = attns_t[L]
    assert all(v.dtype == torch.float32 and v.is_contiguous() for v in ref.values())
    save_file(ref, os.path.join(d, "reference.safetensors"),
              # one key: safetensors writes metadata in hash order, which would make reruns differ
              metadata={"focalscope": json.dumps({
                  "generator": "tests/hf/make_fixtures.py",
                  "transformers": transformers.__version__,
                  "torch": torch.__version__,
                  "attn_implementation": "eager"}, sort_keys=True)})
    if c.get("gguf"):  # the same model through scripts/hf_to_gguf.py, beside the directory
        import subprocess
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        subprocess.run([sys.executable, os.path.join(root, "scripts", "hf_to_gguf.py"), d, d + ".gguf"],
                       check=True, stdout=subprocess.DEVNULL)
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    stats["seconds"] = time.perf_counter() - t0
    stats["bytes"] = size
    entry = {"name": c["name"], "T": T, "focal_temp": t, "n_layers": n_layers,
             "attn_layers": attn_layers}
    return entry, stats


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Write Hugging Face LlamaForCausalLM (eager) reference fixtures for "
                    "focalscope conformance tests.")
    ap.add_argument("--out", required=True, help="output directory (created if missing)")
    ap.add_argument("--quick", action="store_true", help="skip the long T=1024 fixture")
    ap.add_argument("--only", default=None,
                    help="comma-separated fixture names to generate (default: all)")
    ap.add_argument("--all-attn", action="store_true",
                    help="store attn.<L>/attn_t.<L> for every layer of long_1024 too (+32 MB)")
    args = ap.parse_args(argv)

    if transformers.__version__ != EXPECTED_TRANSFORMERS:
        print(f"warning: transformers {transformers.__version__} != {EXPECTED_TRANSFORMERS}; "
              "the fixtures were designed against the 4.47.1 eager attention path", file=sys.stderr)
    torch.set_grad_enabled(False)

    configs = CONFIGS
    if args.quick:
        configs = [c for c in configs if not c.get("long")]
    if args.only:
        want = set(args.only.split(","))
        unknown = want - {c["name"] for c in CONFIGS}
        if unknown:
            ap.error(f"unknown fixture(s): {sorted(unknown)}")
        configs = [c for c in configs if c["name"] in want]

    os.makedirs(args.out, exist_ok=True)
    t_start = time.perf_counter()
    index, total = [], 0
    for c in configs:
        entry, s = make_fixture(c, args.out, args.all_attn)
        index.append(entry)
        total += s["bytes"]
        print(f"{c['name']:18s} T={c['T']:5d} t={c['t']:.2f} layers={c['layers']} "
              f"row_max={s['mean_row_max']:.3f}->{s['mean_row_max_t']:.3f} "
              f"entropy={s['mean_entropy']:.3f}->{s['mean_entropy_t']:.3f} "
              f"logits_std={s['logits_std']:.2f} l0_focal_err={s['layer0_focal_err']:.1e} "
              f"{s['bytes'] / 1e6:.1f} MB {s['seconds']:.1f}s")
        if c["T"] <= 256 and not (0.1 < s["mean_row_max"] < 0.9):
            print(f"warning: {c['name']}: mean row max {s['mean_row_max']:.3f} outside (0.1, 0.9)",
                  file=sys.stderr)
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    print(f"wrote {len(index)} fixtures to {args.out}: {total / 1e6:.1f} MB, "
          f"{time.perf_counter() - t_start:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
