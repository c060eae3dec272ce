#!/usr/bin/env python3
# PyTorch eager training baseline for focalscope's training benchmark (bench/train_bench.cpp, bench/run_train.sh):
# the same LLaMA in plain torch (not transformers) — RMSNorm, rotate_half RoPE, GQA, causal softmax attention with
# logits scaled by 1/(t*sqrt(d)), SwiGLU, tied embeddings — trained with torch.optim.AdamW and clip_grad_norm_.
"""PyTorch eager LLaMA training-step benchmark.

Benchmark:  /usr/bin/python3 bench/pytorch_train.py --model DIR --threads N --batch 8 --seq-len 256 --steps 5
                [--modes standard,focal] [--json out.json]
Check:      /usr/bin/python3 bench/pytorch_train.py --model DIR --write-tokens F --batch B --seq-len T [--seed S]
            /usr/bin/python3 bench/pytorch_train.py --model DIR --tokens-file F --batch B --seq-len T [--check-steps K]
            (the same F given to `train_bench DIR --tokens-file F` must print the same losses and gradient norms)

Weights: config.json + model.safetensors read by bench/pytorch_prefill.py. Attention: the config's "focal" object
{"mode": "focal", "focal_temp": t} gives logits / (t sqrt(d)) (native mode); standard otherwise. Tokens/s counts
predicted tokens, batch * (seq_len - 1) per step, like train_bench. AdamW(lr 3e-3, betas (0.9, 0.95), eps 1e-8,
weight_decay 0.05 on matrices only, as focal train), clip_grad_norm_(1.0); loss = mean next-token cross entropy.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_prefill  # noqa: E402  (our own loader: config.json + safetensors, no transformers)


class LlamaTrain(torch.nn.Module):
    """Plain-torch LLaMA (tied embeddings) over a batch [B, T], every weight a Parameter."""

    def __init__(self, cfg, w):
        super().__init__()
        self.n_layers = cfg["num_hidden_layers"]
        self.n_heads = cfg["num_attention_heads"]
        self.n_kv_heads = cfg.get("num_key_value_heads") or self.n_heads
        self.hidden = cfg["hidden_size"]
        self.head_dim = cfg.get("head_dim") or self.hidden // self.n_heads
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.rope_theta = cfg.get("rope_theta", 10000.0)
        if cfg.get("hidden_act", "silu") != "silu":
            raise ValueError("only hidden_act 'silu' is supported")
        if "lm_head.weight" in w:
            raise ValueError("untied lm_head: this benchmark model has tied embeddings only")
        focal = cfg.get("focal") or {}
        self.native_temp = 1.0
        if focal.get("mode") in ("focal", "constant"):
            self.native_temp = float(focal["focal_temp"])
        P = torch.nn.Parameter
        self.embed = P(w["model.embed_tokens.weight"].clone())          # [V, hidden], also the head
        self.norm = P(w["model.norm.weight"].clone())
        self.layers = torch.nn.ModuleList()
        for i in range(self.n_layers):
            p = f"model.layers.{i}."
            for extra in ("self_attn.q_norm.weight", "self_attn.q_proj.bias", "mlp.gate_proj.bias",
                          "self_attn.tau_proj.weight"):
                if p + extra in w:
                    raise ValueError(f"{p + extra}: QK-norm, biases and learned tau are not modelled here")
            L = torch.nn.Module()
            L.wq = P(w[p + "self_attn.q_proj.weight"].clone())
            L.wk = P(w[p + "self_attn.k_proj.weight"].clone())
            L.wv = P(w[p + "self_attn.v_proj.weight"].clone())
            L.wo = P(w[p + "self_attn.o_proj.weight"].clone())
            L.w_gate = P(w[p + "mlp.gate_proj.weight"].clone())
            L.w_up = P(w[p + "mlp.up_proj.weight"].clone())
            L.w_down = P(w[p + "mlp.down_proj.weight"].clone())
            L.ln1 = P(w[p + "input_layernorm.weight"].clone())
            L.ln2 = P(w[p + "post_attention_layernorm.weight"].clone())
            self.layers.append(L)
        self.vocab = self.embed.shape[0]
        self._rope_T = -1

    def _rms_norm(self, x, weight):
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def _rope(self, T):
        if self._rope_T != T:
            half = self.head_dim // 2
            inv_freq = 1.0 / (self.rope_theta ** (torch.arange(0, half, dtype=torch.float32) * 2.0
                                                  / self.head_dim))
            ang = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq[None, :]
            ang = torch.cat([ang, ang], dim=-1)                          # [T, D]
            self._cos, self._sin = ang.cos(), ang.sin()
            self._mask = torch.full((T, T), float("-inf")).triu(1)
            self._rope_T = T
        return self._cos, self._sin, self._mask

    @staticmethod
    def _rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat([-x[..., h:], x[..., :h]], dim=-1)

    def forward(self, ids, temp):
        """ids: int64 [B, T]; temp: attention temperature t (1 = standard). Returns logits [B, T, V]."""
        B, T = ids.shape
        H, KVH, D = self.n_heads, self.n_kv_heads, self.head_dim
        G = H // KVH
        cos, sin, mask = self._rope(T)
        scale = 1.0 / (temp * math.sqrt(D))
        x = F.embedding(ids, self.embed)                                  # [B, T, hidden]
        for L in self.layers:
            h = self._rms_norm(x, L.ln1)
            q = (h @ L.wq.t()).view(B, T, H, D).transpose(1, 2)          # [B, H, T, D]
            k = (h @ L.wk.t()).view(B, T, KVH, D).transpose(1, 2)        # [B, KVH, T, D]
            v = (h @ L.wv.t()).view(B, T, KVH, D).transpose(1, 2)        # [B, KVH, T, D]
            q = q * cos + self._rotate_half(q) * sin
            k = k * cos + self._rotate_half(k) * sin
            qg = q.reshape(B, KVH, G, T, D)                               # query head j -> kv head j // G
            scores = torch.matmul(qg, k[:, :, None].transpose(-1, -2)) * scale   # [B, KVH, G, T, T]
            probs = torch.softmax(scores + mask, dim=-1)
            o = torch.matmul(probs, v[:, :, None])                        # [B, KVH, G, T, D]
            o = o.reshape(B, H, T, D).transpose(1, 2).reshape(B, T, H * D)
            x = x + o @ L.wo.t()
            h = self._rms_norm(x, L.ln2)
            x = x + (F.silu(h @ L.w_gate.t()) * (h @ L.w_up.t())) @ L.w_down.t()
        x = self._rms_norm(x, self.norm)
        return x @ self.embed.t()                                         # [B, T, V]


def make_optimizer(model):
    # Weight decay on matrices (embedding and projections), none on norms — as focal train (ParamRef::decay).
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=3e-3, betas=(0.9, 0.95), eps=1e-8)


def train_step(model, opt, ids, temp):
    opt.zero_grad(set_to_none=True)
    logits = model(ids, temp)
    V = logits.shape[-1]
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
    loss.backward()
    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item(), float(gnorm)


def load(model_dir):
    cfg, weights = pytorch_prefill.load_model_dir(model_dir)
    return cfg, LlamaTrain(cfg, weights)


def main(argv=None):
    ap = argparse.ArgumentParser(description="PyTorch eager LLaMA training-step benchmark (plain torch).")
    ap.add_argument("--model", required=True, help="model dir (config.json + model.safetensors)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch.set_num_threads")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5, help="timed steps per mode (after 2 warm-up steps)")
    ap.add_argument("--modes", default="standard,focal",
                    help="comma list: standard (t = 1), focal (the config's focal_temp, else 0.4)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random token batches")
    ap.add_argument("--json", help="write [{mode, batch, seq_len, threads, steps, median_s, tokens_per_s}]")
    ap.add_argument("--write-tokens", metavar="F", help="write a random [batch, seq_len] int32 batch to F and exit")
    ap.add_argument("--tokens-file", metavar="F", help="check mode: run --check-steps steps on this fixed batch "
                    "under the model's native attention, print loss and gradient norm of each")
    ap.add_argument("--check-steps", type=int, default=3)
    args = ap.parse_args(argv)
    if args.threads < 1 or args.batch < 1 or args.seq_len < 2 or args.steps < 1:
        ap.error("--threads, --batch, --steps >= 1 and --seq-len >= 2 required")
    torch.set_num_threads(args.threads)

    if args.write_tokens:
        with open(os.path.join(args.model, "config.json")) as f:
            vocab = json.load(f)["vocab_size"]
        rng = np.random.default_rng(args.seed)
        ids = rng.integers(0, vocab, size=(args.batch, args.seq_len), dtype=np.int64).astype("<i4")
        ids.tofile(args.write_tokens)
        print(f"wrote {args.write_tokens}: [{args.batch}, {args.seq_len}] int32 tokens < {vocab}, seed {args.seed}")
        return 0

    cfg, model = load(args.model)
    if args.tokens_file:
        ids = np.fromfile(args.tokens_file, dtype="<i4")
        if ids.size < args.batch * args.seq_len:
            sys.exit(f"pytorch_train.py: {args.tokens_file} holds fewer than batch*seq_len tokens")
        ids = torch.from_numpy(ids[: args.batch * args.seq_len].astype(np.int64)).view(args.batch, args.seq_len)
        opt = make_optimizer(model)
        print(f"check: {args.model}, attention t={model.native_temp}, batch {args.batch}, seq_len {args.seq_len}, "
              f"threads {torch.get_num_threads()}")
        for s in range(args.check_steps):
            loss, gnorm = train_step(model, opt, ids, model.native_temp)
            print(f"step {s}  loss {loss:.7f}  grad_norm {gnorm:.7f}")
        return 0

    n_params = sum(p.numel() for p in model.parameters())
    print(f"model {args.model}: {n_params / 1e6:.2f}M params, vocab {model.vocab}, hidden {model.hidden}, "
          f"{model.n_layers} layers, {model.n_heads}/{model.n_kv_heads} heads; batch {args.batch}, seq_len "
          f"{args.seq_len}; torch {torch.__version__}, threads {torch.get_num_threads()}, 2 warm-up + "
          f"{args.steps} timed steps")
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    tokens = args.batch * (args.seq_len - 1)
    results = []
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        if mode == "standard":
            temp = 1.0
        elif mode == "focal":
            temp = model.native_temp if model.native_temp != 1.0 else 0.4
        else:
            ap.error(f"--modes: unknown mode {mode!r} (standard, focal)")
        model.load_state_dict(init)
        opt = make_optimizer(model)
        g = torch.Generator().manual_seed(args.seed)
        times, loss = [], float("nan")
        for s in range(2 + args.steps):
            t0 = time.perf_counter()
            ids = torch.randint(0, model.vocab, (args.batch, args.seq_len), generator=g)
            loss, _ = train_step(model, opt, ids, temp)
            dt = time.perf_counter() - t0
            if s >= 2:
                times.append(dt)
        med = statistics.median(times)
        results.append({"mode": mode, "temp": temp, "batch": args.batch, "seq_len": args.seq_len,
                        "threads": args.threads, "steps": args.steps, "median_s": med,
                        "tokens_per_s": tokens / med, "min_s": min(times), "max_s": max(times),
                        "last_loss": loss})
    print(f"{'mode':9s} {'temp':>6s} {'median_ms':>12s} {'min_ms':>10s} {'max_ms':>10s} {'pred_tok/s':>14s} "
          f"{'last_loss':>10s}")
    for r in results:
        print(f"{r['mode']:9s} {r['temp']:6.2f} {r['median_s'] * 1e3:12.1f} {r['min_s'] * 1e3:10.1f} "
              f"{r['max_s'] * 1e3:10.1f} {r['tokens_per_s']:14.1f} {r['last_loss']:10.4f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
