#!/usr/bin/python3
# Prints synthetic retrieval tasks from build_data.py decoded back to text, with the relevant tokens marked [[...]]
# and the answer tokens marked <<...>>, so the recorded positions can be checked by eye.
"""Decode tasks_{train,eval,distract}.jsonl with the answer and relevant positions marked."""

import argparse
import json
import os
import sys


def piece_text(sp, token_id):
    if token_id == sp.bos_id():
        return "<s>"
    return sp.id_to_piece(token_id).replace("\u2581", " ")


def render(sp, task, max_chars):
    marks = {}
    for n, a in enumerate(task["answers"]):
        for k in a["relevant"]:
            marks[k] = ("[[", "]]")
        for k in range(a["answer_pos"], a["answer_pos"] + a["answer_len"]):
            marks[k] = ("<<", ">>")
    out, open_mark = [], None
    for k, t in enumerate(task["ids"]):
        m = marks.get(k)
        if open_mark and m != open_mark:
            out.append(open_mark[1])
            open_mark = None
        if m and m != open_mark:
            out.append(m[0])
            open_mark = m
        out.append(piece_text(sp, t))
    if open_mark:
        out.append(open_mark[1])
    text = "".join(out)
    if max_chars and len(text) > max_chars:
        half = max_chars // 2
        text = text[:half] + " [...] " + text[-half:]
    return text


def main():
    p = argparse.ArgumentParser(description="Decode synthetic tasks with [[relevant]] and <<answer>> tokens marked.")
    p.add_argument("dir", help="output directory of build_data.py")
    p.add_argument("--split", choices=("train", "eval", "distract"), default="eval")
    p.add_argument("--kind", choices=("kv", "mqar", "needle"), default=None, help="only this kind")
    p.add_argument("--length", type=int, default=None, help="only this target length")
    p.add_argument("-n", type=int, default=1, help="tasks per kind to print (default 1)")
    p.add_argument("--max-chars", type=int, default=0, help="elide the middle of longer texts (0: never)")
    args = p.parse_args()
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.dir, "tokenizer.model"))
    shown = {}
    with open(os.path.join(args.dir, f"tasks_{args.split}.jsonl"), encoding="ascii") as f:
        for line in f:
            task = json.loads(line)
            if (args.kind and task["kind"] != args.kind) or (args.length and task["length"] != args.length):
                continue
            if shown.get(task["kind"], 0) >= args.n:
                continue
            shown[task["kind"]] = shown.get(task["kind"], 0) + 1
            print(f"--- {task['kind']}: target length {task['length']}, {len(task['ids'])} tokens")
            for a in task["answers"]:
                print(f"    answer_pos {a['answer_pos']} answer_len {a['answer_len']} relevant {a['relevant']} "
                      f"ids {task['ids'][a['answer_pos']:a['answer_pos'] + a['answer_len']]}")
            print(render(sp, task, args.max_chars))
    return 0


if __name__ == "__main__":
    sys.exit(main())
