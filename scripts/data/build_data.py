#!/usr/bin/python3
# Builds focalscope's training data from Debian-packaged public-domain English text: a cleaned corpus split into
# train / validation, a sentencepiece BPE tokenizer, tokenized text (.bin) and synthetic retrieval tasks (.jsonl)
# with the relevant token positions recorded. Deterministic for a seed. Formats and templates: docs/data.md.
"""Build focalscope's corpus, tokenizer, tokenized text and synthetic retrieval tasks.

Outputs in --out: corpus_train.txt, corpus_val.txt, tokenizer.model, text_train.bin, text_val.bin,
tasks_train.jsonl, tasks_eval.jsonl, manifest.json (formats in docs/data.md).
"""

import argparse
import array
import bisect
import hashlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import unicodedata
from collections import Counter
from random import Random

BOS_ID = 1
EOS_ID = 2
UNK_ID = 0
TASK_KINDS = ("kv", "mqar", "needle")
PREV_KIND = "prev"                  # training only: the previous-token drill (--prev-tasks)
PREV_REPEAT = 0.3                   # drill: chance that a token repeats the token two back (an answer)
PREV_SEP_COPIES = 50                # drill: weight of the item separator in the stream's token pool
EVAL_LENGTHS = (128, 256, 512, 1024, 2048)
DISTRACT_KINDS = ("kv", "mqar")  # distractor sweep (tasks_distract.jsonl): a fixed length, a growing number of
DISTRACT_COUNTS = (1, 2, 4, 8, 12)  # distractor pairs, prose before the pairs filling the rest
DISTRACT_LENGTH = 256
MQAR_VALUES = 256                   # mqar values: up to this many one-token words (mqar_value_words)
MQAR_MIN_VALUES = 16
TRAIN_LENGTH_RANGE = (64, 512)   # training tasks: target length drawn uniformly, ids never longer than the target
LENGTH_TOLERANCE = 0.10          # evaluation tasks: len(ids) within ±10 % of the target length
DOC_WORDS = 300                  # a document is a group of consecutive paragraphs of about this many words
QUICK_DOC_STRIDE = 4             # --quick keeps every 4th document of the corpus
# Every sentencepiece trainer setting that matters for the output; also recorded in manifest.json.
SPM_SETTINGS = {
    "model_type": "bpe",
    "byte_fallback": True,
    "character_coverage": 1.0,
    "unk_id": UNK_ID,
    "bos_id": BOS_ID,
    "eos_id": EOS_ID,
    "pad_id": -1,
    "input_sentence_size": 0,          # use every line: no sampling, so no shuffle seed is involved
    "max_sentence_length": 65536,      # bytes; paragraphs are lines and some Gutenberg paragraphs exceed 4192
    "normalization_rule_name": "nmt_nfkc",
    "split_digits": True,              # every digit its own piece: numbers in the tasks are " " + one piece a digit
    "num_threads": 1,                  # pieces match for any count, but the model file records it (docs/data.md)
}

# Debian packages the corpus and the tokenizer come from.
PKG_BIBLE = "bible-kjv"
PKG_LZ4 = "golang-github-bkaradzic-go-lz4-dev"
PKG_HDFS = "golang-github-colinmarc-hdfs-dev"
PKG_WORDNET = "wordnet-base"
PKG_SPM = "python3-sentencepiece"
REQUIRED_PACKAGES = (PKG_BIBLE, PKG_LZ4, PKG_HDFS, PKG_WORDNET, PKG_SPM)
WORDNET_POS = ("noun", "verb", "adj", "adv")
KJV_RANGE = "gen1:1-rev22:21"


class DataError(Exception):
    """A problem the user can fix (missing package, bad option); main() prints it and exits 1."""


def check(cond, msg):
    """An internal invariant of the generated data (kept under python -O, unlike assert)."""
    if not cond:
        raise AssertionError(msg)


def log(msg):
    print(msg, flush=True)


class Progress:
    """Prints 'label: done/total (pct) elapsed, ETA' at most every `every` seconds and once at the end."""

    def __init__(self, label, total, every=5.0):
        self.label, self.total, self.every = label, max(total, 1), every
        self.start = self.last = time.monotonic()

    def update(self, done, force=False):
        now = time.monotonic()
        if not force and now - self.last < self.every:
            return
        self.last = now
        elapsed = now - self.start
        eta = elapsed / done * (self.total - done) if done > 0 else float("nan")
        log(f"  {self.label}: {done}/{self.total} ({100.0 * done / self.total:.0f}%), "
            f"{elapsed:.0f} s elapsed, ETA {eta:.0f} s")


# ---------------------------------------------------------------------------------------------------------------
# Sources

def dpkg_installed(pkg):
    fake_missing = {p.strip() for p in os.environ.get("FOCAL_DATA_FAKE_MISSING", "").split(",") if p.strip()}
    if pkg in fake_missing:
        return False
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
    except FileNotFoundError:
        return False
    return out.returncode == 0 and out.stdout.strip().endswith("installed") and "not-installed" not in out.stdout


def dpkg_version(pkg):
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def dpkg_find(pkg, basename):
    """The first (sorted) file named `basename` among the files of an installed package."""
    out = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True)
    hits = sorted(p for p in out.stdout.split("\n") if os.path.basename(p) == basename and os.path.isfile(p))
    if not hits:
        raise DataError(f"package {pkg} is installed but has no file {basename}; reinstall it: "
                        f"apt-get install --reinstall {pkg}")
    return hits[0]


