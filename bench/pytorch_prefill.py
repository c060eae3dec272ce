#!/usr/bin/env python3
# PyTorch eager prefill baseline for focalscope's benchmarks: an independent plain-torch LLaMA forward
# (not transformers) that materialises every [n_heads, T, T] attention matrix, timed in tokens/s.
# Also writes random HF-format LLaMA model dirs (--make-model) used by the C++ benchmark.
"""PyTorch eager LLaMA prefill benchmark and random model writer.

Benchmark:   /usr/bin/python3 bench/pytorch_prefill.py --model DIR --T 256,1024,2048 --threads N --reps R [--json out.json]
Make model:  /usr/bin/python3 bench/pytorch_prefill.py --make-model DIR [--hidden 1024 --layers 8 --heads 16
                 --kv-heads 4 --intermediate 2816 --vocab 8000 --seed 0]

Reads config.json + model.safetensors (or a sharded model.safetensors.index.json) from a Hugging Face
LlamaForCausalLM directory. Uses the `safetensors` package when importable, else a small numpy reader
(F32/F16/BF16/F64). All math runs in float32. A config "focal" object is honoured only for
{"mode": "focal" (or "constant"), "focal_temp": t}: attention logits are divided by t; other modes are ignored.
"""

import argparse
import json
import math
import os
import statistics
import struct
import sys
import time

import numpy as np
import torch

# ---------------------------------------------------------------------------------------------
# safetensors I/O

_NP_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "BF16": np.uint16}


def _read_safetensors_numpy(path):
    """Minimal safetensors reader: u64 little-endian header length, JSON header, raw data."""
    out = {}
    with open(path, "rb") as f:
        (n_header,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n_header))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n_header)
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in _NP_DTYPES:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dtype} (want F32, F16, BF16)")
        begin, end = info["data_offsets"]
        arr = np.frombuffer(data[begin:end], dtype=_NP_DTYPES[dtype])
        if dtype == "BF16":  # bfloat16 is the top half of a float32
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        else:
            arr = arr.astype(np.float32)
        out[name] = torch.from_numpy(arr.reshape(info["shape"]).copy())
    return out


def read_safetensors(path):
    try:
        from safetensors.torch import load_file
    except ImportError:
        return _read_safetensors_numpy(path)
    return {k: v.float() for k, v in load_file(path).items()}


