#!/usr/bin/env python3
"""Re-judge `grammask fuzz` instances with Python's `jsonschema`, and compare grammask side by
side with hypothesis-jsonschema and json-schema-faker on the same MaskBench schemas (out of CI).

Why: the bench `benches/fuzz_maskbench.rs` judges grammask's instances with the Rust `jsonschema`
crate. A second, independent validator (Python `jsonschema`, the reference implementation of
the spec's test suite) tells validator quirks from generator bugs; and "99.9 % valid" means
little without the same figure for the generators people already use. So this script:

1. re-judges a bench `--out` JSONL (one line per schema: `{"file", "instances": [{"instance",
   "valid", "violates"?}], "seconds"}`): valid instances and near misses with the Draft's
   `FORMAT_CHECKER` (formats asserted, as the engine and the bench assert them), with the Draft validator the
   schema asks for (`jsonschema.validators.validator_for`, 2020-12 when it says nothing);
   it counts valid accepted, near misses rejected, distinct valid, and lists every disagreement;
2. runs hypothesis-jsonschema (`from_schema`, up to N distinct examples through a `@given` loop)
   and json-schema-faker (`scripts/jsf_gen.mjs`, one long-running node process) on the same
   schemas (every `--stride`-th file in sorted order, as the bench takes them), each with a
   `--limit-seconds` cap per schema, judges their instances the same way, and prints one
   Markdown table: share of schemas generated for (>= 1 instance) and with all N, validity
   rate, distinct rate, instances/s (generation time only), near misses (grammask only).
   `--rows FILE` writes the per-schema, per-tool rows as JSONL.

grammask's instances come from the bench's `--out` file (`--bench-out FILE`); without the bench,
`--grammask-cli BIN` runs `grammask fuzz` once per schema (the schema extracted to a temp file)
and builds the same rows (its seconds are the CLI's own fuzz time: tokenizer load and compile
excluded, where the bench's include the compile). A schema the bench wrote no line for (it did
not compile, its fuzz run failed, or the Rust validator could not be built) counts as one
grammask generated nothing for.

Install (once; the venv and node_modules live under target/, which git ignores):

    python3 -m venv target/fuzzvenv
    target/fuzzvenv/bin/pip install "jsonschema[format-nongpl]" "hypothesis==6.170.9" \\
        hypothesis-jsonschema
    npm install --prefix target/jsf json-schema-faker

`jsonschema[format-nongpl]` pulls in the format checkers' optional dependencies
(rfc3339-validator, rfc3986-validator, fqdn, idna, ...): without them `FormatChecker` silently
passes `date-time`, `uri`, `hostname` and others, and the valid-instance judging would be
weaker than the bench's. hypothesis is pinned: hypothesis 6.170.10 changed an internal API that
hypothesis-jsonschema 0.23.1 uses (`cu.many(...).more()`), and every object schema then fails
with `AttributeError: 'many' object has no attribute 'more'`.

Run (from the repository root):

    # re-judge only, from the bench's --out file
    target/fuzzvenv/bin/python scripts/fuzz_compare.py --bench-out instances.jsonl \\
        --tools grammask [--stride 1]
    # side by side, grammask from the bench's --out file
    nice -n 10 target/fuzzvenv/bin/python scripts/fuzz_compare.py --bench-out instances.jsonl \\
        --stride 1 --limit-seconds 10 --rows rows.jsonl > table.md
    # side by side without the bench: grammask's CLI per schema
    nice -n 10 target/fuzzvenv/bin/python scripts/fuzz_compare.py \\
        --grammask-cli target/release/grammask --stride 100 --limit-seconds 10 \\
        --rows rows.jsonl > table.md

The node_modules folder is `--node-modules DIR`, else `$JSF_NODE_MODULES`, else
`target/jsf/node_modules` under the repository root; node is `--node BIN` (default `node`).
"""

