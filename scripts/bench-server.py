"""Throughput and time-to-first-token of `grammask serve` (issue 16's targets; the table is in
docs/performance.md). Starts the server itself on a free loopback port.

usage: target/servervenv/bin/python scripts/bench-server.py [--bin target/server/grammask]
       [--model ../shared/models/smollm2-135m-instruct-q4_1.gguf] [--tokens 96] [--no-batch]
       [--kernel avx2|avx512-vnni] [--rounds 2] [--skip-ttft]
"""

import argparse
import json
import os
import statistics
import socket
import subprocess
import threading
import time
import urllib.request

import openai

p = argparse.ArgumentParser()
p.add_argument("--bin", default="target/server/grammask")
p.add_argument("--model", default="../shared/models/smollm2-135m-instruct-q4_1.gguf")
p.add_argument("--tokens", type=int, default=96)
p.add_argument("--rounds", type=int, default=2)
p.add_argument("--no-batch", action="store_true")
p.add_argument("--skip-ttft", action="store_true")
p.add_argument("--batch-wait-ms", type=int, default=3)
p.add_argument("--kernel", help="the server's --kernel (default: the best the CPU has)")
args = p.parse_args()

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
# The served name is the model file's stem; a request naming another model is a 404.
NAME = os.path.splitext(os.path.basename(args.model))[0]
cmd = [args.bin, "serve", "--model", args.model, "--port", str(port), "--max-concurrent", "16"]
cmd += ["--batch-wait-ms", str(args.batch_wait_ms)]
if args.no_batch:
    cmd.append("--no-batch")
if args.kernel:
    cmd += ["--kernel", args.kernel]
proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
url = f"http://127.0.0.1:{port}"
for _ in range(300):
    try:
        urllib.request.urlopen(url + "/health", timeout=1)
        break
    except OSError:
        time.sleep(0.1)
client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=600)
LONG = ("The old lighthouse keeper walked along the shore every morning, counting the boats "
        "that came back from the sea and writing their names in a worn notebook. ") * 6


def stream(prompt, constrained, seed):
    kw = dict(model=NAME, messages=[{"role": "user", "content": prompt}], stream=True,
              max_tokens=args.tokens, temperature=0.8, seed=seed,
              stream_options={"include_usage": True})
    if constrained == "schema":
        # A story string at least 2,000 characters long: every stream runs to max_tokens, as
        # the unconstrained ones do, so the two rates compare the same work.
        kw["response_format"] = {"type": "json_schema", "json_schema": {
            "name": "story", "strict": True, "schema": {
                "type": "object", "properties": {"story": {"type": "string", "minLength": 2000}},
                "required": ["story"], "additionalProperties": False}}}
    elif constrained:
        kw["response_format"] = {"type": "json_object"}
    t0 = time.perf_counter()
    first, tokens = None, 0
    for ch in client.chat.completions.create(**kw):
        if ch.choices and ch.choices[0].delta.content and first is None:
            first = time.perf_counter() - t0
        if ch.usage:
            tokens = ch.usage.completion_tokens
    return tokens, first, time.perf_counter() - t0


# Unconstrained, this prompt runs to max_tokens (96) for each of the eight seeds, as the long
# string of the json_schema rows does: the rates then compare the same number of tokens.
def run(n, constrained, prompt="Write a long story about a dragon who guards a mountain "
        "village. Use at least five paragraphs.", stagger=0.0):
    out = [None] * n

    def go(i):
        time.sleep(i * stagger)
        out[i] = stream(prompt if isinstance(prompt, str) else prompt(i), constrained, seed=i + 1)

    t0 = time.perf_counter()
    ts = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    run.tokens.append(sum(o[0] for o in out) / n)
    return sum(o[0] for o in out) / wall, [o[1] for o in out if o[1] is not None]


run.tokens = []


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))] if xs else float("nan")


stream("warm up", False, 0)
# The rows alternate within each round and each row's figure is the median of its rounds:
# this shared machine drifts by 10-30% over minutes, which a row measured all at once, then
# the next, would read as a difference between them.
ROWS = [("1 stream, unconstrained", 1, False), ("8 streams, unconstrained", 8, False),
        ("1 stream, json_object", 1, True), ("8 streams, json_object", 8, True),
        ("1 stream, json_schema (long string)", 1, "schema"),
        ("8 streams, json_schema (long string)", 8, "schema")]
rates = {name: [] for name, _, _ in ROWS}
tokens = {name: [] for name, _, _ in ROWS}
for _ in range(args.rounds):
    for name, n, c in ROWS:
        run.tokens = []
        rates[name].append(run(n, c)[0])
        tokens[name] += run.tokens
rows = {name: statistics.median(v) for name, v in rates.items()}
tokens_per_stream = {name: sum(v) / len(v) for name, v in tokens.items()}
ttft_burst, ttft_stagger = [], []
# Eight different prompts of the same length (a cache of shared prefixes could not serve one
# from another's work).
def ttft_prompt(i):
    return f"Logbook {i + 1}. " + LONG + " Summarise this as JSON."
for _ in range(0 if args.skip_ttft else args.rounds):
    ttft_burst += run(8, True, prompt=ttft_prompt)[1]
    ttft_stagger += run(8, True, prompt=ttft_prompt, stagger=0.4)[1]
prompt_tokens = client.chat.completions.create(
    model=NAME, messages=[{"role": "user", "content": ttft_prompt(0)}],
    max_tokens=1).usage.prompt_tokens
with urllib.request.urlopen(url + "/metrics") as r:
    m = {l.split()[0]: float(l.split()[1]) for l in r.read().decode().splitlines()
         if l.startswith("grammask_batch_sequences_")}
rows["mean sequences per forward step"] = (m["grammask_batch_sequences_sum"]
                                           / m["grammask_batch_sequences_count"])
proc.terminate()
proc.wait()
print(json.dumps({"mode": "interleaved" if args.no_batch else "batched",
                  "kernel": args.kernel or "best", "rows": rows,
                  "scaling_8_vs_1": rows["8 streams, unconstrained"] / rows["1 stream, unconstrained"],
                  "rounds": {name: [round(r, 1) for r in v] for name, v in rates.items()},
                  "mean_completion_tokens_per_stream": tokens_per_stream,
                  "constrained_vs_unconstrained_8": rows["8 streams, json_schema (long string)"]
                  / rows["8 streams, unconstrained"],
                  "json_object_vs_unconstrained_8": rows["8 streams, json_object"]
                  / rows["8 streams, unconstrained"],
                  "ttft_prompt_tokens": prompt_tokens,
                  "ttft_p99_s_8_at_once": p99(ttft_burst),
                  "ttft_p99_s_8_staggered_0.4s": p99(ttft_stagger)}, indent=1))