def write_safetensors(path, tensors, metadata=None):
    """Write float32 numpy arrays in the safetensors format (header padded to 8 bytes)."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    names = sorted(tensors)
    for name in names:
        a = tensors[name]
        assert a.dtype == np.float32, name
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for name in names:
            f.write(np.ascontiguousarray(tensors[name]).astype("<f4", copy=False).tobytes())


def load_model_dir(model_dir):
    cfg_path = os.path.join(model_dir, "config.json")
    if not os.path.isfile(cfg_path):
        sys.exit(f"pytorch_prefill.py: {cfg_path} not found (expected a Hugging Face model directory)")
    with open(cfg_path) as f:
        cfg = json.load(f)
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.isfile(single):
        weights = read_safetensors(single)
    elif os.path.isfile(index):
        with open(index) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        weights = {}
        for s in shards:
            weights.update(read_safetensors(os.path.join(model_dir, s)))
    else:
        sys.exit(f"pytorch_prefill.py: no model.safetensors or model.safetensors.index.json in {model_dir}")
    return cfg, weights


# ---------------------------------------------------------------------------------------------
# Model


class LlamaPrefill:
    """Plain-torch LLaMA forward over one sequence (no KV cache, no batch)."""

    def __init__(self, cfg, w):
        self.n_layers = cfg["num_hidden_layers"]
        self.n_heads = cfg["num_attention_heads"]
        self.n_kv_heads = cfg.get("num_key_value_heads") or self.n_heads
        self.hidden = cfg["hidden_size"]
        self.head_dim = cfg.get("head_dim") or self.hidden // self.n_heads
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.rope_theta = cfg.get("rope_theta", 10000.0)
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"num_attention_heads {self.n_heads} not a multiple of "
                             f"num_key_value_heads {self.n_kv_heads}")
        act = cfg.get("hidden_act", "silu")
        if act != "silu":
            raise ValueError(f"config.json hidden_act={act!r}: only 'silu' is supported")
        rs = cfg.get("rope_scaling")
        if rs and rs.get("rope_type", rs.get("type")) not in (None, "default"):
            print(f"warning: rope_scaling {rs} ignored (plain RoPE used; timing is unaffected)",
                  file=sys.stderr)

        focal = cfg.get("focal") or {}
        self.focal_temp = 1.0
        if focal.get("mode") in ("focal", "constant"):
            self.focal_temp = float(focal["focal_temp"])
            if not self.focal_temp > 0:
                raise ValueError(f"config.json focal.focal_temp must be > 0, got {self.focal_temp}")

        def get(name, required=True):
            if name in w:
                return w[name].float().contiguous()
            if required:
                raise KeyError(f"model weights lack tensor {name}")
            return None

        self.embed = get("model.embed_tokens.weight")                 # [vocab, hidden]
        self.lm_head = get("lm_head.weight", required=False)          # [vocab, hidden]
        if self.lm_head is None:  # tied embeddings: save_pretrained omits lm_head.weight
            self.lm_head = self.embed
        self.norm = get("model.norm.weight")                          # [hidden]
        self.layers = []
        for i in range(self.n_layers):
            p = f"model.layers.{i}."
            L = {}
            for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
                L[n] = get(p + f"self_attn.{n}.weight")
                L[n + ".b"] = get(p + f"self_attn.{n}.bias", required=False)
            for n in ("gate_proj", "up_proj", "down_proj"):
                L[n] = get(p + f"mlp.{n}.weight")
                L[n + ".b"] = get(p + f"mlp.{n}.bias", required=False)
            L["ln1"] = get(p + "input_layernorm.weight")
            L["ln2"] = get(p + "post_attention_layernorm.weight")
            self.layers.append(L)
        self.vocab = self.embed.shape[0]

    def _rms_norm(self, x, weight):
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    @staticmethod
    def _linear(x, w, b):
        y = x @ w.t()
        return y if b is None else y + b

    def _rope_tables(self, T):
        half = self.head_dim // 2
        inv_freq = 1.0 / (self.rope_theta ** (torch.arange(0, half, dtype=torch.float32) * 2.0
                                              / self.head_dim))          # [head_dim/2]
        angles = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq[None, :]  # [T, head_dim/2]
        angles = torch.cat([angles, angles], dim=-1)                     # [T, head_dim]
        return angles.cos(), angles.sin()

    @staticmethod
    def _rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat([-x[..., h:], x[..., :h]], dim=-1)

    def forward(self, ids, all_logits=True, keep_attn=False):
        """ids: int64 [T]. Returns logits [T, vocab] (or [1, vocab]) and, if keep_attn,
        the list of per-layer attention probabilities [n_heads, T, T]."""
        T = ids.shape[0]
        H, KVH, D = self.n_heads, self.n_kv_heads, self.head_dim
        G = H // KVH
        cos, sin = self._rope_tables(T)                                  # [T, D] each
        scale = 1.0 / (math.sqrt(D) * self.focal_temp)
        mask = torch.full((T, T), float("-inf")).triu(1)                 # [T, T] causal
        attn_kept = []

        x = self.embed[ids]                                              # [T, hidden]
        for L in self.layers:
            h = self._rms_norm(x, L["ln1"])
            q = self._linear(h, L["q_proj"], L["q_proj.b"]).view(T, H, D).transpose(0, 1)    # [H, T, D]
            k = self._linear(h, L["k_proj"], L["k_proj.b"]).view(T, KVH, D).transpose(0, 1)  # [KVH, T, D]
            v = self._linear(h, L["v_proj"], L["v_proj.b"]).view(T, KVH, D).transpose(0, 1)  # [KVH, T, D]
            q = q * cos + self._rotate_half(q) * sin
            k = k * cos + self._rotate_half(k) * sin
            # GQA: query head j uses kv head j // G (same grouping as HF repeat_kv).
            qg = q.reshape(KVH, G, T, D)                                 # [KVH, G, T, D]
            scores = torch.matmul(qg, k[:, None].transpose(-1, -2)) * scale  # [KVH, G, T, T]
            probs = torch.softmax(scores + mask, dim=-1)                 # [KVH, G, T, T]
            o = torch.matmul(probs, v[:, None])                          # [KVH, G, T, D]
            if keep_attn:
                attn_kept.append(probs.reshape(H, T, T))
            o = o.reshape(H, T, D).transpose(0, 1).reshape(T, H * D)     # [T, H*D]
            x = x + self._linear(o, L["o_proj"], L["o_proj.b"])
            h = self._rms_norm(x, L["ln2"])
            gate = self._linear(h, L["gate_proj"], L["gate_proj.b"])     # [T, intermediate]
            up = self._linear(h, L["up_proj"], L["up_proj.b"])           # [T, intermediate]
            x = x + self._linear(torch.nn.functional.silu(gate) * up, L["down_proj"], L["down_proj.b"])
        x = self._rms_norm(x if all_logits else x[-1:], self.norm)
        logits = x @ self.lm_head.t()                                    # [T or 1, vocab]
        return (logits, attn_kept) if keep_attn else logits


# ---------------------------------------------------------------------------------------------
# Modes


def make_model(args):
    hidden, n_layers, H, KVH, inter, vocab = (args.hidden, args.layers, args.heads, args.kv_heads,
                                              args.intermediate, args.vocab)
    if hidden % H or H % KVH:
        sys.exit("pytorch_prefill.py: --hidden must be a multiple of --heads and --heads of --kv-heads")
    D = hidden // H
    os.makedirs(args.make_model, exist_ok=True)
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_attention_heads": H,
        "num_key_value_heads": KVH,
        "num_hidden_layers": n_layers,
        "head_dim": D,
        "vocab_size": vocab,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "max_position_embeddings": 4096,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": True,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "float32",
    }
    rng = np.random.default_rng(args.seed)

    def randn(rows, cols, std):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(std))

    t = {"model.embed_tokens.weight": randn(vocab, hidden, 0.5),
         "model.norm.weight": np.ones(hidden, np.float32)}
    for i in range(n_layers):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = randn(H * D, hidden, 1.3 / math.sqrt(hidden))
        t[p + "self_attn.k_proj.weight"] = randn(KVH * D, hidden, 1.3 / math.sqrt(hidden))
        t[p + "self_attn.v_proj.weight"] = randn(KVH * D, hidden, 1 / math.sqrt(hidden))
        t[p + "self_attn.o_proj.weight"] = randn(hidden, H * D, 1 / math.sqrt(H * D))
        t[p + "mlp.gate_proj.weight"] = randn(inter, hidden, 1 / math.sqrt(hidden))
        t[p + "mlp.up_proj.weight"] = randn(inter, hidden, 1 / math.sqrt(hidden))
        t[p + "mlp.down_proj.weight"] = randn(hidden, inter, 1 / math.sqrt(inter))
        t[p + "input_layernorm.weight"] = np.ones(hidden, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(hidden, np.float32)
    with open(os.path.join(args.make_model, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    write_safetensors(os.path.join(args.make_model, "model.safetensors"), t, {"format": "pt"})
    n_params = sum(a.size for a in t.values())
    print(f"wrote {args.make_model}: {n_params / 1e6:.1f}M params, float32, tied embeddings")


def bench(args):
    torch.set_num_threads(args.threads)
    cfg, weights = load_model_dir(args.model)
    model = LlamaPrefill(cfg, weights)
    del weights
    Ts = [int(s) for s in args.T.split(",") if s.strip()]
    g = torch.Generator().manual_seed(args.seed)
    results = []
    print(f"model {args.model}: {model.n_layers} layers, hidden {model.hidden}, heads {model.n_heads}/"
          f"{model.n_kv_heads}, head_dim {model.head_dim}, vocab {model.vocab}, "
          f"focal_temp {model.focal_temp}; torch {torch.__version__}, threads {torch.get_num_threads()}")
    with torch.no_grad():
        for T in Ts:
            ids = torch.randint(0, model.vocab, (T,), generator=g)
            model.forward(ids, all_logits=args.logits == "all")  # warm-up
            times = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                model.forward(ids, all_logits=args.logits == "all")
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            results.append({"T": T, "tokens_per_s": T / med, "median_s": med,
                            "reps": args.reps, "threads": args.threads})
            print(f"T={T:6d}  {T / med:10.1f} tokens/s  (median {med * 1e3:.1f} ms, "
                  f"min {min(times) * 1e3:.1f}, max {max(times) * 1e3:.1f}, reps {args.reps})",
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="PyTorch eager LLaMA prefill benchmark (plain torch, attention probabilities "
                    "materialised) and random HF-format model writer.")
    ap.add_argument("--model", help="Hugging Face model dir (config.json + model.safetensors)")
    ap.add_argument("--T", default="256,1024,2048", help="comma-separated prompt lengths")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch.set_num_threads")
    ap.add_argument("--reps", type=int, default=3, help="timed runs per T (after one warm-up)")
    ap.add_argument("--json", help="write [{T, tokens_per_s, median_s, reps, threads}] here")
    ap.add_argument("--logits", choices=["all", "last"], default="all",
                    help="compute logits for every position (default, as HF does) or the last only")
    ap.add_argument("--seed", type=int, default=0, help="seed for token ids / random weights")
    mk = ap.add_argument_group("random model writer")
    mk.add_argument("--make-model", metavar="DIR", help="write a random HF-format model to DIR and exit")
    mk.add_argument("--hidden", type=int, default=1024)
    mk.add_argument("--layers", type=int, default=8)
    mk.add_argument("--heads", type=int, default=16)
    mk.add_argument("--kv-heads", type=int, default=4)
    mk.add_argument("--intermediate", type=int, default=2816)
    mk.add_argument("--vocab", type=int, default=8000)
    args = ap.parse_args(argv)
    if args.make_model:
        make_model(args)
    elif args.model:
        if args.reps < 1 or args.threads < 1:
            ap.error("--reps and --threads must be >= 1")
        bench(args)
    else:
        ap.error("give --model DIR (benchmark) or --make-model DIR")
    return 0


if __name__ == "__main__":
    sys.exit(main())