import argparse
import json
import multiprocessing
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTALL = (
    "install with:\n"
    "  python3 -m venv target/fuzzvenv\n"
    '  target/fuzzvenv/bin/pip install "jsonschema[format-nongpl]" "hypothesis==6.170.9" '
    "hypothesis-jsonschema\n"
    "  npm install --prefix target/jsf json-schema-faker\n"
    "and run this script with target/fuzzvenv/bin/python"
)

try:
    import jsonschema
    from jsonschema.validators import validator_for
except ImportError as e:  # pragma: no cover - install hint
    sys.exit(f"fuzz_compare.py needs Python's jsonschema ({e}); {INSTALL}")


def version(dist):
    try:
        from importlib.metadata import version as v

        return v(dist)
    except Exception:
        return "not installed"


def _norm(v):
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_norm(x) for x in v]
    return v


def canon(value):
    """The instance as canonical JSON text: values JSON Schema calls equal (key order aside,
    `1.0` and `1` alike) are one instance."""
    return json.dumps(_norm(value), sort_keys=True, ensure_ascii=False, allow_nan=True)


# ---------------------------------------------------------------------------------------------
# Judging


class Judge:
    """Python jsonschema validators for one schema: with formats (what instances are judged
    by) and without (`check(..., formats=False)`), the Draft the schema's `$schema` names (2020-12 otherwise)."""

    def __init__(self, schema):
        self.error = None
        try:
            cls = validator_for(schema, default=jsonschema.Draft202012Validator)
            self.draft = cls.__name__
            # The Draft's own checker: a bare FormatChecker() holds every Draft's formats, and
            # its `time` is Draft 3's (HH:MM:SS, no offset), which refuses "22:28:40Z".
            self.strict = cls(schema, format_checker=cls.FORMAT_CHECKER)
            self.lenient = cls(schema)
        except Exception as e:
            self.error = f"{type(e).__name__}: {str(e)[:200]}"

    def check(self, value, formats=True):
        """True/False, or None when the validator cannot decide (bad regex, unresolvable
        `$ref`, ...)."""
        try:
            return (self.strict if formats else self.lenient).is_valid(value)
        except Exception:
            return None

    def why(self, value):
        try:
            e = jsonschema.exceptions.best_match(self.strict.iter_errors(value))
            return None if e is None else f"{e.validator} at {e.json_path}: {e.message[:160]}"
        except Exception as x:
            return f"{type(x).__name__}: {str(x)[:160]}"


def judge_valid(judge, values):
    """(valid, undecided, distinct, rejected examples) for instances meant to be valid."""
    valid = undecided = 0
    seen = set()
    rejected = []
    for v in values:
        seen.add(canon(v))
        ok = judge.check(v, formats=True)
        if ok is None:
            undecided += 1
        elif ok:
            valid += 1
        else:
            rejected.append({"instance": v, "why": judge.why(v)})
    return valid, undecided, len(seen), rejected


# ---------------------------------------------------------------------------------------------
# Schemas


def schema_files(folder, stride):
    names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    return names[:: max(1, stride)]


def load_schema(folder, name):
    try:
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            return json.load(f)["schema"], None
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------------------------------------
# grammask


def grammask_rows_from_out(path):
    """{file: bench line} from a bench --out JSONL."""
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                rows[d["file"]] = d
    return rows


def grammask_cli(binary, tokenizer, schema, n, k, seed, timeout):
    """One bench-style line from `grammask fuzz` on one schema, or an error string."""
    with tempfile.TemporaryDirectory(prefix="fuzz_compare_") as tmp:
        sp, op = os.path.join(tmp, "schema.json"), os.path.join(tmp, "out.jsonl")
        with open(sp, "w", encoding="utf-8") as f:
            json.dump(schema, f)
        cmd = [binary, "fuzz", "--schema", sp, "--tokenizer", tokenizer, "--n", str(n),
               "--invalid", str(k), "--seed", str(seed), "--out", op]
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"timeout after {timeout} s"
        wall = time.monotonic() - t0
        if p.returncode != 0:
            return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1][:300]
        secs = wall
        for line in p.stderr.splitlines():  # "0.052 s (2306 instances/s)"
            parts = line.split()
            if len(parts) >= 2 and parts[1] == "s" and "instances/s)" in line:
                try:
                    secs = float(parts[0])
                except ValueError:
                    pass
        with open(op, encoding="utf-8") as f:
            inst = [json.loads(line) for line in f if line.strip()]
        return {"instances": inst, "seconds": secs, "wall_seconds": wall}, None


