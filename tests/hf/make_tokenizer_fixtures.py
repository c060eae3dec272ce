#!/usr/bin/env python3
"""Byte-level BPE tokenizer.json fixtures for tests/hf_tokenizer_test.cpp, built with the `tokenizers` library and
checked with transformers 4.47.1 (the venv of tests/hf/setup_venv.sh). Nothing is downloaded: small BPE vocabularies
are trained here on the project's own text (README.md, docs/*.md) and the tokenizer test strings, under the
pre-tokenizers of the models whose HF directories ship tokenizer.json. The test strings are tests/gguf's, more
for what these pre-tokenizers do differently, and 400 random strings of pieces that meet at their decision points.


  gpt2/     ByteLevel(use_regex) as GPT-2; merges written as "a b" strings; <|endoftext|>; add_bos_token false
  llama3/   Split(Llama 3 regex) + ByteLevel; ignore_merges; <|begin_of_text|> put first by a TemplateProcessing
  qwen2/    Split(Qwen2 regex) + ByteLevel; NFC normalizer; ChatML special tokens; merges as [a, b] pairs; no BOS
  olmo2/    Split(Llama 3 regex) as OLMo 2; added tokens with lstrip / rstrip / single_word; bos from config.json
  llama3_cls/  llama3 with tokenizer_class LlamaTokenizerFast, whose add_bos_token / bos_token rebuild the template
  smollm/   Digits + ByteLevel as SmolLM2; add_bos_token true, which GPT2TokenizerFast ignores
  roberta/  ByteLevel(add_prefix_space) with <s> put first by a TemplateProcessing

Sentencepiece-style tokenizer.json files, as transformers converts the bundled models' tokenizer.model
(LlamaTokenizerFast, from_slow) with chat tokens added (<|user|> rstrip, <|sys|> lstrip, <|end|>, and a non-special
single_word "focalword"; spm_first also a non-normalized "raw tok" and "\u2581\u2581", which decodes as two
spaces); tokenizer.model is not kept, so the directory is what a tokenizer.json-only download is:

  spm_legacy/  legacy true (Llama 2, Mistral v0.1, Phi-3): normalizer Prepend("▁") + Replace(" ", "▁"), byte_fallback,
               decoder Strip(1)
  spm_first/   legacy false (newer conversions): Metaspace(prepend_scheme first, split false)
  spm_gemma/   GemmaTokenizerFast's conversion: normalizer Replace alone, Split(" ") pre-tokenizer, no Strip
  spm_split/   spm_first with Metaspace(prepend_scheme always, split true), the older tokenizers default
  spm_model_only/  the bundled tokenizer.model with spm_legacy's tokenizer_config.json (its added tokens) and no
               tokenizer.json; slow.json: transformers' LlamaTokenizer (slow: sentencepiece with the model's own
               normalizer) on the texts without the single_word token, whose rule differs between slow and fast

Each DIR/<name>/ holds tokenizer.json, tokenizer_config.json (and config.json / generation_config.json where the
case needs them) and expected.json: {"add_bos": bool, "bos_id", "eos_id", "vocab_size", "cases": [{"text",
"ids" (tokenizers' encode, add_special_tokens=False), "hf_ids" (transformers AutoTokenizer, special tokens added),
"decoded" (tokenizers' decode of ids, special tokens kept)}]}. DIR/llama3_model/ is a tiny LlamaForCausalLM with the
llama3 tokenizer files, for Model::load. DIR/nfc.json: {"cases": [{"text", "nfc", "versions_differ"}]}, the NFC of
every code point that has a canonical decomposition (decomposed, composed, followed by a combining accent) by
tokenizers' NFC normalizer, or by unicodedata where their Unicode versions differ.

usage: make_tokenizer_fixtures.py --out DIR
"""
import argparse
import ast
import glob
import json
import os
import random
import shutil
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    import transformers
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers import trainers
except ImportError as e:  # pragma: no cover
    sys.exit(f"make_tokenizer_fixtures.py: {e}\nRun tests/hf/setup_venv.sh and use .venv/bin/python.")