def check_packages():
    missing = [p for p in REQUIRED_PACKAGES if not dpkg_installed(p)]
    if PKG_BIBLE not in missing and shutil.which("bible") is None:
        missing.append(PKG_BIBLE)
    if missing:
        raise DataError("the corpus needs Debian packages that are not installed: " + ", ".join(missing) +
                        "\n  install them (as root) with:\n    apt-get install -y " + " ".join(missing))


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------------------------
# Cleaning

_TRANSLATE = {
    0x2018: "'", 0x2019: "'", 0x201A: "'", 0x201B: "'", 0x2032: "'", 0x0060: "'", 0x00B4: "'",
    0x201C: '"', 0x201D: '"', 0x201E: '"', 0x201F: '"', 0x2033: '"', 0x00AB: '"', 0x00BB: '"',
    0x2013: "-", 0x2014: "--", 0x2015: "--", 0x2212: "-", 0x2026: "...", 0x00A0: " ", 0xFEFF: "",
    0x00C6: "AE", 0x00E6: "ae", 0x0152: "OE", 0x0153: "oe", 0x00DF: "ss", 0x00A3: "L",
}
_SPACES = re.compile(r"\s+")


def clean_text(s):
    """ASCII printable text with single spaces: curly quotes straightened, accents dropped, control chars removed."""
    s = s.translate(_TRANSLATE)
    s = unicodedata.normalize("NFKD", s)
    s = "".join(c for c in s if 32 <= ord(c) < 127 or c in "\t\n\r")
    return _SPACES.sub(" ", s).strip()


# ---------------------------------------------------------------------------------------------------------------
# Readers: each returns a list of sections; a section is a list of cleaned paragraphs that belong together
# (a Bible chapter, a book, a WordNet data file). Documents never cross sections.

_KJV_HEADING = re.compile(r"^(?:[1-3] )?[A-Z][A-Za-z ]* \d+$")
_KJV_VERSE = re.compile(r"^ +\d+ (.*)$")


def read_kjv():
    out = subprocess.run(["bible", KJV_RANGE], capture_output=True, env=dict(os.environ, LC_ALL="C"))
    if out.returncode != 0 or not out.stdout:
        raise DataError(f"'bible {KJV_RANGE}' failed ({out.stderr.decode(errors='replace').strip()}); "
                        f"reinstall: apt-get install --reinstall {PKG_BIBLE} bible-kjv-text")
    raw = out.stdout
    text = raw.decode("utf-8", errors="replace")
    sections, verses, cur = [], [], None
    prev_blank = True

    def flush_verse():
        nonlocal cur
        if cur is not None:
            c = clean_text(" ".join(cur))
            if c:
                verses.append(c)
            cur = None

    for line in text.split("\n"):
        if not line.strip():
            prev_blank = True
            continue
        if prev_blank and not line.startswith(" ") and _KJV_HEADING.match(line.strip()):
            flush_verse()                      # a chapter heading ("Genesis 1"): starts a new section
            if verses:
                sections.append(verses)
            verses = []
        elif _KJV_VERSE.match(line):
            flush_verse()                      # "  12 And the earth ...": strip the verse number
            cur = [_KJV_VERSE.match(line).group(1)]
        elif cur is not None:
            cur.append(line)                   # a wrapped continuation line
        prev_blank = False
    flush_verse()
    if verses:
        sections.append(verses)
    return sections, sha256_bytes(raw)


def read_gutenberg(path):
    """Paragraphs (blank-line separated, wrapped lines joined) between the '*** START OF' and '*** END OF' lines."""
    with open(path, "rb") as f:
        raw = f.read()
    lines = raw.decode("utf-8-sig", errors="replace").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    start = next((i for i, l in enumerate(lines) if l.startswith("*** START OF")), None)
    end = next((i for i, l in enumerate(lines) if l.startswith("*** END OF")), None)
    if start is None or end is None or end <= start:
        raise DataError(f"{path}: no Project Gutenberg '*** START OF' / '*** END OF' markers; "
                        f"the file is not the expected one")
    paragraphs, cur = [], []
    for line in lines[start + 1:end] + [""]:
        if line.strip():
            cur.append(line)
            continue
        if cur:
            p = clean_text(" ".join(cur))
            cur = []
            if p and not p.startswith("Produced by") and re.search(r"[A-Za-z]", p):
                paragraphs.append(p)
    return [paragraphs], sha256_bytes(raw)


_TERMINAL = re.compile(r"[.!?]\"?$")


def read_wordnet(data_dir):
    """One paragraph per synset: 'first lemma: gloss.' in file order (synsets of one lexicographer file are adjacent)."""
    sections, hashes = [], {}
    for pos in WORDNET_POS:
        path = os.path.join(data_dir, "data." + pos)
        with open(path, "rb") as f:
            raw = f.read()
        hashes[path] = sha256_bytes(raw)
        paragraphs = []
        for line in raw.decode("utf-8", errors="replace").split("\n"):
            if not line or line.startswith("  ") or "| " not in line:
                continue                       # the license header lines start with two spaces
            head, gloss = line.split("| ", 1)
            fields = head.split()
            lemma = re.sub(r"\([a-z]+\)$", "", fields[4]).replace("_", " ") if len(fields) > 4 else ""
            gloss = clean_text(gloss)
            if not gloss:
                continue
            if not _TERMINAL.search(gloss):
                gloss += "."
            paragraphs.append(clean_text(f"{lemma}: {gloss}") if lemma else gloss)
        sections.append(paragraphs)
    return sections, hashes