def grammask_row(name, judge, line, err, n, limit_list):
    row = {"tool": "grammask", "file": name}
    if line is None:
        row.update(generated=0, error=err or "no line in --out (no compile / fuzz error)")
        return row, []
    valid_i = [i["instance"] for i in line["instances"] if i.get("valid")]
    miss_i = [i for i in line["instances"] if not i.get("valid")]
    row.update(generated=len(valid_i), seconds=line.get("seconds"), error=None)
    if "wall_seconds" in line:
        row["wall_seconds"] = line["wall_seconds"]
    disagreements = []
    if judge.error:
        row["judge_error"] = judge.error
        return row, disagreements
    ok, und, distinct, rejected = judge_valid(judge, valid_i)
    row.update(valid=ok, undecided=und, distinct=distinct)
    # the bench's count: instance texts in their key order (serde_json's preserve_order)
    row["distinct_key_order"] = len({json.dumps(v, ensure_ascii=False) for v in valid_i})
    for r in rejected:
        disagreements.append({"file": name, "instance": r["instance"], "valid": True,
                              "python_says": r["why"]})
    rej = m_und = 0
    for i in miss_i:
        # formats asserted, as for valid instances and as the engine does (a near miss of an
        # `anyOf` whose other branch is a `format` is one only where the format is asserted)
        verdict = judge.check(i["instance"])
        if verdict is None:
            m_und += 1
        elif not verdict:
            rej += 1
        else:
            disagreements.append({"file": name, "instance": i["instance"], "valid": False,
                                  "violates": i.get("violates"),
                                  "python_says": "accepted"})
    row.update(near_misses=len(miss_i), near_misses_rejected=rej, near_misses_undecided=m_und)
    row["disagreements"] = len(disagreements)
    return row, disagreements


# ---------------------------------------------------------------------------------------------
# hypothesis-jsonschema (in a forked child per schema, so a hang costs only its time cap)


class _Stop(BaseException):
    """Ends the @given loop (a BaseException, so Hypothesis does not treat it as a failure to
    shrink)."""


def _hypothesis_child(schema, n, limit, conn):
    import warnings

    warnings.simplefilter("ignore")
    from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
    from hypothesis_jsonschema import from_schema

    seen, draws, t0 = {}, [0], time.monotonic()

    def alarm(*_):
        raise _Stop

    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    error = None
    try:
        strategy = from_schema(schema)

        @seed(1)
        @settings(max_examples=20 * n, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck), phases=[Phase.generate],
                  verbosity=Verbosity.quiet)
        @given(strategy)
        def body(value):
            draws[0] += 1
            seen.setdefault(canon(value), value)
            if len(seen) >= n or time.monotonic() - t0 > limit:
                raise _Stop

        body()
    except _Stop:
        pass
    except Exception as e:
        error = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
    signal.setitimer(signal.ITIMER_REAL, 0)
    secs = time.monotonic() - t0
    if not seen and error is None:
        error = (f"no example within the {limit:g} s cap" if secs >= limit
                 else "no example (search space empty or every draw rejected)")
    conn.send({"instances": list(seen.values()), "draws": draws[0], "seconds": secs,
               "error": error if not seen else (None if error is None else "after some: " + error)})
    conn.close()


def _judge_child(args, conn):
    conn.send(grammask_row(*args))
    conn.close()