GPT2_RE = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_RE = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
             r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2_RE = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
            r"""\s*[\r\n]+|\s+(?!\S)|\s+""")


def gguf_test_strings():
    """TOKENIZE_CASES of tests/gguf/make_fixtures.py (read, not imported: that module needs gguf and torch)."""
    src = open(os.path.join(ROOT, "tests", "gguf", "make_fixtures.py"), encoding="utf-8").read()
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "TOKENIZE_CASES":
            return ast.literal_eval(node.value)
    raise SystemExit("TOKENIZE_CASES not found in tests/gguf/make_fixtures.py")


# More strings for what these pre-tokenizers do differently: case-insensitive contractions, digit groups, runs of
# whitespace and newlines before words and punctuation, punctuation glued to words, the added tokens of each case.
EXTRA_CASES = [
    "DON'T WE'LL THEY'VE SHE'D IT'S YOU'RE I'M 'S 'x it'\u017f 'Ll 'rE",
    "1234567890 12 3 x1y22z333 2024-11-25 ١٢٣٤٥",
    "  \n\n  x\r\n\r\n  y \t\n z\n\n",
    "!hello ...world (x) ?? \u00a0word \u3000全角",
    "end with spaces   ",
    "<|begin_of_text|>Hi<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nyo<|eot_id|>",
    "<|endoftext|><|endoftext|>x<|im_start|>",
    "a <mask> b<mask>c   <mask>   d",
    "word<sep>word <sep> word",
    "Ünïcödé ÅNGSTRÖM ß ẞ ǅ ﬁ",
    "\u0000\u0001 control \u007f bytes",
    # Not in NFC (the qwen2 case normalises): decomposed Vietnamese and Hangul jamo, singletons, marks out of order.
    unicodedata.normalize("NFD", "Tiếng Việt có dấu, 한국어 텍스트, Ångström"),
    "\u212b \uf900 e\u0302\u0323 a\u0301\u0301 \u1100\u1161\u11a8 \u0958",
    # U+11A7 (T base, no trailing consonant) after L V and after an LV syllable stays: libutf8proc 2.8 alone drops it.
    "\u1100\u1161\u11a7 \uac00\u11a7\u11a8 \uc8e0\u11a7",
]

VARIANTS = {
    "gpt2": dict(split=None, digits=False, prefix=False, ignore_merges=False, nfc=False,
                 special=["<|endoftext|>"], added=[], string_merges=True,
                 config={"tokenizer_class": "GPT2Tokenizer", "bos_token": "<|endoftext|>",
                         "eos_token": "<|endoftext|>", "add_bos_token": False, "model_max_length": 1024}),
    "llama3": dict(split=LLAMA3_RE, digits=False, prefix=False, ignore_merges=True, nfc=False,
                   special=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                            "<|eot_id|>"] + ["<|reserved_special_token_%d|>" % i for i in range(4)],
                   added=[], template_bos="<|begin_of_text|>",
                   config={"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>",
                           "eos_token": "<|end_of_text|>", "model_max_length": 131072},
                   generation={"bos_token_id": None, "eos_token_id": ["<|end_of_text|>", "<|eot_id|>"]}),
    "qwen2": dict(split=QWEN2_RE, digits=False, prefix=False, ignore_merges=False, nfc=True,
                  special=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], added=[],
                  config={"tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|endoftext|>",
                          "pad_token": "<|endoftext|>", "model_max_length": 32768}),
    "olmo2": dict(split=LLAMA3_RE, digits=False, prefix=False, ignore_merges=False, nfc=False,
                  special=["<|endoftext|>", "<|pad|>"],
                  added=[AddedToken("<mask>", lstrip=True, rstrip=True, special=False, normalized=False),
                         AddedToken("<sep>", single_word=True, special=False, normalized=False),
                         AddedToken(" word", lstrip=False, special=False, normalized=False)],
                  config={"tokenizer_class": "GPT2Tokenizer", "eos_token": "<|endoftext|>",
                          "pad_token": "<|pad|>", "model_max_length": 4096},
                  model_config={"bos_token_id": "<|endoftext|>", "eos_token_id": "<|endoftext|>"}),
    "llama3_cls": dict(split=LLAMA3_RE, digits=False, prefix=False, ignore_merges=True, nfc=False,
                       special=["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"], added=[],
                       template_bos="<|begin_of_text|>",
                       config={"tokenizer_class": "LlamaTokenizerFast", "bos_token": "<|end_of_text|>",
                               "eos_token": {"content": "<|eot_id|>", "special": True, "__type": "AddedToken"},
                               "add_bos_token": True}),
    "smollm": dict(split=None, digits=True, prefix=False, ignore_merges=False, nfc=False,
                   special=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], added=[],
                   config={"tokenizer_class": "GPT2Tokenizer", "bos_token": "<|im_start|>",
                           "eos_token": "<|im_end|>", "add_bos_token": True, "model_max_length": 8192}),
    "roberta": dict(split=None, digits=False, prefix=True, ignore_merges=False, nfc=False,
                    special=["<s>", "<pad>", "</s>"], added=[], template_bos="<s>",
                    config={"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>"}),
}


