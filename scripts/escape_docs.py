#!/usr/bin/env python3
"""Documents for issue 23's goal 2: free-form JSON with non-ASCII text, escaped and raw.

Writes, under OUT (default target/escape-docs), llg-bench workloads (NAME.schema.json =
{"type":"object"}, NAME.target.json) for four documents:

- cjk_esc / cjk_utf8: a synthetic record of CJK text and emoji, serialised with
  json.dumps(ensure_ascii=True) (\\uXXXX escapes, surrogate pairs for emoji) and False (raw UTF-8,
  which byte-level BPE splits inside characters);
- mb_esc / mb_utf8: the valid MaskBench instances with non-ASCII text (dev split, in id order)
  that fit 6 kB together, as one {"docs": [...]} object, serialised both ways.

grammask walks them with `walk --json --format json --input OUT/NAME.target.json`;
llguidance with `llg-bench --workloads OUT --workload NAME` (`NAME+uesc` for the escaped ones,
as llguidance refuses \\u escapes of non-ASCII characters by default). With `--grammask LABEL
BIN` (repeatable) and `--llg BIN` it runs them, alternating, and prints a table:

    python3 scripts/escape_docs.py --grammask new target/release/grammask \\
        --llg ../llg-target/release/llg-bench --rounds 2
"""
import argparse
import json
import os
import subprocess

CJK = ("多言語の文書を構造化された形式で保存します。東京、大阪、京都の天気予報：晴れのち曇り。"
       "用户可以通过接口查询订单状态，并获取物流信息。한국어 텍스트도 포함됩니다. ")
EMOJI = "🚀✨🎉👍🏽🇯🇵😀"


def synthetic():
    return {
        "title": "国際会議の議事録 " + EMOJI[:3],
        "authors": [{"name": "山田 太郎", "role": "議長"}, {"name": "李 明", "role": "記録"},
                    {"name": "김민수", "role": "발표자 🎤"}],
        "summary": CJK * 2,
        "tags": ["会議", "议程", "회의", "🚀", "✨ready"],
        "items": [{"id": i, "text": CJK[i * 7:(i * 7) + 30] + EMOJI[i % len(EMOJI)],
                   "done": i % 2 == 0, "score": 0.5 + i} for i in range(6)],
        "note": "Mixed: café, naïve, Ωmega, ∑ x² " + EMOJI,
    }


def maskbench_docs(files, limit):
    docs, size = [], 0
    for name in sorted(os.listdir(files)):
        with open(os.path.join(files, name), encoding="utf-8") as f:
            d = json.load(f)
        for t in d.get("tests", []):
            if not t.get("valid"):
                continue
            s = json.dumps(t["data"], ensure_ascii=False)
            if s.isascii() or not isinstance(t["data"], (dict, list)):
                continue
            if size + len(s.encode()) > limit:
                continue
            docs.append(t["data"])
            size += len(s.encode())
            break
    return {"docs": docs}


NAMES = ("cjk_esc", "mb_esc", "cjk_utf8", "mb_utf8")


def run_grammask(binary, tokenizer, path):
    """One cold `walk` (a fresh process: first visits included); its mask statistics."""
    out = subprocess.run(
        [binary, "walk", "--json", "--format", "json", "--tokenizer", tokenizer, "--input", path],
        check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    assert d["accepted"] and d["eos_allowed"], f"{binary} refused {path}"
    return d["n_tokens"], d["mask_us"]


def run_llg(llg, tokenizer, out_dir, runs):
    """llg-bench on the four workloads (escaped ones with general \\u escapes allowed)."""
    res = os.path.join(out_dir, "llg.json")
    cmd = [llg, "--tokenizer", tokenizer, "--workloads", out_dir, "--runs", str(runs),
           "--modes", "default", "--out", res]
    for n in NAMES:
        cmd += ["--workload", n + ("+uesc" if n.endswith("_esc") else "")]
    subprocess.run(cmd, check=True, capture_output=True)
    with open(res) as f:
        d = json.load(f)
    found = {}
    for w in d["workloads"]:
        found[w["workload"].replace("+uesc", "")] = w["modes"]["default"]["mask_us"]
    return found


def bench(a):
    """Alternating rounds: each grammask binary, then llguidance, on the same four files."""
    rows = []
    for r in range(a.rounds):
        for label, binary in a.grammask:
            for n in NAMES:
                toks, m = run_grammask(binary, a.tokenizer, os.path.join(a.out, n + ".target.json"))
                rows.append((r, n, label, toks, m))
        if a.llg:
            for n, m in run_llg(a.llg, a.tokenizer, a.out, a.llg_runs).items():
                rows.append((r, n, "llguidance", None, m))
    print("| document | engine | round | mean | p50 | p99 | max |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for n in NAMES:
        for r, n2, label, _, m in sorted(rows, key=lambda x: (x[2], x[0])):
            if n2 == n:
                print(f"| {n} | {label} | {r + 1} | {m['mean']:.2f} | {m['p50']:.2f} | "
                      f"{m['p99']:.2f} | {m['max']:.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", default="../shared/maskbench-dev")
    ap.add_argument("--limit", type=int, default=6000, help="bytes of MaskBench text")
    ap.add_argument("--out", default="target/escape-docs")
    ap.add_argument("--grammask", nargs=2, action="append", metavar=("LABEL", "BINARY"),
                    help="after writing, walk the documents with this grammask binary "
                         "(repeatable: binaries alternate within each round)")
    ap.add_argument("--llg", help="llg-bench binary to run side by side")
    ap.add_argument("--tokenizer", default="../shared/tokenizers/llama3.json")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--llg-runs", type=int, default=3, help="llg-bench --runs (after a warm-up)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    mb = maskbench_docs(a.files, a.limit)
    for name, doc in (("cjk", synthetic()), ("mb", mb)):
        for suffix, ascii_ in (("esc", True), ("utf8", False)):
            base = os.path.join(a.out, f"{name}_{suffix}")
            with open(base + ".schema.json", "w") as f:
                f.write('{"type": "object"}\n')
            with open(base + ".target.json", "w", encoding="utf-8") as f:
                f.write(json.dumps(doc, ensure_ascii=ascii_) + "\n")
    print(f"{len(mb['docs'])} MaskBench documents; workloads in {a.out}")
    if a.grammask or a.llg:
        bench(a)


if __name__ == "__main__":
    main()