def run_forked(target, args, limit):
    """`target(*args, conn)` in a forked child that sends one answer through `conn`; the answer,
    or `(None, exitcode)` when none came within `limit` seconds (the child is then killed)."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=target, args=(*args, child))
    p.start()
    child.close()
    res = None
    if parent.poll(limit):
        try:
            res = parent.recv()
        except EOFError:
            res = None
    p.join(5)
    if p.is_alive():
        p.kill()
        p.join()
    return res, p.exitcode


def grammask_row_capped(name, judge, line, err, n, limit):
    """`grammask_row` in a forked child, killed after `limit` seconds: Python's `re`
    backtracks exponentially on some schema patterns (`Github_medium---o82682`'s
    `^(https?:\\/\\/)?([\\da-z\\.-]+)\\.([a-z\\.]{2,6})([\\/\\w \\.-]*)*\\/?$` on a near miss ran
    for minutes), which would stall the whole re-judging."""
    res, _ = run_forked(_judge_child, ((name, judge, line, err, n, None),), limit)
    if res is None:
        valid_i = [i for i in (line or {}).get("instances", []) if i.get("valid")]
        row = {"tool": "grammask", "file": name, "generated": len(valid_i),
               "seconds": (line or {}).get("seconds"), "error": None,
               "judge_error": f"the judge gave no verdict within {limit:g} s (regex backtracking?)"}
        return row, []
    return res


def hypothesis_run(schema, n, limit):
    t0 = time.monotonic()
    res, exitcode = run_forked(_hypothesis_child, (schema, n, limit), limit + 15)
    if res is None:
        res = {"instances": [], "draws": 0, "seconds": time.monotonic() - t0,
               "error": "killed: no answer within the time cap"
               if exitcode in (None, -9) else f"child died (exit {exitcode})"}
    return res


# ---------------------------------------------------------------------------------------------
# json-schema-faker (one node process, restarted after a hang)


class Jsf:
    def __init__(self, node, node_modules):
        self.cmd = [node, os.path.join(REPO, "scripts", "jsf_gen.mjs"), node_modules]
        self.p = None

    def start(self):
        self.p = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, bufsize=1)

    def stop(self):
        if self.p is not None:
            self.p.kill()
            self.p.wait()
            self.p = None

    def run(self, schema, n, limit):
        if self.p is None or self.p.poll() is not None:
            self.start()
        req = json.dumps({"schema": schema, "n": n, "seed": 1, "limit_ms": int(limit * 1000)})
        t0 = time.monotonic()
        try:
            self.p.stdin.write(req + "\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            err = self.p.stderr.read()
            self.stop()
            return {"instances": [], "seconds": 0, "error": f"node died: {err.strip()[:300]}"}
        ready, _, _ = select.select([self.p.stdout], [], [], limit + 10)
        if not ready:
            self.stop()
            return {"instances": [], "seconds": time.monotonic() - t0,
                    "error": "killed: no answer within the time cap (node restarted)"}
        line = self.p.stdout.readline()
        if not line:
            err = self.p.stderr.read()
            self.stop()
            return {"instances": [], "seconds": time.monotonic() - t0,
                    "error": f"node died: {err.strip()[:300]}"}
        return json.loads(line)


def judged_row(tool, name, judge, res, n):
    row = {"tool": tool, "file": name, "generated": len(res["instances"]),
           "seconds": res["seconds"], "error": res.get("error")}
    for key in ("draws", "errors"):
        if key in res:
            row[key] = res[key]
    if judge.error:
        row["judge_error"] = judge.error
        return row, []
    ok, und, distinct, rejected = judge_valid(judge, res["instances"])
    row.update(valid=ok, undecided=und, distinct=distinct)
    row["rejected_examples"] = rejected[:3]
    return row, rejected


# ---------------------------------------------------------------------------------------------
# Report


def summary(tool, rows, n):
    s = {"tool": tool, "schemas": len(rows)}
    s["generated_for"] = sum(1 for r in rows if r.get("generated", 0) > 0)
    s["all_n"] = sum(1 for r in rows if r.get("generated", 0) >= n)
    judged = [r for r in rows if "valid" in r]
    s["instances"] = sum(r["generated"] for r in judged)
    s["valid"] = sum(r["valid"] for r in judged)
    s["undecided"] = sum(r["undecided"] for r in judged)
    s["distinct"] = sum(r["distinct"] for r in judged)
    # hypothesis keeps distinct values only: its distinct rate is distinct / draws
    s["draws"] = sum(r.get("draws", r["generated"]) for r in judged)
    s["unjudged_schemas"] = sum(1 for r in rows if r.get("generated", 0) > 0 and "valid" not in r)
    gen = [r for r in rows if r.get("generated", 0) > 0]
    s["gen_instances"] = sum(r["generated"] for r in gen)
    s["gen_seconds"] = sum(r.get("seconds") or 0 for r in gen)
    s["all_invalid_seconds"] = sum(r.get("seconds") or 0 for r in rows)
    s["schemas_invalid"] = sum(1 for r in judged if r["valid"] + r["undecided"] < r["generated"])
    if tool == "grammask":
        s["distinct_key_order"] = sum(r.get("distinct_key_order", 0) for r in judged)
        s["near_misses"] = sum(r.get("near_misses", 0) for r in judged)
        s["near_misses_rejected"] = sum(r.get("near_misses_rejected", 0) for r in judged)
    return s


def pct(a, b):
    return "–" if b == 0 else f"{100.0 * a / b:.1f} %"


def table(sums, n):
    out = ["| tool | generates for (≥ 1) | all " + str(n) + " | valid / instances (Python "
           "jsonschema, formats) | schemas with an invalid instance | distinct | instances/s "
           "(generation only) | near misses rejected |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in sums:
        ips = s["gen_instances"] / s["gen_seconds"] if s["gen_seconds"] > 0 else 0
        nm = (f"{s['near_misses_rejected']:,} / {s['near_misses']:,} "
              f"({pct(s['near_misses_rejected'], s['near_misses'])})"
              if "near_misses" in s else "– (makes none)")
        und = f", {s['undecided']} undecided" if s["undecided"] else ""
        unj = f", {s['unjudged_schemas']} schemas unjudged" if s["unjudged_schemas"] else ""
        dist = (f"{s['distinct']:,} / {s['draws']:,} draws ({pct(s['distinct'], s['draws'])})"
                if s["tool"] == "hypothesis-jsonschema"
                else f"{s['distinct']:,} / {s['instances']:,} ({pct(s['distinct'], s['instances'])})")
        if "distinct_key_order" in s:
            dist += f"; {s['distinct_key_order']:,} with key order"
        out.append(
            f"| {s['tool']} | {s['generated_for']} / {s['schemas']} "
            f"({pct(s['generated_for'], s['schemas'])}) | {s['all_n']} / {s['schemas']} "
            f"({pct(s['all_n'], s['schemas'])}) | {s['valid']:,} / {s['instances']:,} "
            f"({pct(s['valid'], s['instances'])}{und}{unj}) | {s['schemas_invalid']} | {dist} | "
            f"{ips:,.0f} | {nm} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] + "\n\nSee the header of this file for why, the "
        "install commands and examples.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join(REPO, "..", "shared", "maskbench-dev"),
                    help="folder of MaskBench JSON files, schema under \"schema\" "
                    "(default: ../shared/maskbench-dev)")
    ap.add_argument("--stride", type=int, default=1,
                    help="every S-th file in sorted order, as the bench's --stride (default 1)")
    ap.add_argument("--limit", type=int, default=None, help="only the first K selected files")
    ap.add_argument("--n", type=int, default=100, help="instances wanted per schema (default 100)")
    ap.add_argument("--limit-seconds", type=float, default=10.0,
                    help="time cap per schema per tool for hypothesis-jsonschema and "
                    "json-schema-faker (default 10)")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--bench-out", metavar="FILE",
                     help="grammask's instances: the JSONL that `cargo bench --bench "
                     "fuzz_maskbench -- ... --out FILE` wrote (same --stride!)")
    src.add_argument("--grammask-cli", metavar="BIN",
                     help="instead of --bench-out: run `BIN fuzz` once per schema")
    ap.add_argument("--tokenizer", default=os.path.join(REPO, "..", "shared", "tokenizers",
                                                        "llama3.json"),
                    help="tokenizer for --grammask-cli (default ../shared/tokenizers/llama3.json)")
    ap.add_argument("--invalid", type=int, default=20, help="near misses for --grammask-cli")
    ap.add_argument("--seed", type=int, default=1, help="seed for --grammask-cli (default 1)")
    ap.add_argument("--grammask-timeout", type=float, default=120,
                    help="seconds before a --grammask-cli run is killed (the bench has no cap; "
                    "default 120)")
    ap.add_argument("--save-out", metavar="FILE",
                    help="with --grammask-cli: also write the bench-style --out JSONL here")
    ap.add_argument("--judge-seconds", type=float, default=60,
                    help="seconds the judge may take over one schema's grammask instances "
                    "(a forked child; default 60)")
    ap.add_argument("--tools", default="grammask,hypothesis,jsf",
                    help="comma list of grammask, hypothesis, jsf (default all; "
                    "`--tools grammask` only re-judges)")
    ap.add_argument("--node-modules", default=os.environ.get(
        "JSF_NODE_MODULES", os.path.join(REPO, "target", "jsf", "node_modules")),
        help="node_modules holding json-schema-faker ($JSF_NODE_MODULES, default "
        "target/jsf/node_modules)")
    ap.add_argument("--node", default="node", help="node executable (default node)")
    ap.add_argument("--rows", metavar="FILE", help="write per-schema, per-tool rows here (JSONL)")
    ap.add_argument("--max-listed", type=int, default=40,
                    help="disagreements / invalid instances printed (all go to --rows)")
    a = ap.parse_args()

    tools = [t.strip() for t in a.tools.split(",") if t.strip()]
    for t in tools:
        if t not in ("grammask", "hypothesis", "jsf"):
            ap.error(f"unknown tool {t!r}")
    if "grammask" in tools and not (a.bench_out or a.grammask_cli):
        ap.error("grammask needs --bench-out FILE or --grammask-cli BIN (or leave it out of --tools)")
    if "hypothesis" in tools:
        try:
            import hypothesis_jsonschema  # noqa: F401
        except ImportError as e:
            sys.exit(f"hypothesis-jsonschema is missing ({e}); {INSTALL}")
    if "jsf" in tools:
        if not os.path.exists(os.path.join(a.node_modules, "json-schema-faker", "package.json")):
            sys.exit(f"json-schema-faker not found under {a.node_modules} (--node-modules DIR or "
                     f"$JSF_NODE_MODULES); {INSTALL}")
    try:
        import rfc3339_validator  # noqa: F401
    except ImportError:
        print("warning: rfc3339-validator is missing, so date-time is not format-checked; "
              'pip install "jsonschema[format-nongpl]"', file=sys.stderr)

    files = schema_files(a.dir, a.stride)
    if a.limit:
        files = files[: a.limit]
    bench = grammask_rows_from_out(a.bench_out) if a.bench_out else None
    if bench is not None:
        extra = sorted(set(bench) - set(files))
        if extra:
            print(f"warning: {len(extra)} files in --bench-out are not in the selection "
                  f"(different --stride?), e.g. {extra[0]}", file=sys.stderr)
    jsf = Jsf(a.node, a.node_modules) if "jsf" in tools else None
    save = open(a.save_out, "w", encoding="utf-8") if a.save_out else None
    rows_f = open(a.rows, "w", encoding="utf-8") if a.rows else None
    names = {"grammask": "grammask", "hypothesis": "hypothesis-jsonschema",
             "jsf": "json-schema-faker"}
    per_tool = {t: [] for t in tools}
    disagreements, invalid = [], {"hypothesis": [], "jsf": []}
    t_start = time.monotonic()
    for idx, name in enumerate(files):
        schema, err = load_schema(a.dir, name)
        judge = Judge(schema) if schema is not None else None
        line_out = []
        for t in tools:
            if schema is None:
                row = {"tool": names[t], "file": name, "generated": 0, "error": err}
            elif t == "grammask":
                if bench is not None:
                    line, gerr = bench.get(name), None
                else:
                    line, gerr = grammask_cli(a.grammask_cli, a.tokenizer, schema, a.n,
                                              a.invalid, a.seed, a.grammask_timeout)
                    if save and line is not None:
                        save.write(json.dumps({"file": name, "instances": line["instances"],
                                               "seconds": line["seconds"]}) + "\n")
                row, dis = grammask_row_capped(name, judge, line, gerr, a.n, a.judge_seconds)
                disagreements.extend(dis)
            elif t == "hypothesis":
                row, rej = judged_row(names[t], name, judge, hypothesis_run(schema, a.n,
                                                                            a.limit_seconds), a.n)
                invalid[t].extend({"file": name, **r} for r in rej)
            else:
                row, rej = judged_row(names[t], name, judge, jsf.run(schema, a.n,
                                                                     a.limit_seconds), a.n)
                invalid[t].extend({"file": name, **r} for r in rej)
            if judge is not None and not judge.error:
                row["draft"] = judge.draft
            per_tool[t].append(row)
            if rows_f:
                rows_f.write(json.dumps(row, ensure_ascii=False) + "\n")
            line_out.append(f"{t} {row.get('valid', '-')}/{row.get('generated', 0)}")
        print(f"[{idx + 1}/{len(files)} {time.monotonic() - t_start:.0f} s] {name}: "
              + ", ".join(line_out), file=sys.stderr, flush=True)
    if jsf:
        jsf.stop()
    if save:
        save.close()
    if rows_f:
        rows_f.close()

    sums = [summary(names[t], per_tool[t], a.n) for t in tools]
    print(f"## fuzz_compare: {len(files)} schemas (every {a.stride}th of {a.dir}), "
          f"{a.n} instances wanted, cap {a.limit_seconds:g} s per schema per tool\n")
    print(f"judge: Python jsonschema {version('jsonschema')} (rfc3339-validator "
          f"{version('rfc3339-validator')}); hypothesis {version('hypothesis')}, "
          f"hypothesis-jsonschema {version('hypothesis-jsonschema')}; json-schema-faker "
          f"{jsf_version(a.node_modules) if 'jsf' in tools else '-'}; grammask from "
          f"{a.bench_out or a.grammask_cli}\n")
    print(table(sums, a.n))
    print("\nhypothesis-jsonschema keeps distinct values only (its distinct column is distinct "
          "values / draws); grammask's instances and distinct count valid instances, near misses "
          "apart; distinct ignores key order and `1.0` vs `1` (\"with key order\" is the bench's "
          "count); instances/s pools the generation seconds of the schemas a tool generated for.")
    if "grammask" in tools:
        print(f"\n### grammask disagreements with Python jsonschema: {len(disagreements)}\n")
        for d in disagreements[: a.max_listed]:
            print(f"- {d['file']}: {'valid' if d['valid'] else 'near miss'} "
                  f"{json.dumps(d['instance'], ensure_ascii=False)[:300]}"
                  + (f" violates {d['violates']}" if d.get("violates") else "")
                  + f" — Python: {d['python_says']}")
    for t in ("hypothesis", "jsf"):
        if t in tools:
            errs = [r for r in per_tool[t] if r.get("generated", 0) == 0]
            print(f"\n### {names[t]}: {len(invalid[t])} invalid instances, "
                  f"{len(errs)} schemas without any instance\n")
            for d in invalid[t][: a.max_listed // 2]:
                print(f"- {d['file']}: {json.dumps(d['instance'], ensure_ascii=False)[:200]} — "
                      f"{d['why']}")
            for r in errs[: a.max_listed // 2]:
                print(f"- {r['file']}: no instance: {r.get('error')}")


def jsf_version(node_modules):
    try:
        with open(os.path.join(node_modules, "json-schema-faker", "package.json")) as f:
            return json.load(f)["version"]
    except Exception:
        return "unknown"


if __name__ == "__main__":
    main()
