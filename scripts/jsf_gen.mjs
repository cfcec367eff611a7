// json-schema-faker worker for scripts/fuzz_compare.py (out of CI).
//
// Why: json-schema-faker is a JavaScript library, and starting node once per schema costs more
// than generating; so one long-running process reads requests line by line on stdin and answers
// each with one JSON line on stdout, in order. fuzz_compare.py kills and restarts it when an
// answer does not come within its per-schema time cap.
//
//   request:  {"schema": <schema>, "n": 100, "seed": 1, "limit_ms": 10000}
//   answer:   {"instances": [<value>, ...], "seconds": S, "errors": K, "error": "first message"|null}
//
// Options (what a typical user sets): seed 1, with createGenerator's auto-incrementing seed per
// instance (so 100 calls give 100 different draws); alwaysFakeOptionals false (optional
// properties with the default probability 0.5); useExamplesValue false and useDefaultValue false
// (no copying of the schema's examples/defaults); resolveJsonPath false (jsf's x-jsonPath
// cross-references, not `$ref`); local `$ref`s (`#/$defs/...`, `#/definitions/...`) are resolved
// by jsf itself; no refResolver, so a remote `$ref` is an error (nothing here reaches the
// network). Everything else is jsf's default (maxDepth 5, maxDefaultItems 3, refDepth 1..5).
//
// Install: npm install --prefix target/jsf json-schema-faker
// Run:     node scripts/jsf_gen.mjs target/jsf/node_modules   (or JSF_NODE_MODULES=...)
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import path from "node:path";

const dir = process.argv[2] || process.env.JSF_NODE_MODULES || "target/jsf/node_modules";
const entry = path.resolve(dir, "json-schema-faker", "dist", "index.js");
let jsf;
try {
  jsf = await import(pathToFileURL(entry).href);
} catch (e) {
  process.stderr.write(`cannot load json-schema-faker from ${entry}: ${e.message}\n` +
    "install it with: npm install --prefix target/jsf json-schema-faker\n");
  process.exit(2);
}

const OPTIONS = {
  alwaysFakeOptionals: false,
  useExamplesValue: false,
  useDefaultValue: false,
  resolveJsonPath: false,
};

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    process.stdout.write(JSON.stringify({ instances: [], seconds: 0, errors: 1, error: `bad request: ${e.message}` }) + "\n");
    continue;
  }
  const n = req.n ?? 100;
  const limit = req.limit_ms ?? 10000;
  const out = [];
  let errors = 0, first = null;
  const t0 = performance.now();
  const gen = jsf.createGenerator({ ...OPTIONS, seed: req.seed ?? 1 });
  for (let i = 0; i < n; i++) {
    if (performance.now() - t0 > limit) break;
    try {
      const v = await gen.generate(req.schema);
      const text = JSON.stringify(v);
      if (text === undefined) throw new Error("generated a value JSON cannot hold (undefined)");
      out.push(v);
    } catch (e) {
      errors++;
      if (first === null) first = String(e && e.message || e).slice(0, 300);
      // An unsupported schema throws on every draw: stop after a few in a row.
      if (out.length === 0 && errors >= 3) break;
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  process.stdout.write(JSON.stringify({ instances: out, seconds, errors, error: first }) + "\n");
}
