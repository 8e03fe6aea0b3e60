"""The schema patterns mean the same in Python `re` and in ECMA-262 (as Ajv runs them, with
the `u` flag): every pattern is evaluated on every string of the corpus, and on each string
with a newline appended (where Python's `$` differs), in both dialects, and the answers must
agree. Usage: python3 python_patterns.py DIR (DIR from corpus-export; needs `node`)."""
import json
import pathlib
import re
import subprocess
import sys

directory = pathlib.Path(sys.argv[1])
patterns = set()
strings = set()


def walk(node, in_schema):
    if isinstance(node, dict):
        for key, value in node.items():
            if in_schema and key == "pattern" and isinstance(value, str):
                patterns.add(value)
            walk(value, in_schema)
    elif isinstance(node, list):
        for value in node:
            walk(value, in_schema)
    elif isinstance(node, str) and not in_schema:
        strings.add(node)


for path in sorted(directory.glob("*.schema.json")):
    walk(json.loads(path.read_text()), True)
for line in (directory / "corpus.jsonl").read_text().splitlines():
    walk(json.loads(line)["document"], False)

patterns = sorted(patterns)
samples = sorted(strings | {s + "\n" for s in strings})
failures = []
compiled = []
for p in patterns:
    try:
        compiled.append(re.compile(p))
    except re.error as e:
        failures.append(f"{p!r} does not compile in Python: {e}")
        compiled.append(None)

ecma = subprocess.run(
    ["node", "-e", """
const {patterns, samples} = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = patterns.map((p) => { const r = new RegExp(p, 'u'); return samples.map((s) => r.test(s)); });
process.stdout.write(JSON.stringify(out));
"""],
    input=json.dumps({"patterns": patterns, "samples": samples}),
    capture_output=True, text=True, check=True,
)
answers = json.loads(ecma.stdout)
pairs = 0
for p, regex, row in zip(patterns, compiled, answers):
    if regex is None:
        continue
    for s, by_ecma in zip(samples, row):
        pairs += 1
        if bool(regex.search(s)) != by_ecma:
            failures.append(f"{p!r} on {s!r}: Python {not by_ecma}, ECMA-262 {by_ecma}")
            break

print(f"python re vs ECMA-262: {len(patterns)} patterns, {pairs} pattern/string pairs")
for f in failures:
    print(f"  {f}", file=sys.stderr)
print(f"{len(patterns) - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
