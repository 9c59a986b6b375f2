#!/usr/bin/env python3
"""Count the summaries of bench/summary_quality.sh: copies, invented facts, good.

copied: the share of a summary's word 4-grams that appear in its document
(1.0: every 4 words in a row come from it); a summary is counted as a copy
when that share is at least 0.8 or a label says so.  invented and good come
from bench/results/summary_quality_labels.tsv (model, id, label, note), one
label per summary: good, copy, invented, off (not a summary: a loop, an
echo of the prompt, an empty or cut-off answer).  Writes
bench/results/summary_quality.md and prints it.
"""
import csv
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def words(s):
    return re.findall(r"[a-z0-9]+", s.lower())


def copied(summary, doc):
    w, d = words(summary), words(doc)
    grams = [tuple(w[i:i + 4]) for i in range(len(w) - 3)]
    if not grams:
        return 0.0
    have = {tuple(d[i:i + 4]) for i in range(len(d) - 3)}
    return sum(g in have for g in grams) / len(grams)


def main():
    docs = {r["id"]: r for r in csv.DictReader(open(os.path.join(ROOT, "bench/data/summary_docs.tsv")), delimiter="\t")}
    outs = list(csv.DictReader(open(os.path.join(ROOT, "bench/results/summary_quality_outputs.tsv")),
                               delimiter="\t", quoting=csv.QUOTE_NONE))
    labels = {}
    path = os.path.join(ROOT, "bench/results/summary_quality_labels.tsv")
    if os.path.exists(path):
        for r in csv.DictReader(open(path), delimiter="\t", quoting=csv.QUOTE_NONE):
            labels[(r["model"], r["id"])] = r["label"]
    models = sorted({o["model"] for o in outs})
    lines = ["# One-sentence summaries: Gemma 3 270M (base, plain prompt) and SmolLM2-135M-Instruct (chat)", "",
             "28 documents (bench/data/summary_docs.tsv), greedy, at most 48 tokens (bench/summary_quality.sh).",
             "copy: 80% or more of the summary's word 4-grams are the document's. The other labels are read by hand",
             "(bench/results/summary_quality_labels.tsv): invented = a fact not in the document; off = not a",
             "summary (a loop, an echo, a cut-off or empty answer); good = a correct one-sentence summary.", "",
             "| model | documents | good | copy | invented | off | mean copied 4-grams | unlabelled |",
             "|---|---|---|---|---|---|---|---|"]
    subsets = [("all 28", lambda i: True), ("the demo's 8", lambda i: i <= 8), ("20 more", lambda i: i > 8)]
    for m, (subset, keep) in [(m, s) for m in models for s in subsets]:
        rows = [o for o in outs if o["model"] == m and keep(int(o["id"]))]
        count = {"good": 0, "copy": 0, "invented": 0, "off": 0}
        unlabelled = 0
        share = 0.0
        for o in rows:
            c = copied(o["summary"], docs[o["id"]]["body"])
            share += c
            label = labels.get((m, o["id"]))
            if label is None:
                unlabelled += 1
                label = "copy" if c >= 0.8 else None
            elif c >= 0.8 and label == "good":
                label = "copy"
            if label:
                count[label] += 1
        lines.append(f"| {m} | {subset} | {count['good']} | {count['copy']} | {count['invented']} | {count['off']} | "
                     f"{share / max(len(rows), 1):.2f} | {unlabelled} |")
    text = "\n".join(lines) + "\n"
    open(os.path.join(ROOT, "bench/results/summary_quality.md"), "w").write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