def random_strings(n, seed):
    """Strings drawn from pieces that meet at the pre-tokenizers' decision points: apostrophes before letters,
    digits, whitespace of every kind before words / punctuation / newlines, letters of several scripts, marks,
    emoji, added tokens."""
    rng = random.Random(seed)
    atoms = ["a", "Z", "é", "ß", "ж", "Ω", "中", "ア", "한", "ع", "ि", "\u0301", "0", "7", "٣", "½", "Ⅻ", " ", "  ",
             "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\u200b", "'", "'s", "'T", "'re", "'LL",
             "!", ".", "...", ",", "-", "_", "(", "\"", "#", "$", "😀", "🇫🇷", "\x00", "\x7f", "word", "The",
             "<|endoftext|>", "<|im_start|>", "<|eot_id|>", "<mask>", "<sep>", "<s>", "\u017f"]
    return ["".join(rng.choice(atoms) for _ in range(rng.randint(1, 24))) for _ in range(n)]


def corpus(strings):
    text = [open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()]
    for p in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        text.append(open(p, encoding="utf-8").read())
    return text + strings * 20


def build(name, v, texts):
    tk = Tokenizer(models.BPE(ignore_merges=v["ignore_merges"]))
    if v["nfc"]:
        tk.normalizer = normalizers.NFC()
    bl = pre_tokenizers.ByteLevel(add_prefix_space=v["prefix"], use_regex=v["split"] is None)
    if v["split"] is not None:
        tk.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(v["split"]), behavior="isolated", invert=False), bl])
    elif v["digits"]:
        tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), bl])
    else:
        tk.pre_tokenizer = bl
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=v["special"])
    tk.train_from_iterator(corpus(texts), trainer=trainer)
    if v["added"]:
        tk.add_tokens(v["added"])
    if v.get("template_bos"):
        b = v["template_bos"]
        tk.post_processor = processors.TemplateProcessing(single=b + " $A", pair=b + " $A " + b + " $B",
                                                          special_tokens=[(b, tk.token_to_id(b))])
    else:
        tk.post_processor = processors.ByteLevel(trim_offsets=False)
    return tk


def write_variant(out, name, v, texts):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    tk = build(name, v, texts)
    path = os.path.join(d, "tokenizer.json")
    tk.save(path)
    j = json.load(open(path, encoding="utf-8"))
    if v.get("string_merges"):  # the older "a b" form (tokenizers < 0.20, GPT-2's hub file)
        j["model"]["merges"] = [m if isinstance(m, str) else m[0] + " " + m[1] for m in j["model"]["merges"]]
    else:
        assert all(isinstance(m, list) for m in j["model"]["merges"])
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, indent=1)
    tk = Tokenizer.from_file(path)
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(v["config"], f, ensure_ascii=False, indent=1)
    ids_of = lambda x: [tk.token_to_id(t) for t in x] if isinstance(x, list) else tk.token_to_id(x) if x else x
    if v.get("generation"):
        with open(os.path.join(d, "generation_config.json"), "w") as f:
            json.dump({k: ids_of(x) for k, x in v["generation"].items()}, f)
    if v.get("model_config"):
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({k: ids_of(x) for k, x in v["model_config"].items()}, f)

    return d, write_expected(d, tk, transformers.AutoTokenizer.from_pretrained(d), texts, name)


