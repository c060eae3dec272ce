#!/usr/bin/env python3
"""Writes the bad-input corpus (issue 20): corrupted model directories, GGUF files and captures, each with the field
its refusal must name. Derived from the bundled model (assets/models/focal-t0.4), a small GGUF written here, and a
fresh capture made by the focal binary. Nothing here is committed; ctest writes it into the build tree.

  usage: make_corpus.py --focal BUILD/cli/focal --source REPO --out DIR

DIR/manifest.json lists the cases: {"name", "kind": "model" | "capture", "path", "field", "file"}. A case must be
refused (exit 1 or 2) by every entry point with a message that contains "file" (its path or name) and "field".
Cases with "expect": "warning" must instead be accepted (exit 0) with a warning naming the field; "extra" holds
options added to each command, "entry_points" limits the entry points run.
Needs numpy and h5py (Debian python3-numpy, python3-h5py)."""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

import h5py
import numpy as np

BIG = 1 << 30


# ---------------------------------------------------------------------------------------------- model directories
def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    return header, raw[8 + hlen:]


def write_safetensors_raw(path, header_bytes, data, hlen=None):
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes) if hlen is None else hlen))
        f.write(header_bytes)
        f.write(data)


def model_cases(src_model, out):
    cases = []
    base_cfg = json.load(open(os.path.join(src_model, "config.json")))
    header, data = read_safetensors(os.path.join(src_model, "model.safetensors"))

    def new_dir(name):
        d = os.path.join(out, "models", name)
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(src_model):
            if f not in ("config.json", "model.safetensors"):
                os.symlink(os.path.abspath(os.path.join(src_model, f)), os.path.join(d, f))
        return d

    def cfg_case(name, field, edit, weights=True):
        d = new_dir(name)
        cfg = json.loads(json.dumps(base_cfg))
        edit(cfg)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        if weights:
            os.symlink(os.path.abspath(os.path.join(src_model, "model.safetensors")), os.path.join(d, "model.safetensors"))
        cases.append({"name": name, "kind": "model", "path": d, "file": "config.json", "field": field})

    def setter(key, value):
        def f(c):
            c[key] = value
        return f

    def focal_setter(key, value):
        def f(c):
            c.setdefault("focal", {})[key] = value
        return f

    # Allocation bombs: sizes declared far beyond what the weights hold.
    for key in ["num_hidden_layers", "hidden_size", "vocab_size", "intermediate_size", "num_attention_heads",
                "num_key_value_heads"]:
        cfg_case("cfg-" + key + "-huge", key, setter(key, BIG))
    cfg_case("cfg-layers-2e9", "num_hidden_layers", setter("num_hidden_layers", 2_000_000_000))
    cfg_case("cfg-layers-negative", "num_hidden_layers", setter("num_hidden_layers", -4))
    cfg_case("cfg-layers-zero", "num_hidden_layers", setter("num_hidden_layers", 0))
    cfg_case("cfg-head-dim-huge", "head_dim", setter("head_dim", BIG))
    # JSON type errors: the field and the expected type must be named.
    for key, value in [("model_type", 5), ("hidden_act", 7), ("num_hidden_layers", "4"), ("num_hidden_layers", 4.5),
                       ("hidden_size", [64]), ("vocab_size", {"n": 1}), ("rope_theta", "1e4"),
                       ("rms_norm_eps", True), ("tie_word_embeddings", "yes"), ("attention_bias", 1),
                       ("bos_token_id", "1"), ("eos_token_id", 2.5), ("eos_token_id", []), ("eos_token_id", ["x"]),
                       ("architectures", "LlamaForCausalLM"), ("architectures", [5]), ("add_bos_token", 1),
                       ("head_dim", "16"), ("max_position_embeddings", -1), ("rope_scaling", 3),
                       ("sliding_window", "big"), ("mlp_bias", "no")]:
        tag = type(value).__name__ + ("-empty" if value == [] else "")
        cfg_case("cfg-type-%s-%s" % (key, tag), key, setter(key, value))
    cfg_case("cfg-focal-not-object", "focal", setter("focal", "x"))
    cfg_case("cfg-focal-mode-number", "mode", focal_setter("mode", 3))
    cfg_case("cfg-focal-mode-unknown", "mode", focal_setter("mode", "sharp"))
    cfg_case("cfg-focal-temp-string", "focal_temp", focal_setter("focal_temp", "0.4"))
    cfg_case("cfg-focal-temp-zero", "focal_temp", focal_setter("focal_temp", 0))
    cfg_case("cfg-focal-temp-negative", "focal_temp", focal_setter("focal_temp", -1))
    cfg_case("cfg-focal-tau-mode-number", "tau_mode",
             lambda c: c.update(focal={"mode": "learned", "tau_min": 1, "tau_max": 2, "tau_mode": 9}))
    cfg_case("cfg-focal-tau-bounds", "tau_min",
             lambda c: c.update(focal={"mode": "learned", "tau_min": 3, "tau_max": 2}))
    # Inconsistent or non-finite hyper-parameters.
    cfg_case("cfg-rope-theta-inf", "rope_theta", setter("rope_theta", 1e999))
    cfg_case("cfg-rope-theta-negative", "rope_theta", setter("rope_theta", -10000.0))
    cfg_case("cfg-rms-eps-zero", "rms_norm_eps", setter("rms_norm_eps", 0.0))
    cfg_case("cfg-kv-heads-not-divisor", "num_key_value_heads", setter("num_key_value_heads", 5))
    cfg_case("cfg-head-dim-odd", "head_dim", setter("head_dim", 7))
    cfg_case("cfg-hidden-mismatch", "hidden_size", setter("hidden_size", 96))
    cfg_case("cfg-vocab-too-small-for-tokenizer", "vocab_size", setter("vocab_size", 100))
    # Architecture fields (issue 13): windows, soft-caps, rope_scaling.
    cfg_case("cfg-window-beyond-context", "sliding_window",
             lambda c: c.update(architectures=["MistralForCausalLM"], model_type="mistral",
                                max_position_embeddings=128, sliding_window=4096))
    cfg_case("cfg-gemma2-attn-softcap-zero", "attn_logit_softcapping",
             lambda c: c.update(architectures=["Gemma2ForCausalLM"], model_type="gemma2", hidden_act="gelu_pytorch_tanh",
                                attn_logit_softcapping=0.0))
    cfg_case("cfg-gemma2-final-softcap-negative", "final_logit_softcapping",
             lambda c: c.update(architectures=["Gemma2ForCausalLM"], model_type="gemma2", hidden_act="gelu_pytorch_tanh",
                                final_logit_softcapping=-30.0))
    cfg_case("cfg-rope-type-unknown", "rope_type", setter("rope_scaling", {"rope_type": "ntk-parts", "factor": 2.0}))
    cfg_case("cfg-rope-llama3-missing-original", "original_max_position_embeddings",
             setter("rope_scaling", {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}))
    cfg_case("cfg-longrope-short-factor-length", "short_factor",
             lambda c: c.update(architectures=["Phi3ForCausalLM"], model_type="phi3", original_max_position_embeddings=64,
                                rope_scaling={"type": "longrope", "short_factor": [1.0, 1.0, 1.0],
                                              "long_factor": [1.0, 1.0, 1.0]}))
    # GPT-2 weights (issue 13): a Conv1D weight stored transposed, a missing position-embedding table.
    def gpt2_case(name, field, edit):
        d = new_dir(name)
        E, V, P, I = 8, 16, 16, 32
        cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": E, "n_layer": 1, "n_head": 2,
               "n_inner": I, "n_positions": P, "vocab_size": V, "activation_function": "gelu_new"}
        shapes = {"transformer.wte.weight": [V, E], "transformer.wpe.weight": [P, E], "transformer.ln_f.weight": [E],
                  "transformer.ln_f.bias": [E]}
        for k, sh in [("ln_1.weight", [E]), ("ln_1.bias", [E]), ("attn.c_attn.weight", [E, 3 * E]),
                      ("attn.c_attn.bias", [3 * E]), ("attn.c_proj.weight", [E, E]), ("attn.c_proj.bias", [E]),
                      ("ln_2.weight", [E]), ("ln_2.bias", [E]), ("mlp.c_fc.weight", [E, I]), ("mlp.c_fc.bias", [I]),
                      ("mlp.c_proj.weight", [I, E]), ("mlp.c_proj.bias", [E])]:
            shapes["transformer.h.0." + k] = sh
        edit(shapes)
        hdr, off = {}, 0
        for k, sh in shapes.items():
            n = 4
            for x in sh:
                n *= x
            hdr[k] = {"dtype": "F32", "shape": sh, "data_offsets": [off, off + n]}
            off += n
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        write_safetensors_raw(os.path.join(d, "model.safetensors"), json.dumps(hdr).encode(), bytes(off))
        cases.append({"name": name, "kind": "model", "path": d, "file": "model.safetensors", "field": field})

    gpt2_case("st-gpt2-conv1d-transposed", "c_attn.weight",
              lambda sh: sh.update({"transformer.h.0.attn.c_attn.weight": [24, 8]}))
    gpt2_case("st-gpt2-missing-position-embeddings", "transformer.wpe.weight",
              lambda sh: sh.pop("transformer.wpe.weight"))

    # tokenizer.json (byte-level BPE, preferred over the directory's tokenizer.model): malformed model and
    # pre-tokenizer fields.
    def tok_case(name, field, doc):
        d = new_dir(name)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(base_cfg, f)
        os.symlink(os.path.abspath(os.path.join(src_model, "model.safetensors")), os.path.join(d, "model.safetensors"))
        with open(os.path.join(d, "tokenizer.json"), "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        cases.append({"name": name, "kind": "model", "path": d, "file": "tokenizer.json", "field": field})

    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
    tok_case("tokjson-no-vocab", "model.vocab", {"model": {"type": "BPE", "merges": []}, "pre_tokenizer": byte_level})
    tok_case("tokjson-merge-unknown-piece", "model.merges[0]",
             {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a zz"]}, "pre_tokenizer": byte_level})
    tok_case("tokjson-unknown-regex", "pre_tokenizer.pretokenizers[0].pattern.Regex",
             {"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
              "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                  {"type": "Split", "pattern": {"Regex": "\\w+|\\s+"}, "behavior": "Isolated", "invert": False},
                  {"type": "ByteLevel", "use_regex": False}]}})
    tok_case("tokjson-truncated", "tokenizer.json", '{"model": {"type": "BPE", "vocab": {"a": 0')
    # Malformed files.
    for name, text in [("cfg-not-object", "[1, 2]"), ("cfg-empty", ""), ("cfg-truncated", '{"hidden_size": 6'),
                       ("cfg-binary", "\x00\x01\x02GGUF"), ("cfg-nan-literal", '{"rope_theta": NaN}'),
                       ("cfg-deep-nesting", "[" * 100000 + "]" * 100000)]:
        d = new_dir(name)
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write(text)
        os.symlink(os.path.abspath(os.path.join(src_model, "model.safetensors")), os.path.join(d, "model.safetensors"))
        cases.append({"name": name, "kind": "model", "path": d, "file": "config.json", "field": "config.json"})

    # Safetensors: header and tensors.
    def st_case(name, field, header_bytes, blob, hlen=None):
        d = new_dir(name)
        shutil.copy(os.path.join(src_model, "config.json"), d)
        write_safetensors_raw(os.path.join(d, "model.safetensors"), header_bytes, blob, hlen)
        cases.append({"name": name, "kind": "model", "path": d, "file": "model.safetensors", "field": field})

    hb = json.dumps(header).encode()
    st_case("st-header-length-huge", "header length", hb, data, hlen=(1 << 62))
    st_case("st-header-length-past-end", "header length", hb, data, hlen=len(hb) + len(data) + 1)
    st_case("st-truncated-data", "data_offsets", hb, data[: len(data) // 2])
    first = sorted(k for k in header if k != "__metadata__")[0]
    dup = hb[:-1] + b', "' + first.encode() + b'": ' + json.dumps(header[first]).encode() + b"}"
    st_case("st-duplicate-tensor-name", first, dup, data)
    bad = json.loads(hb)
    bad[first]["dtype"] = "F99"
    st_case("st-unknown-dtype", "F99", json.dumps(bad).encode(), data)
    bad = json.loads(hb)
    bad[first]["shape"] = [1 << 40, 1 << 40]
    st_case("st-shape-huge", first, json.dumps(bad).encode(), data)
    bad = json.loads(hb)
    bad[first]["shape"] = "big"
    st_case("st-shape-not-array", first, json.dumps(bad).encode(), data)
    bad = json.loads(hb)
    bad[first]["data_offsets"] = [0, 1 << 62]
    st_case("st-offsets-huge", first, json.dumps(bad).encode(), data)
    st_case("st-header-not-json", "header", b"{not json" + b" " * 16, data)
    st_case("st-header-array", "header", b"[1,2,3]", data)
    # NaN and Inf weights: reported with the tensor's name (refused unless the caller opts out).
    name_q = "model.layers.1.self_attn.q_proj.weight"
    for kind, bits in [("nan", 0x7FC0), ("inf", 0x7F80)]:
        off = header[name_q]["data_offsets"][0]
        assert header[name_q]["dtype"] == "BF16"
        blob = bytearray(data)
        blob[off + 6:off + 8] = struct.pack("<H", bits)
        st_case("st-%s-weight" % kind, name_q, hb, bytes(blob))
    # Accepted with a warning (expect "warning": exit 0, the warning names the field): the opt-out for studying a
    # broken checkpoint, and special ids outside the vocabulary (ignored).
    cases.append(dict(cases[-1], name="warn-inf-weight-allowed", expect="warning", extra=["--allow-nonfinite-weights"],
                      entry_points=["info", "capture", "generate"]))
    cfg_case("warn-bos-outside-vocab", "bos_token_id", setter("bos_token_id", 99999))
    cases[-1].update(expect="warning", entry_points=["info", "capture", "app-open"])
    return cases


# ------------------------------------------------------------------------------------------------------- GGUF files
GGUF_STR, GGUF_ARR, GGUF_U32, GGUF_I32, GGUF_F32, GGUF_U64, GGUF_BOOL = 8, 9, 4, 5, 6, 10, 7


class Gguf:
    """A minimal GGUF v3 writer (F32 tensors) with hooks for corrupting counts and lengths."""

    def __init__(self):
        self.kv = []       # (key, type, value, elem_type)
        self.tensors = []  # (name, np.float32 array)

    def add(self, key, typ, value, elem=None):
        self.kv = [e for e in self.kv if e[0] != key] + [(key, typ, value, elem)]

    @staticmethod
    def s(x):
        b = x.encode() if isinstance(x, str) else x
        return struct.pack("<Q", len(b)) + b

    def value(self, typ, v, elem):
        if typ == GGUF_STR:
            return self.s(v)
        if typ == GGUF_ARR:
            body = struct.pack("<IQ", elem, len(v))
            return body + b"".join(self.value(elem, x, None) for x in v)
        return struct.pack({GGUF_U32: "<I", GGUF_I32: "<i", GGUF_F32: "<f", GGUF_U64: "<Q", GGUF_BOOL: "<?"}[typ], v)

    def bytes(self, n_tensors=None, n_kv=None, dims_override=None, truncate=None):
        out = b"GGUF" + struct.pack("<I", 3)
        out += struct.pack("<QQ", len(self.tensors) if n_tensors is None else n_tensors,
                           len(self.kv) if n_kv is None else n_kv)
        for key, typ, v, elem in self.kv:
            out += self.s(key) + struct.pack("<I", typ) + self.value(typ, v, elem)
        offset, blobs = 0, []
        for name, arr in self.tensors:
            dims = list(reversed(arr.shape))
            if dims_override and name in dims_override:
                dims = dims_override[name]
            out += self.s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
            out += struct.pack("<IQ", 0, offset)
            blob = arr.astype("<f4").tobytes()
            blob += b"\0" * (-len(blob) % 32)
            blobs.append(blob)
            offset += len(blob)
        out += b"\0" * (-len(out) % 32)
        out += b"".join(blobs)
        return out[:truncate] if truncate else out


def tiny_gguf(rng):
    g = Gguf()
    a = "llama."
    g.add("general.architecture", GGUF_STR, "llama")
    for k, v in [("block_count", 1), ("context_length", 64), ("embedding_length", 16), ("feed_forward_length", 32),
                 ("attention.head_count", 2), ("attention.head_count_kv", 1)]:
        g.add(a + k, GGUF_U32, v)
    g.add(a + "rope.freq_base", GGUF_F32, 10000.0)
    g.add(a + "attention.layer_norm_rms_epsilon", GGUF_F32, 1e-5)
    toks = ["a", "b", "c", "\u0120", "\u0120a", "ab", "<|s|>", "1"]
    g.add("tokenizer.ggml.model", GGUF_STR, "gpt2")
    g.add("tokenizer.ggml.pre", GGUF_STR, "gpt2")
    g.add("tokenizer.ggml.tokens", GGUF_ARR, toks, GGUF_STR)
    g.add("tokenizer.ggml.token_type", GGUF_ARR, [1, 1, 1, 1, 1, 1, 3, 1], GGUF_I32)
    g.add("tokenizer.ggml.merges", GGUF_ARR, ["\u0120 a", "a b"], GGUF_STR)
    g.add("tokenizer.ggml.bos_token_id", GGUF_U32, 6)
    g.add("tokenizer.ggml.eos_token_id", GGUF_U32, 6)
    V, H, I = len(toks), 16, 32
    shapes = [("token_embd.weight", (V, H)), ("output_norm.weight", (H,)), ("blk.0.attn_norm.weight", (H,)),
              ("blk.0.attn_q.weight", (H, H)), ("blk.0.attn_k.weight", (8, H)), ("blk.0.attn_v.weight", (8, H)),
              ("blk.0.attn_output.weight", (H, H)), ("blk.0.ffn_norm.weight", (H,)),
              ("blk.0.ffn_gate.weight", (I, H)), ("blk.0.ffn_up.weight", (I, H)), ("blk.0.ffn_down.weight", (H, I))]
    for name, shape in shapes:
        g.tensors.append((name, (rng.standard_normal(shape) * 0.1).astype(np.float32)))
    return g


def gguf_cases(out, rng):
    cases = []
    d = os.path.join(out, "gguf")
    os.makedirs(d, exist_ok=True)
    good = tiny_gguf(rng)
    with open(os.path.join(d, "good.gguf"), "wb") as f:
        f.write(good.bytes())

    def case(name, field, data):
        p = os.path.join(d, name + ".gguf")
        with open(p, "wb") as f:
            f.write(data)
        cases.append({"name": name, "kind": "model", "path": p, "file": name + ".gguf", "field": field})

    def with_kv(key, typ, value, elem=None):
        g = tiny_gguf(np.random.default_rng(2))
        g.add(key, typ, value, elem)
        return g.bytes()

    case("gguf-block-count-huge", "block_count", with_kv("llama.block_count", GGUF_U32, BIG))
    case("gguf-block-count-u64", "block_count", with_kv("llama.block_count", GGUF_U64, 1 << 40))
    case("gguf-embedding-length-huge", "embedding_length", with_kv("llama.embedding_length", GGUF_U32, BIG))
    case("gguf-ffn-length-huge", "feed_forward_length", with_kv("llama.feed_forward_length", GGUF_U32, BIG))
    case("gguf-head-count-huge", "head_count", with_kv("llama.attention.head_count", GGUF_U32, BIG))
    case("gguf-context-length-huge", "context_length", with_kv("llama.context_length", GGUF_U64, 1 << 40))
    case("gguf-rope-freq-nan", "rope.freq_base", with_kv("llama.rope.freq_base", GGUF_F32, float("nan")))
    case("gguf-rope-freq-inf", "rope.freq_base", with_kv("llama.rope.freq_base", GGUF_F32, float("inf")))
    case("gguf-rms-eps-nan", "layer_norm_rms_epsilon",
         with_kv("llama.attention.layer_norm_rms_epsilon", GGUF_F32, float("nan")))
    case("gguf-block-count-string", "block_count", with_kv("llama.block_count", GGUF_STR, "4"))
    case("gguf-arch-number", "general.architecture", with_kv("general.architecture", GGUF_U32, 7))
    case("gguf-tensor-count-huge", "tensor", good.bytes(n_tensors=1 << 40))
    case("gguf-kv-count-huge", "metadata", good.bytes(n_kv=1 << 40))
    case("gguf-dims-huge", "token_embd.weight", good.bytes(dims_override={"token_embd.weight": [1 << 40, 1 << 40]}))
    case("gguf-truncated-data", "truncated", good.bytes()[:-100])
    raw = bytearray(good.bytes())  # a string length in the header claims 2^62 bytes
    at = raw.find(b"general.architecture") - 8
    raw[at:at + 8] = struct.pack("<Q", 1 << 62)
    case("gguf-string-length-huge", "metadata key", bytes(raw))
    g = tiny_gguf(np.random.default_rng(3))  # an array count of 2^40 strings
    blob = bytearray(g.bytes())
    at = blob.find(b"tokenizer.ggml.tokens") + len(b"tokenizer.ggml.tokens") + 4 + 4
    blob[at:at + 8] = struct.pack("<Q", 1 << 40)
    case("gguf-array-count-huge", "tokenizer.ggml.tokens", bytes(blob))
    g = tiny_gguf(np.random.default_rng(4))
    g.tensors[3] = (g.tensors[3][0], np.full(g.tensors[3][1].shape, np.nan, np.float32))
    case("gguf-nan-weight", "attn_q", g.bytes())
    return cases


# --------------------------------------------------------------------------------------------------------- captures
def capture_cases(focal, model, out):
    cases = []
    d = os.path.join(out, "captures")
    os.makedirs(d, exist_ok=True)
    fresh = os.path.join(d, "fresh.h5")
    subprocess.run([focal, "capture", model, "--prompt", "The key is blue. The door is red. The key is", "--compare",
                    "standard", "--layers", "0-1", "--heads", "0,1", "--relevant", "3", "-o", fresh], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with h5py.File(fresh, "r") as f:
        run = list(f["runs"].keys())[0]
        T = f["tokens/ids"].shape[0]

    def strip_checksums(f):  # what a file written by another tool lacks: the content checksums
        for obj in [f] + [f[n] for n in collect(f)]:
            for a in ("crc32", "attrs_crc32", "attrs_crc32_names"):
                if a in obj.attrs:
                    del obj.attrs[a]

    def collect(f):
        names = []
        f.visit(names.append)
        return names

    # Each hand edit is made to look like a file another tool wrote (no checksums), so the field itself is checked;
    # keep_checksums: an edit that leaves them, refused as damaged.
    def case(name, field, edit, app_only=False, keep_checksums=False):
        p = os.path.join(d, name + ".h5")
        shutil.copy(fresh, p)
        with h5py.File(p, "r+") as f:
            edit(f)
            if not keep_checksums:
                strip_checksums(f)
        c = {"name": name, "kind": "capture", "path": p, "file": name + ".h5", "field": field}
        if app_only:  # provenance the CLI prints as stored; only the app interprets it
            c["entry_points"] = ["app-open"]
        cases.append(c)

    def replace(f, path, **kw):  # a dataset of any declared shape; chunks never written read as the fill value
        del f[path]
        f.create_dataset(path, **kw)

    R = "runs/" + run
    # Allocation bombs (the declared size, not the stored bytes).
    case("cap-metrics-64GB", R + "/metrics", lambda f: (
        f.attrs.modify("n_layers", np.int32(1 << 20)),
        replace(f, R + "/metrics", shape=(1 << 20, 6, T, 8), dtype="f4", chunks=(1, 6, T, 8), compression="gzip")))
    case("cap-probs-4TB", R + "/probs", lambda f: (  # a header that agrees with the forged shape
        f.attrs.modify("n_layers", np.int32(1 << 16)), f.attrs.modify("n_heads", np.int32(1 << 16)),
        replace(f, R + "/layers", data=np.arange(1 << 16, dtype=np.int32)),
        replace(f, R + "/heads", data=np.arange(1 << 16, dtype=np.int32)),
        replace(f, R + "/probs", shape=(1 << 16, 1 << 16, T, T), dtype="f4", chunks=(1, 1, T, T),
                compression="gzip")))
    case("cap-pieces-2G", "tokens/pieces", lambda f: replace(
        f, "tokens/pieces", shape=(1 << 31,), dtype=h5py.string_dtype(), chunks=(1 << 16,)))
    case("cap-ids-2G", "tokens/ids", lambda f: replace(
        f, "tokens/ids", shape=(1 << 31,), dtype="i4", chunks=(1 << 16,), compression="gzip"))
    case("cap-topk-wide", R + "/topk_ids", lambda f: replace(
        f, R + "/topk_ids", shape=(T, 1 << 30), dtype="i4", chunks=(1, 1 << 16), compression="gzip"))
    case("cap-relevant-2G", "tokens/relevant", lambda f: replace(
        f, "tokens/relevant", shape=(1 << 31,), dtype="i4", chunks=(1 << 16,), compression="gzip"))
    case("cap-layers-index-2G", R + "/layers", lambda f: replace(
        f, R + "/layers", shape=(1 << 31,), dtype="i4", chunks=(1 << 16,), compression="gzip"))
    case("cap-kl-huge", "kl", lambda f: replace(
        f, "compare/" + list(f["compare"].keys())[0] + "/kl", shape=(1 << 12, 1 << 12, 1 << 12), dtype="f4",
        chunks=(1, 1, 1 << 12), compression="gzip"))
    # Shapes and types against the file's own header.
    case("cap-n-layers-huge", "n_layers", lambda f: f.attrs.modify("n_layers", np.int32(BIG)))
    case("cap-n-heads-negative", "n_heads", lambda f: f.attrs.modify("n_heads", np.int32(-1)))
    case("cap-n-layers-string", "n_layers", lambda f: (f.attrs.__delitem__("n_layers"),
                                                       f.attrs.create("n_layers", "four")))
    case("cap-metrics-int", R + "/metrics", lambda f: replace(f, R + "/metrics", data=np.zeros((4, 6, T, 8), "i4")))
    case("cap-metrics-rank", R + "/metrics", lambda f: replace(f, R + "/metrics", data=np.zeros((4, 6, T), "f4")))
    case("cap-row-scale-shape", R + "/row_scale", lambda f: replace(f, R + "/row_scale",
                                                                     data=np.ones((4, 6, T + 1), "f4")))
    case("cap-layer-index-range", "layers[1] = 99", lambda f: replace(f, R + "/layers", data=np.array([0, 99], "i4")))
    case("cap-query-index-range", "queries[0] = 1000", lambda f: replace(
        f, R + "/queries", data=np.arange(T, dtype=np.int32) + 1000))
    case("cap-relevant-range", "relevant", lambda f: replace(f, "tokens/relevant", data=np.array([T + 5], "i4")))
    case("cap-pieces-ints", "tokens/pieces", lambda f: replace(f, "tokens/pieces", data=np.zeros(T, "i4")))
    case("cap-pieces-count", "tokens/pieces", lambda f: replace(
        f, "tokens/pieces", data=np.array(["x"] * (T + 2), dtype=h5py.string_dtype())))
    case("cap-format-missing", "format", lambda f: f.attrs.__delitem__("format"))
    case("cap-format-number", "format", lambda f: (f.attrs.__delitem__("format"), f.attrs.create("format", 5)))
    case("cap-format-version-future", "format version", lambda f: f.attrs.modify("format_version", np.int32(99)))
    case("cap-metric-names", "metric_names", lambda f: (f.attrs.__delitem__("metric_names"), f.attrs.create(
        "metric_names", np.array(["a", "b"], dtype=h5py.string_dtype()))))
    case("cap-runs-missing", "/runs", lambda f: f.__delitem__("runs"))
    case("cap-temp-spec-malformed", "temp_spec_json", lambda f: f[R].attrs.modify("temp_spec_json", "{not json"),
         app_only=True)
    case("cap-temp-spec-negative", "focal_temp", lambda f: f[R].attrs.modify(
        "temp_spec_json", '{"mode":"focal","focal_temp":-1}'), app_only=True)
    case("cap-config-malformed", "model_config_json", lambda f: f.attrs.modify("model_config_json", "{oops"),
         app_only=True)
    case("cap-config-layers-huge", "num_hidden_layers", lambda f: f.attrs.modify(
        "model_config_json", json.dumps(dict(json.loads(f.attrs["model_config_json"]),
                                             num_hidden_layers=BIG))), app_only=True)

    # Edits under the checksums: a value changed in place, a text attribute changed.
    case("cap-edited-nll", "does not match the checksum", lambda f: f[R + "/token_nll"].__setitem__(0, 0.5),
         keep_checksums=True)
    case("cap-edited-spec", "do not match the checksum", lambda f: f[R].attrs.modify(
        "temp_spec_json", '{"mode":"focal","focal_temp":0.5}'), keep_checksums=True)

    for name, blob, field in [("cap-not-hdf5", b"hello, this is not HDF5\n" * 10, "HDF5"), ("cap-empty", b"", "empty (0 bytes)")]:
        p = os.path.join(d, name + ".h5")
        with open(p, "wb") as f:
            f.write(blob)
        cases.append({"name": name, "kind": "capture", "path": p, "file": name + ".h5", "field": field})
    p = os.path.join(d, "cap-truncated.h5")
    with open(fresh, "rb") as f:
        blob = f.read()
    with open(p, "wb") as f:
        f.write(blob[: len(blob) // 2])
    cases.append({"name": "cap-truncated", "kind": "capture", "path": p, "file": "cap-truncated.h5",
                  "field": "cap-truncated.h5"})
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--focal", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if os.path.exists(a.out):
        shutil.rmtree(a.out)
    os.makedirs(a.out)
    model = os.path.join(a.source, "assets", "models", "focal-t0.4")
    rng = np.random.default_rng(1)
    cases = model_cases(model, a.out) + gguf_cases(a.out, rng) + capture_cases(a.focal, model, a.out)
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)), "duplicate case names"
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump({"model": model, "good_gguf": os.path.join(a.out, "gguf", "good.gguf"),
                   "good_capture": os.path.join(a.out, "captures", "fresh.h5"), "cases": cases}, f, indent=1)
    print("make_corpus: %d cases in %s" % (len(cases), a.out))


if __name__ == "__main__":
    sys.exit(main())