def make_documents(sections, source, target_words=DOC_WORDS):
    """Groups consecutive paragraphs of each section into documents of about target_words words."""
    docs = []
    for paragraphs in sections:
        cur, words = [], 0
        section_docs = []
        for p in paragraphs:
            cur.append(p)
            words += p.count(" ") + 1
            if words >= target_words:
                section_docs.append(cur)
                cur, words = [], 0
        if cur:
            if section_docs and words < target_words // 4:
                section_docs[-1].extend(cur)   # a short tail joins the previous document of its section
            else:
                section_docs.append(cur)
        docs.extend({"source": source, "paragraphs": d} for d in section_docs)
    return docs


def build_corpus(args):
    """Reads every source, makes documents, splits train / val. Returns (train_docs, val_docs, sources)."""
    sources = []
    kjv_sections, kjv_hash = read_kjv()
    sources.append({"package": PKG_BIBLE, "version": dpkg_version(PKG_BIBLE),
                    "path": f"bible \"{KJV_RANGE}\" (text of bible-kjv-text)", "sha256": kjv_hash})
    docs = make_documents(kjv_sections, "kjv")
    for pkg, name, tag in ((PKG_LZ4, "pg1661.txt", "sherlock"), (PKG_HDFS, "mobydick.txt", "mobydick")):
        path = dpkg_find(pkg, name)
        sections, h = read_gutenberg(path)
        sources.append({"package": pkg, "version": dpkg_version(pkg), "path": path, "sha256": h})
        docs += make_documents(sections, tag)
    wn_dir = os.path.dirname(dpkg_find(PKG_WORDNET, "data.noun"))
    wn_sections, wn_hashes = read_wordnet(wn_dir)
    for path in sorted(wn_hashes):
        sources.append({"package": PKG_WORDNET, "version": dpkg_version(PKG_WORDNET), "path": path,
                        "sha256": wn_hashes[path]})
    docs += make_documents(wn_sections, "wordnet")
    if args.quick:
        docs = docs[::QUICK_DOC_STRIDE]

    # Split by document: a seeded shuffle, the first val_frac of it is validation. Both files keep the shuffled
    # order so that any prefix of either mixes all sources.
    rng = Random(f"{args.seed}/split")
    order = list(range(len(docs)))
    rng.shuffle(order)
    n_val = max(1, round(len(docs) * args.val_frac))
    val_docs = [docs[i] for i in order[:n_val]]
    train_docs = [docs[i] for i in order[n_val:]]
    return train_docs, val_docs, sources


def write_corpus(path, docs):
    """One paragraph per line, one blank line between documents."""
    with open(path, "w", encoding="ascii", newline="\n") as f:
        f.write("\n\n".join("\n".join(d["paragraphs"]) for d in docs))
        f.write("\n")


def doc_text(doc):
    return " ".join(doc["paragraphs"])


# ---------------------------------------------------------------------------------------------------------------
# Tokenizer

def train_tokenizer(docs, out_dir, vocab, spm):
    """Trains the BPE model on the paragraphs of docs into out_dir/tokenizer.model. Raises DataError if the corpus
    cannot support `vocab`. Sentences come from an iterator and the model through a writer so that no file path
    (which would differ between output directories) is recorded in the model's trainer spec."""
    model = io.BytesIO()
    paragraphs = (p for d in docs for p in d["paragraphs"])
    try:
        spm.SentencePieceTrainer.train(sentence_iterator=paragraphs, model_writer=model, vocab_size=vocab,
                                       minloglevel=2, **SPM_SETTINGS)
    except (RuntimeError, OSError) as e:
        msg = str(e).strip()
        m = re.search(r"<= *(\d+)", msg)
        hint = (f"sentencepiece can make at most {m.group(1)} pieces from this corpus: use --vocab {m.group(1)} or "
                f"less (the default is 4096)" if m else "use a smaller --vocab (the default is 4096)")
        raise DataError(f"--vocab {vocab} is larger than the corpus supports; {hint}\n  (sentencepiece: {msg})") \
            from None
    path = os.path.join(out_dir, "tokenizer.model")
    with open(path, "wb") as f:
        f.write(model.getvalue())
    sp = spm.SentencePieceProcessor(model_file=path)
    if sp.get_piece_size() != vocab:
        raise DataError(f"--vocab {vocab}: sentencepiece made only {sp.get_piece_size()} pieces from this corpus; "
                        f"a workable maximum is {sp.get_piece_size()}")
    return sp


def encode_docs(sp, docs, path, label):
    """Writes [BOS] + ids of every document, little-endian int32, concatenated. Returns the token count."""
    prog = Progress(f"tokenizing {label}", len(docs))
    n_tokens = 0
    with open(path, "wb") as f:
        batch = 512
        for i in range(0, len(docs), batch):
            chunk = sp.encode([doc_text(d) for d in docs[i:i + batch]])
            buf = array.array("i")
            for ids in chunk:
                buf.append(BOS_ID)
                buf.extend(ids)
            if sys.byteorder != "little":
                buf.byteswap()
            f.write(buf.tobytes())
            n_tokens += len(buf)
            prog.update(min(i + batch, len(docs)))
    prog.update(len(docs), force=True)
    return n_tokens


# ---------------------------------------------------------------------------------------------------------------
# Synthetic retrieval tasks.
#
# A task is built as a list of text items that each begin with a space and end at a word boundary. Because
# sentencepiece never merges across whitespace, the ids of the whole text are the concatenation of the ids of the
# items, so token counts add up while a task is assembled. locate() then encodes the full text once, maps each
# answer and relevant character span to tokens through the piece offsets (a span must start and end on token
# boundaries) and checks ids[relevant] == ids[answer] token for token.