def write_expected(d, tk, hf, texts, name):
    """expected.json of tokenizer `tk` (tokenizers) and `hf` (AutoTokenizer) in `d` over `texts`."""
    cases = []
    for s in texts:
        ids = tk.encode(s, add_special_tokens=False).ids
        cases.append({"text": s, "ids": ids, "hf_ids": hf(s)["input_ids"],
                      "decoded": tk.decode(ids, skip_special_tokens=False)})
        assert hf(s, add_special_tokens=False)["input_ids"] == ids, (name, s)
    first = hf("x")["input_ids"]
    add_bos = len(first) > len(tk.encode("x", add_special_tokens=False).ids)
    exp = {"add_bos": add_bos, "bos_id": hf.bos_token_id if hf.bos_token_id is not None else -1,
           "eos_id": hf.eos_token_id if hf.eos_token_id is not None else -1,
           "vocab_size": tk.get_vocab_size(with_added_tokens=True), "cases": cases}
    with open(os.path.join(d, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(exp, f, ensure_ascii=False, indent=1)
    return exp


SPM_CASES = [
    "<|user|>\n  Hello there<|end|>\n<|sys|>  sys text <|sys|>x",
    " leading space", "  two leading", "trailing  ", "a<|end|> b<|end|>  c", "x  <|user|>  y", "<s>x</s>y",
    "focalword focalwords afocalword focalword.", "tab\there\nnew line \u2581 literal", "ünïcödé 中文 😀 \x00",
    "", " ", "<|end|>", "<|end|> ", "raw tokfocalword raw tok focalword", "a  b  c", "raw tok\u2581\u2581x",
]


def spm_variants(out, texts):
    """The sentencepiece-style tokenizer.json fixtures (see the module's docstring)."""
    src = os.path.join(ROOT, "assets", "models", "focal-t0.4", "tokenizer.model")
    texts = texts + SPM_CASES
    made = {}
    for name, legacy in (("spm_legacy", True), ("spm_first", False), ("spm_gemma", None)):
        d = os.path.join(out, name)
        if legacy is None:
            t = transformers.GemmaTokenizerFast(vocab_file=src, from_slow=True)
        else:
            t = transformers.LlamaTokenizerFast(vocab_file=src, legacy=legacy, add_prefix_space=True, from_slow=True)
        t.add_special_tokens({"additional_special_tokens": [
            AddedToken("<|user|>", rstrip=True, special=True), AddedToken("<|sys|>", lstrip=True, special=True),
            AddedToken("<|end|>", special=True)]})
        t.add_tokens([AddedToken("focalword", single_word=True, special=False)])
        if name == "spm_first":
            t.add_tokens([AddedToken("raw tok", normalized=False, special=False),
                          AddedToken("\u2581\u2581", normalized=False, special=False)])
        t.save_pretrained(d)
        made[name] = d
    edits = {"spm_split": ("spm_first", lambda j: j["pre_tokenizer"].update(prepend_scheme="always", split=True))}
    for name, (base, edit) in edits.items():
        d = os.path.join(out, name)
        shutil.copytree(made[base], d)
        j = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
        edit(j)
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False, indent=1)
        made[name] = d
    d = os.path.join(out, "spm_model_only")
    os.makedirs(d)
    shutil.copy(os.path.join(made["spm_legacy"], "tokenizer.model"), d)
    shutil.copy(os.path.join(made["spm_legacy"], "tokenizer_config.json"), d)
    slow = transformers.LlamaTokenizer.from_pretrained(d, legacy=True)
    cases = [{"text": s, "ids": slow(s)["input_ids"]} for s in texts if "focalword" not in s]
    with open(os.path.join(d, "slow.json"), "w", encoding="utf-8") as f:
        json.dump({"cases": cases}, f, ensure_ascii=False, indent=1)
    for name, d in made.items():
        os.remove(os.path.join(d, "tokenizer.model"))
        cfg_path = os.path.join(d, "tokenizer_config.json")
        cfg = json.load(open(cfg_path, encoding="utf-8"))
        for k in ("add_prefix_space", "legacy", "vocab_file"):  # they would make transformers convert tokenizer.model
            cfg.pop(k, None)
        with open(cfg_path, "w", encoding="utf-8") as f:
            json.dump(cfg, f, ensure_ascii=False, indent=1)
        tk = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        hf = transformers.AutoTokenizer.from_pretrained(d)
        assert type(hf).__name__ in ("LlamaTokenizerFast", "GemmaTokenizerFast"), (name, type(hf))
        exp = write_expected(d, tk, hf, texts, name)
        # Decode of id sequences a model may generate: <0xNN> runs that are not UTF-8 (tokenizers' ByteFallback
        # writes one U+FFFD a byte), each sequence ending with a piece that is not a byte.
        rng = random.Random(29)
        byte_ids = [i for i in (tk.token_to_id("<0x%02X>" % b) for b in range(256)) if i is not None]
        words = [i for i in range(tk.get_vocab_size()) if i not in byte_ids and i > 2][:400]
        exp["decode_cases"] = []
        for _ in range(300):
            ids = [rng.choice(byte_ids) if rng.random() < 0.6 else rng.choice(words) for _ in range(rng.randint(1, 8))]
            ids.append(rng.choice(words))
            exp["decode_cases"].append({"ids": ids, "decoded": tk.decode(ids, skip_special_tokens=False)})
        with open(os.path.join(d, "expected.json"), "w", encoding="utf-8") as f:
            json.dump(exp, f, ensure_ascii=False, indent=1)
        print("%-10s vocab %d, add_bos %s" % (name, exp["vocab_size"], exp["add_bos"]))


def llama3_model(out, tok_dir, vocab):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(13)
    d = os.path.join(out, "llama3_model")
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                      bos_token_id=None, eos_token_id=None, tie_word_embeddings=True)
    LlamaForCausalLM(cfg).save_pretrained(d, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json", "expected.json"):
        shutil.copy(os.path.join(tok_dir, f), os.path.join(d, f))


def nfc_cases(out):
    """Every code point with a canonical decomposition, decomposed and as it is, with tokenizers' NFC of each."""
    nfc = normalizers.NFC()
    texts = []
    for cp in range(0x110000):
        c = chr(cp)
        if 0xD800 <= cp <= 0xDFFF or unicodedata.category(c) == "Cn":
            continue
        if unicodedata.decomposition(c) and not unicodedata.decomposition(c).startswith("<"):
            texts.append("x" + unicodedata.normalize("NFD", c) + c + "\u0301")
    # Where the Unicode versions of tokenizers and of Python's unicodedata disagree (U+11938 of Dives Akuru),
    # unicodedata (closer to libutf8proc's, which the runtime uses) is the reference and the case is marked.
    cases = [{"text": t, "nfc": unicodedata.normalize("NFC", t),
              "versions_differ": nfc.normalize_str(t) != unicodedata.normalize("NFC", t)} for t in texts]
    with open(os.path.join(out, "nfc.json"), "w", encoding="utf-8") as f:
        json.dump({"cases": cases}, f, ensure_ascii=False)
    return len(cases), sum(c["versions_differ"] for c in cases)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory to write the fixtures into")
    a = ap.parse_args()
    if transformers.__version__ != "4.47.1":
        sys.exit("make_tokenizer_fixtures.py: transformers 4.47.1 is the oracle, found " + transformers.__version__)
    texts = gguf_test_strings() + EXTRA_CASES + random_strings(400, seed=13)
    tmp = a.out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for name, v in VARIANTS.items():
        d, exp = write_variant(tmp, name, v, texts)
        print("%-7s vocab %d, add_bos %s" % (name, exp["vocab_size"], exp["add_bos"]))
        if name == "llama3":
            llama3_model(tmp, d, exp["vocab_size"])
    spm_variants(tmp, texts)
    print("nfc     %d strings, %d where tokenizers' Unicode version differs" % nfc_cases(tmp))
    shutil.rmtree(a.out, ignore_errors=True)
    os.rename(tmp, a.out)


if __name__ == "__main__":
    main()
