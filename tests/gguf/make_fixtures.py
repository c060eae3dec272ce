#!/usr/bin/env python3
"""Reference fixtures for the GGUF tests (tests/gguf_test.cpp), generated at test time with the PyPI `gguf`,
`tokenizers`, `transformers` and torch packages of the venv (tests/hf/setup_venv.sh):

  quant/           random blocks of every supported ggml type and their fp32 values by gguf.quants.dequantize
  std-{F32,F16,Q8_0,Q4_0}.gguf[.logits.f32]
                   assets/models/standard converted by scripts/hf_to_gguf.py, and the logits of transformers'
                   LlamaForCausalLM (eager, fp32) on its weights dequantised by gguf.quants
  smollm/          (with --smollm FILE) SmolLM2's GGUF: tokenizations by a `tokenizers` BPE built from the GGUF's
                   vocabulary and merges; logits and the greedy continuation of transformers' LlamaForCausalLM (eager,
                   fp32) on weights dequantised by gguf.quants with Q/K un-permuted to HF's layout

usage: make_fixtures.py --out DIR [--smollm PATH.gguf [--smollm-only]]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from gguf_to_hf import hf_model_from_gguf  # noqa: E402

# Strings for the tokenizer comparison: ASCII, accents, other scripts, emoji, numbers, whitespace runs, newlines,
# chat special tokens, contractions, punctuation, code.
TOKENIZE_CASES = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "naïve café résumé Ångström",
    "Привет, мир! Γειά σου κόσμε. שלום עולם",
    "日本語のテキストと中文文本",
    "emoji: 😀👍🏽🇫🇷 ❤️ and 🤖",
    "numbers 0 12 345 6789 3.14159 1,000,000 -42 ½ ² Ⅻ ٣",
    "a  b   c    d",
    "   leading and trailing   ",
    "line1\nline2\n\n\nline3\r\nend\n",
    "\ttabs\tand \t mixed \n \n spaces",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>after<|im_end|><|im_start|>",
    "don't I'm we'll they've she'd it's IT'S you're",
    "Hello, world!!! What?... (yes) [no] {maybe} -- \"quoted\" 'single'",
    "def f(x):\n    return x**2  # square\n",
    "https://example.com/path?q=1&r=two#frag",
    "zero\u200bwidth and combining e\u0301 and nbsp\u00a0here",
    "مرحبا بالعالم नमस्ते दुनिया",
    "",
    " ",
    "\n",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
]

GREEDY_PROMPT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
LOGITS_PROMPT = "The capital of France is Paris. The capital of Germany is Berlin. The capital of Italy is"


def quant_fixtures(out):
    import gguf
    from gguf import GGMLQuantizationType as Q
    rng = np.random.default_rng(7)
    os.makedirs(os.path.join(out, "quant"), exist_ok=True)
    index = []
    n = 1024  # elements: 32 blocks of 32 or 4 blocks of 256
    # Types with a quantizer in the package: quantise random data. K-quants (no quantizer there): random block bytes
    # with their fp16 scale fields set to finite values; offsets from ggml's block layouts.
    f16_fields = {Q.Q2_K: (84, [80, 82]), Q.Q3_K: (110, [108]), Q.Q4_K: (144, [0, 2]), Q.Q5_K: (176, [0, 2]),
                  Q.Q6_K: (210, [208])}
    for t in [Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K]:
        if t in f16_fields:
            bsize, offs = f16_fields[t]
            raw = rng.integers(0, 256, size=(n // 256, bsize), dtype=np.uint8)
            for o in offs:
                raw[:, o:o + 2] = (rng.standard_normal(n // 256) * 0.05).astype(np.float16).view(np.uint8).reshape(-1, 2)
            raw = raw.reshape(-1)
        elif t == Q.F16:
            raw = rng.standard_normal(n).astype(np.float16).view(np.uint8)
        else:
            raw = gguf.quants.quantize(rng.standard_normal((1, n)).astype(np.float32), t).reshape(-1)
        ref = gguf.quants.dequantize(raw.reshape(1, -1), t).reshape(-1).astype(np.float32)
        assert ref.size == n and np.all(np.isfinite(ref)), t.name
        raw.tofile(os.path.join(out, "quant", t.name + ".bin"))
        ref.tofile(os.path.join(out, "quant", t.name + ".f32"))
        index.append({"type": t.name, "id": int(t.value), "n": n})
    json.dump(index, open(os.path.join(out, "quant", "index.json"), "w"), indent=1)


def converted_models(out):
    import torch
    for t in ["F32", "F16", "Q8_0", "Q4_0"]:
        g = os.path.join(out, f"std-{t}.gguf")
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "hf_to_gguf.py"),
                        os.path.join(ROOT, "assets", "models", "standard"), g, "--type", t], check=True,
                       stdout=subprocess.DEVNULL)
        m, cfg = hf_model_from_gguf(g)
        ids = [(i * 977 + 13) % cfg.vocab_size for i in range(48)]  # the ids gguf_ref_test.cpp runs
        with torch.no_grad():
            m(torch.tensor([ids])).logits[0].float().numpy().astype(np.float32).tofile(g + ".logits.f32")


def smollm_fixtures(out, path):
    import gguf
    import torch
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    d = os.path.join(out, "smollm")
    os.makedirs(d, exist_ok=True)
    r = gguf.GGUFReader(path)
    f = lambda k: r.fields[k].contents()
    assert f("tokenizer.ggml.model") == "gpt2" and f("tokenizer.ggml.pre") == "smollm"

    # Tokenizer reference: SmolLM2's tokenizer.json pre-tokenizer (digits one by one, then GPT-2 byte-level).
    tokens, types, merges = f("tokenizer.ggml.tokens"), f("tokenizer.ggml.token_type"), f("tokenizer.ggml.merges")
    vocab = {t: i for i, t in enumerate(tokens)}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in merges]))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(tokens[i], special=True) for i in range(len(tokens)) if types[i] == 3])
    cases = [{"text": s, "ids": tk.encode(s, add_special_tokens=False).ids} for s in TOKENIZE_CASES]
    json.dump({"cases": cases}, open(os.path.join(d, "tokenize.json"), "w"), indent=1, ensure_ascii=False)

    m, cfg = hf_model_from_gguf(path)

    ids = tk.encode(LOGITS_PROMPT, add_special_tokens=False).ids
    with torch.no_grad():
        logits = m(torch.tensor([ids])).logits[0].float().numpy()  # [T, V]
        g_ids = tk.encode(GREEDY_PROMPT, add_special_tokens=False).ids
        cont = []  # greedy by hand (generate() imports torch.distributed, broken with torch 1.13 on Python 3.11)
        for _ in range(12):
            nxt = int(m(torch.tensor([g_ids + cont])).logits[0, -1].argmax())
            cont.append(nxt)
            if nxt == cfg.eos_token_id:
                break
    logits.astype(np.float32).tofile(os.path.join(d, "logits.f32"))
    json.dump({"logits_prompt": LOGITS_PROMPT, "logits_ids": ids, "vocab": len(tokens),
               "greedy_prompt": GREEDY_PROMPT, "greedy_prompt_ids": g_ids, "greedy_ids": cont,
               "greedy_text": tk.decode(cont, skip_special_tokens=False)},
              open(os.path.join(d, "reference.json"), "w"), indent=1, ensure_ascii=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--smollm", help="SmolLM2 GGUF (scripts/fetch-smollm2.sh); left out: no smollm/ fixtures")
    ap.add_argument("--smollm-only", action="store_true", help="write only the smollm/ fixtures")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if not a.smollm_only:
        quant_fixtures(a.out)
        converted_models(a.out)
    if a.smollm:
        smollm_fixtures(a.out, a.smollm)
    print("make_fixtures.py: wrote", a.out)


if __name__ == "__main__":
    main()