_SENTENCE_SPLIT = re.compile(r"(?:(?<=[.!?])|(?<=[.!?]\"))(?<!\bMr\.)(?<!\bMrs\.)(?<!\bDr\.)(?<!\bSt\.)\s+(?=[\"'A-Z(])")


class PrevDrill:
    """Previous-token drills (kind "prev", --prev-tasks): the mqar header, then a random stream drawn from the key and
    value tokens of the training mqar tasks' pairs and the item separator (weighted PREV_SEP_COPIES times), with
    "Now recall:" inserted once at a position uniform in [40, 100] (where the stream reaches it). Each stream token
    repeats the token two back with probability PREV_REPEAT when the two before it differ; each repeat is an answer,
    predicted at the row after its original, whose previous token it is. The stream has no period and no marker, so
    an answer can only be found by attending one position back: the model learns previous-token heads, the first
    half of the associative-recall circuit (docs/results.md). The drill has its own generator (--prev-seed): its
    default, 11, is the draw whose one-layer drill (S1 in docs/results.md) let every later recall run learn."""

    def __init__(self, sp, rng, mqar_tasks):
        self.rng = rng
        keys, values, sep = set(), set(), None
        for t in mqar_tasks:
            for a in t["answers"]:
                v = a["relevant"][1]                  # relevant: the pair " key value," -> [key, value, separator]
                keys.add(t["ids"][v - 1])
                values.add(t["ids"][v])
                sep = t["ids"][v + 1]
        if sep is None:
            raise DataError("--prev-tasks needs mqar training tasks to draw its tokens from (raise --train-tasks)")
        self.pool = sorted(keys | values) + [sep] * PREV_SEP_COPIES
        self.head, self.mid = sp.encode(" Remember these pairs:"), sp.encode(" Now recall:")

    def make(self, length):
        rng = self.rng
        ids = [BOS_ID] + self.head
        answers = []
        mid_at = rng.randint(40, 100)
        while len(ids) < length:
            if len(ids) == mid_at:
                ids += self.mid
            n = len(ids)
            if n >= 3 and rng.random() < PREV_REPEAT and ids[-1] != ids[-2]:
                answers.append({"answer_pos": n, "answer_len": 1, "relevant": [n - 2]})
                ids.append(ids[-2])
            else:
                ids.append(rng.choice(self.pool))
        return {"kind": PREV_KIND, "length": len(ids), "ids": ids, "answers": answers}


class TaskMaker:
    def __init__(self, sp, rng, filler_docs, key_words, value_words, label, train_queries=(2, 8)):
        self.sp, self.rng, self.label = sp, rng, label
        self.train_queries = train_queries   # mqar queries of a training task: uniform in [lo, hi]
        self.key_words = key_words
        self.value_words = value_words
        self.space_id = sp.piece_to_id("\u2581")
        # Needle filler: prose sentences (not WordNet glosses), without digits, 4..64 tokens, in corpus order.
        sents = []
        for d in filler_docs:
            if d["source"] == "wordnet":
                continue
            # Split the whole document: a KJV verse is a paragraph and often ends mid-sentence.
            sents.extend(s for s in _SENTENCE_SPLIT.split(doc_text(d)) if not re.search(r"\d", s))
        counts = [len(x) for x in sp.encode([" " + s for s in sents])] if sents else []
        keep = [(s, c) for s, c in zip(sents, counts) if 4 <= c <= 64]
        self.fill_text = [" " + s for s, _ in keep]
        self.fill_count = [c for _, c in keep]
        if sum(self.fill_count) < 2 * max(EVAL_LENGTHS):
            raise DataError(f"{label}: only {sum(self.fill_count)} tokens of filler prose for the needle task; "
                            f"raise --val-frac or drop --quick")

    def count(self, texts):
        return [len(ids) for ids in self.sp.encode(texts)]

    def fill_items(self, budget, lo, candidates):
        """Takes (text, n_tokens) items from `candidates` while they fit in budget, skipping any that do not fit;
        stops once at least lo tokens are used and the next one does not fit. Returns the items, or None."""
        if budget < 0:
            return None
        items, used, skipped = [], 0, 0
        for text, c in candidates:
            if used + c <= budget:
                items.append((text, c))
                used += c
                skipped = 0
            elif used >= lo:
                break
            else:
                skipped += 1                   # too long for what is left: try the next one
                if skipped > 200:
                    return None
        return items if used >= lo else None

    # -- key-value lookup --------------------------------------------------------------------------------------
    def prose(self, budget, lo):
        """Consecutive filler sentences from a random start, filling at least lo and at most budget tokens (the
        text before the pairs of a distractor-sweep task), or None."""
        if lo <= 0 and budget >= 0:
            lo = 0
        start = self.rng.randrange(len(self.fill_text))
        n = len(self.fill_text)
        items = self.fill_items(budget, lo, ((self.fill_text[(start + j) % n], self.fill_count[(start + j) % n])
                                             for j in range(n)))
        return None if items is None else "".join(t for t, _ in items)

    def kv(self, lo, hi, n_distract=None):
        """n_distract None: distractor pairs fill [lo, hi]; else exactly n_distract of them, after prose."""
        rng = self.rng
        numbers = rng.sample(range(1000, 10000), 2 + 2 * (hi // 6))
        key, value = numbers[0], numbers[1]
        pool = numbers[2:]
        target_item = f" key {key} is value {value}."
        query = f" what is key {key}? value"
        answer = f" {value}"
        fixed = 1 + sum(self.count([target_item, query, answer]))

        def distractors():
            for j in range(0, len(pool) - 1, 2):
                t = f" key {pool[j]} is value {pool[j + 1]}."
                yield t, self.count([t])[0]

        prefix = ""
        if n_distract is None:
            items = self.fill_items(hi - fixed, lo - fixed, distractors())
        else:
            items = [it for it, _ in zip(distractors(), range(n_distract))]
            used = fixed + sum(c for _, c in items)
            prefix = self.prose(hi - used, lo - used)
            if prefix is None or used > hi:
                return None
        if items is None:
            return None
        pos = rng.randint(0, len(items))
        texts = [prefix] + [t for t, _ in items]
        texts.insert(pos + 1, target_item)
        value_start = sum(len(t) for t in texts[:pos + 1]) + len(f" key {key} is value")
        context = "".join(texts)
        text = context + query + answer
        return [(len(context) + len(query), len(answer), value_start, len(answer))], text

    # -- multi-query associative recall ------------------------------------------------------------------------
    def mqar(self, lo, hi, n_queries, n_distract=None):
        """n_distract None: distractor pairs fill [lo, hi]; else exactly n_distract of them, after prose."""
        rng = self.rng
        max_pairs = min(len(self.key_words), 900)
        keys = rng.sample(self.key_words, max_pairs)
        values = [rng.choice(self.value_words) for _ in range(max_pairs)]   # one token each, repeats allowed
        head, mid = " Remember these pairs:", " Now recall:"
        # keys and values are random draws, so the first n_queries pairs are the queried ones and the rest are
        # distractors; all pairs are then shuffled into the context and the queries asked in another random order.
        pair_text = [f" {k} {v}," for k, v in zip(keys, values)]
        query_items = pair_text[:n_queries]
        fixed = 1 + sum(self.count([head, mid] + query_items * 2))

        def distractors():
            for t in pair_text[n_queries:]:
                yield t, self.count([t])[0]

        if n_distract is None:
            items = self.fill_items(hi - fixed, lo - fixed, distractors())
            ctx = head
        else:
            items = [it for it, _ in zip(distractors(), range(n_distract))]
            used = fixed + sum(c for _, c in items)
            prefix = self.prose(hi - used, lo - used)
            if prefix is None or used > hi:
                return None
            ctx = prefix + head
        if items is None:
            return None
        context_pairs = list(range(n_queries)) + [n_queries + j for j in range(len(items))]
        rng.shuffle(context_pairs)
        query_order = list(range(n_queries))
        rng.shuffle(query_order)
        value_start, pair_span = {}, {}
        for j, p in enumerate(context_pairs):
            item = pair_text[p] if j + 1 < len(context_pairs) else pair_text[p][:-1] + "."
            value_start[p] = len(ctx) + len(f" {keys[p]}")
            pair_span[p] = (len(ctx), len(item))
            ctx += item
        text = ctx + mid
        spans = []
        for j, q in enumerate(query_order):
            a_start = len(text) + len(f" {keys[q]}")
            text += pair_text[q] if j + 1 < n_queries else pair_text[q][:-1] + "."
            n = len(f" {values[q]}")
            # The relevant tokens are the whole pair " key value," in the context: a model that retrieves reads the
            # key and the value there, and a two-layer one often reads them at the separator after the value.
            spans.append((a_start, n, value_start[q], n) + pair_span[q])
        return spans, text

    # -- needle in a haystack ----------------------------------------------------------------------------------
    def needle(self, lo, hi):
        rng = self.rng
        secret = rng.randint(10000, 99999)
        needle = f" The secret number is {secret}."
        query = " What is the secret number? The secret number is"
        answer = f" {secret}"
        fixed = 1 + sum(self.count([needle, query, answer]))
        start = rng.randrange(len(self.fill_text))

        def sentences():
            n = len(self.fill_text)
            for j in range(n):
                k = (start + j) % n
                yield self.fill_text[k], self.fill_count[k]

        items = self.fill_items(hi - fixed, lo - fixed, sentences())
        if items is None:
            return None
        pos = rng.randint(0, len(items))      # insertion depth: before item `pos`
        texts = [t for t, _ in items]
        texts.insert(pos, needle)
        needle_value = sum(len(t) for t in texts[:pos]) + len(" The secret number is")
        context = "".join(texts)
        text = context + query + answer
        return [(len(context) + len(query), len(answer), needle_value, len(answer))], text

    # ----------------------------------------------------------------------------------------------------------
    def build_task(self, kind, target, lo, hi, n_distract=None):
        """One task dict, or raises if the generator cannot hit [lo, hi] after several tries. n_distract: a
        distractor-sweep task (kv or mqar) with exactly that many distractor pairs after prose."""
        # mqar: 8 queries in evaluation, 2..8 in training; a query costs its pair twice (context and recall), so
        # when the pairs do not fit the target (short targets, small vocabularies) each retry asks one fewer.
        n_queries = 8 if self.label == "eval" else self.rng.randint(*self.train_queries)
        for _ in range(20):
            if kind == "kv":
                made = self.kv(lo, hi, n_distract)
            elif kind == "mqar":
                made = self.mqar(lo, hi, n_queries, n_distract)
                if n_distract is None:
                    n_queries = max(1, n_queries - 1)
            else:
                made = self.needle(lo, hi)
            if made is None:
                continue
            spans, text = made
            text = text[1:]                    # items start with a space; the tokenizer adds the leading one
            task = self.locate(kind, target, spans, text)
            if lo <= len(task["ids"]) <= hi:
                if n_distract is not None:
                    task["distractors"] = n_distract
                return task
        raise RuntimeError(f"could not make a {kind} task of {lo}..{hi} tokens")

    def locate(self, kind, target, spans, text):
        """Encodes text and turns character spans (answer_start, answer_len, relevant_start, relevant_len, and for
        mqar pair_start, pair_len; offsets in the text before its leading space was removed) into token positions in
        [BOS] + ids. The relevant tokens are the earlier copy of the answer, or for mqar the pair that holds it."""
        proto = self.sp.encode(text, out_type="immutable_proto")
        ids = [BOS_ID] + [p.id for p in proto.pieces]
        begins = [p.begin for p in proto.pieces]
        ends = [p.end for p in proto.pieces]

        def tokens_of(char_start, char_len):
            # Character offsets refer to " " + text; the space before each span is the piece's "▁".
            s, e = char_start - 1, char_start - 1 + char_len
            check(s >= 0, f"{kind}: span at the very start of the text")
            i = bisect.bisect_left(begins, s)
            j = bisect.bisect_left(ends, e)
            check(i < len(begins) and begins[i] == s and j < len(ends) and ends[j] == e,
                  f"{kind}: span {text[s:e]!r} does not fall on token boundaries")
            return list(range(i + 1, j + 2))  # +1 for BOS

        answers = []
        for a_start, a_len, r_start, r_len, *pair in spans:
            a = tokens_of(a_start, a_len)
            r = tokens_of(r_start, r_len)
            check([ids[k] for k in r] == [ids[k] for k in a],
                  f"{kind}: relevant tokens {[ids[k] for k in r]} != answer tokens {[ids[k] for k in a]}")
            # The space before a number is a bare "▁" piece (digits never merge with it); it is not part of the
            # answer, so the query row answer_pos - 1 is the row that must retrieve the first digit.
            if len(a) > 1 and ids[a[0]] == self.space_id:
                a, r = a[1:], r[1:]
            if pair:  # mqar: the copy of the answer, checked above, lies inside the pair that becomes the relevant span
                p = tokens_of(*pair)
                check(p[0] < r[0] and r[-1] < p[-1], f"{kind}: value {r} is not inside its pair {p}")
                r = p
            check(r[-1] < a[0] - 1, f"{kind}: relevant tokens {r} do not precede the answer at {a[0]}")
            answers.append({"answer_pos": a[0], "answer_len": len(a), "relevant": r})
        return {"kind": kind, "length": target, "ids": ids, "answers": answers}


def ranked_words(train_docs):
    """Lowercase words of the training prose (3..7 letters, not WordNet), most frequent first."""
    counts = Counter()
    for d in train_docs:
        if d["source"] == "wordnet":
            continue
        for p in d["paragraphs"]:
            counts.update(w for w in re.findall(r"(?<![A-Za-z'])[a-z]{3,7}(?![A-Za-z'])", p))
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def mqar_key_words(ranked, sp=None):
    """Common lowercase words of the training text (3..7 letters), skipping the 100 most frequent function words.
    With sp (--mqar-keys one-token): only those that are one token, so that a key is matched by one token and
    recalling its value is the plain associative recall of the MQAR benchmark (one previous-token step, one
    induction step); many-token keys can share their last token."""
    if sp is None:
        return sorted(ranked[100:1100])
    return sorted([w for w in ranked[100:] if len(sp.encode(" " + w)) == 1][:900])


def mqar_value_words(sp, ranked, key_words=()):
    """The mqar values: words of the training prose that are one token (" word" -> "\u2581word") and not keys, by
    frequency after the keys' ranks (then the 100 most frequent, for small vocabularies), at most MQAR_VALUES. One
    token each, so recalling a value is one induction step: find the key's earlier occurrence and copy the next
    token."""
    words, keys = [], set(key_words)
    for w in ranked[1100:] + ranked[:100]:
        if len(words) == MQAR_VALUES:
            break
        if len(sp.encode(" " + w)) == 1 and w not in keys:
            words.append(w)
    return sorted(words)


def write_tasks(path, tasks):
    with open(path, "w", encoding="ascii", newline="\n") as f:
        for t in tasks:
            f.write(json.dumps(t, separators=(",", ":")) + "\n")


def make_tasks(sp, args, train_docs, val_docs):
    ranked = ranked_words(train_docs)
    key_words = mqar_key_words(ranked, sp if args.mqar_keys == "one-token" else None)
    if len(key_words) < 900:
        raise DataError(f"only {len(key_words)} distinct key words for the mqar task (--mqar-keys "
                        f"{args.mqar_keys}); drop --quick" + (", or use --mqar-keys words" if
                                                               args.mqar_keys == "one-token" else ""))
    value_words = mqar_value_words(sp, ranked, key_words)
    if len(value_words) < MQAR_MIN_VALUES:
        raise DataError(f"the tokenizer has only {len(value_words)} one-token words besides the mqar keys "
                        f"(at least {MQAR_MIN_VALUES} are needed as mqar values); raise --vocab")

    # Training tasks: kinds in equal thirds, target lengths uniform in --train-lengths, ids never longer.
    maker = TaskMaker(sp, Random(f"{args.seed}/tasks/train"), train_docs, key_words, value_words, "train",
                      args.train_queries)
    prog = Progress("training tasks", args.train_tasks)
    train = []
    for i in range(args.train_tasks):
        kind = TASK_KINDS[i % len(TASK_KINDS)]
        target = maker.rng.randint(*args.train_lengths)
        train.append(maker.build_task(kind, target, int(target * 0.75), target))
        prog.update(i + 1)
    prog.update(args.train_tasks, force=True)
    maker.rng.shuffle(train)
    if args.prev_tasks:
        # The drill has its own generator, so that --prev-tasks 0 leaves every other task as it was.
        drill = PrevDrill(sp, Random(args.prev_seed), [t for t in train if t["kind"] == "mqar"])
        for _ in range(args.prev_tasks):
            train.append(drill.make(drill.rng.randint(*args.train_lengths)))

    # Evaluation tasks: needle filler from validation text, lengths within ±10 % of each target.
    maker = TaskMaker(sp, Random(f"{args.seed}/tasks/eval"), val_docs, key_words, value_words, "eval")
    total = len(TASK_KINDS) * len(EVAL_LENGTHS) * args.eval_tasks
    prog = Progress("evaluation tasks", total)
    evals = []
    for kind in TASK_KINDS:
        for length in EVAL_LENGTHS:
            lo = math.ceil(length * (1 - LENGTH_TOLERANCE))
            for _ in range(args.eval_tasks):
                # Items are added while they fit under the target, so lengths fall in [0.9 target, target]: an
                # evaluation at the training context (512) never exceeds it.
                task = maker.build_task(kind, length, lo, length)
                evals.append(task)
                prog.update(len(evals))
    prog.update(total, force=True)

    # Distractor sweep: kv and mqar at one length with 1..12 distractor pairs, prose before the pairs for the rest.
    maker = TaskMaker(sp, Random(f"{args.seed}/tasks/distract"), val_docs, key_words, value_words, "eval")
    total = len(DISTRACT_KINDS) * len(DISTRACT_COUNTS) * args.eval_tasks
    prog = Progress("distractor-sweep tasks", total)
    distract = []
    lo = math.ceil(DISTRACT_LENGTH * (1 - LENGTH_TOLERANCE))
    for kind in DISTRACT_KINDS:
        for n in DISTRACT_COUNTS:
            for _ in range(args.eval_tasks):
                distract.append(maker.build_task(kind, DISTRACT_LENGTH, lo, DISTRACT_LENGTH, n_distract=n))
                prog.update(len(distract))
    prog.update(total, force=True)
    return train, evals, distract


# ---------------------------------------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Build focalscope's corpus (Debian public-domain text), sentencepiece tokenizer, tokenized "
                    "text and synthetic retrieval tasks. Deterministic for a seed. See docs/data.md.")
    p.add_argument("--out", required=True, help="output directory (created if missing)")
    p.add_argument("--vocab", type=int, default=4096, help="tokenizer vocabulary size (default 4096)")
    p.add_argument("--seed", type=int, default=1, help="seed of the split and the tasks (default 1)")
    p.add_argument("--val-frac", type=float, default=0.02,
                   help="fraction of documents held out for validation (default 0.02)")
    p.add_argument("--quick", action="store_true",
                   help=f"small build for tests: every {QUICK_DOC_STRIDE}th document, 2000 training tasks, "
                        "10 evaluation tasks per (kind, length)")
    p.add_argument("--train-tasks", type=int, default=None,
                   help="number of training tasks (default 20000, --quick 2000)")
    p.add_argument("--eval-tasks", type=int, default=None,
                   help="evaluation tasks per (kind, length) (default 50, --quick 10)")
    p.add_argument("--train-lengths", default=f"{TRAIN_LENGTH_RANGE[0]}:{TRAIN_LENGTH_RANGE[1]}", metavar="LO:HI",
                   help="target lengths of the training tasks, drawn uniformly (default "
                        f"{TRAIN_LENGTH_RANGE[0]}:{TRAIN_LENGTH_RANGE[1]})")
    p.add_argument("--train-queries", default="2:8", metavar="LO:HI",
                   help="queries of a training mqar task, drawn uniformly (default 2:8; fewer when they do not fit)")
    p.add_argument("--prev-tasks", type=int, default=0, metavar="N",
                   help="add N previous-token drills (kind 'prev') to the training tasks (default 0); with "
                        "--mqar-keys one-token they let a two-layer model learn associative recall (docs/results.md)")
    p.add_argument("--prev-seed", type=int, default=11, metavar="S",
                   help="the drills' own random seed (default 11: the draw that made the drilled layer of "
                        "docs/results.md's third round)")
    p.add_argument("--mqar-keys", choices=("words", "one-token"), default="words",
                   help="mqar keys: common words of 3-7 letters (default; some are several tokens), or only those "
                        "that are one token")
    args = p.parse_args(argv)

    def int_range(option, text, least, why=""):
        """'LO:HI' -> (LO, HI) with least <= LO <= HI, else a usage error naming the option."""
        try:
            lo, hi = (int(x) for x in text.split(":"))
        except ValueError:
            p.error(f"{option} {text!r}: give LO:HI, two integers")
        if not least <= lo <= hi:
            p.error(f"{option} {text}: need {least} <= LO <= HI{why}")
        return lo, hi

    args.train_queries = int_range("--train-queries", args.train_queries, 1)
    args.train_lengths = int_range("--train-lengths", args.train_lengths, 48, " (a task needs room for its pairs)")
    if args.train_tasks is None:
        args.train_tasks = 2000 if args.quick else 20000
    if args.eval_tasks is None:
        args.eval_tasks = 10 if args.quick else 50
    if args.vocab < 300:
        p.error(f"--vocab {args.vocab} is too small: byte fallback alone takes 259 pieces; use at least 300")
    if not 0.0 < args.val_frac < 0.5:
        p.error(f"--val-frac {args.val_frac} must be in (0, 0.5)")
    if args.train_tasks < 0 or args.eval_tasks < 0 or args.prev_tasks < 0:
        p.error("--train-tasks, --eval-tasks and --prev-tasks must be >= 0")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    t_start = time.monotonic()
    try:
        check_packages()
        import sentencepiece as spm
        os.makedirs(args.out, exist_ok=True)
        manifest_path = os.path.join(args.out, "manifest.json")
        if os.path.exists(manifest_path):
            os.remove(manifest_path)          # written last: a failed run leaves no manifest to trust

        log("build_data: reading sources and building the corpus")
        train_docs, val_docs, sources = build_corpus(args)
        paths = {name: os.path.join(args.out, name) for name in (
            "corpus_train.txt", "corpus_val.txt", "tokenizer.model", "text_train.bin", "text_val.bin",
            "tasks_train.jsonl", "tasks_eval.jsonl", "tasks_distract.jsonl")}
        write_corpus(paths["corpus_train.txt"], train_docs)
        write_corpus(paths["corpus_val.txt"], val_docs)
        log(f"  corpus_train.txt: {len(train_docs)} documents, {os.path.getsize(paths['corpus_train.txt'])} bytes")
        log(f"  corpus_val.txt:   {len(val_docs)} documents, {os.path.getsize(paths['corpus_val.txt'])} bytes")

        t0 = time.monotonic()
        log(f"build_data: training the BPE tokenizer (vocab {args.vocab}, one thread; about "
            f"{'2 s' if args.quick else '10 s'} on one core)")
        sp = train_tokenizer(train_docs, args.out, args.vocab, spm)
        log(f"  tokenizer.model: {sp.get_piece_size()} pieces in {time.monotonic() - t0:.0f} s")

        log("build_data: tokenizing the corpus")
        n_train = encode_docs(sp, train_docs, paths["text_train.bin"], "train")
        n_val = encode_docs(sp, val_docs, paths["text_val.bin"], "val")
        log(f"  text_train.bin: {n_train} tokens; text_val.bin: {n_val} tokens")

        log("build_data: generating synthetic retrieval tasks")
        train_tasks, eval_tasks, distract_tasks = make_tasks(sp, args, train_docs, val_docs)
        write_tasks(paths["tasks_train.jsonl"], train_tasks)
        write_tasks(paths["tasks_eval.jsonl"], eval_tasks)
        write_tasks(paths["tasks_distract.jsonl"], distract_tasks)

        def task_counts(tasks):
            c = Counter(t["kind"] for t in tasks)
            return {k: c[k] for k in TASK_KINDS + ((PREV_KIND,) if c[PREV_KIND] else ())}

        manifest = {
            "seed": args.seed,
            "vocab": args.vocab,
            "val_frac": args.val_frac,
            "quick": args.quick,
            "sources": sources,
            "corpus": {
                "document_words": DOC_WORDS,
                "train": {"documents": len(train_docs), "bytes": os.path.getsize(paths["corpus_train.txt"]),
                          "by_source": dict(sorted(Counter(d["source"] for d in train_docs).items()))},
                "val": {"documents": len(val_docs), "bytes": os.path.getsize(paths["corpus_val.txt"]),
                        "by_source": dict(sorted(Counter(d["source"] for d in val_docs).items()))},
            },
            "tokenizer": dict(SPM_SETTINGS, vocab_size=args.vocab, sentencepiece_version=spm.__version__),
            "tokens": {"train": n_train, "val": n_val},
            "tasks": {
                "mqar_keys": args.mqar_keys,
                "prev_tasks": args.prev_tasks,
                "prev_seed": args.prev_seed,
                "train": {"count": len(train_tasks), "by_kind": task_counts(train_tasks),
                          "length_range": list(args.train_lengths),
                          "mqar_queries": list(args.train_queries),
                          "tokens": sum(len(t["ids"]) for t in train_tasks)},
                "eval": {"count": len(eval_tasks), "by_kind": task_counts(eval_tasks),
                         "lengths": list(EVAL_LENGTHS), "per_kind_and_length": args.eval_tasks,
                         "length_tolerance": LENGTH_TOLERANCE},
                "distract": {"count": len(distract_tasks), "by_kind": task_counts(distract_tasks),
                             "length": DISTRACT_LENGTH, "distractors": list(DISTRACT_COUNTS),
                             "per_kind_and_count": args.eval_tasks},
            },
            "files": {name: {"bytes": os.path.getsize(path), "sha256": sha256_file(path)}
                      for name, path in sorted(paths.items())},
        }
        with open(manifest_path, "w", encoding="ascii", newline="\n") as f:
            json.dump(manifest, f, indent=2, sort_keys=True)
            f.write("\n")
    except DataError as e:
        print(f"build_data: error: {e}", file=sys.stderr)
        return 1

    log(f"build_data: done in {time.monotonic() - t_start:.0f} s -> {args.out}")
    for name, info in manifest["files"].items():
        log(f"  {name:18s} {info['bytes']:>11d} bytes")
    log(f"  tokens: train {n_train}, val {n_val}; tasks: train {len(train_tasks)} {manifest['tasks']['train']['by_kind']}"
        f", eval {len(eval_tasks)} {manifest['tasks']['eval']['by_kind']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
