"""Every `pattern` in the generated schemas compiles with Python's `re` (Ajv compiles them as
ECMA-262 in check.mjs): the schemas use only syntax common to both.
Usage: python3 python_patterns.py DIR (DIR from corpus-export)."""
import json
import pathlib
import re
import sys

directory = pathlib.Path(sys.argv[1])
patterns = set()


def walk(node):
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            patterns.add(node["pattern"])
        for value in node.values():
            walk(value)
    elif isinstance(node, list):
        for value in node:
            walk(value)


for path in sorted(directory.glob("*.schema.json")):
    walk(json.loads(path.read_text()))

failures = []
for p in sorted(patterns):
    try:
        re.compile(p)
    except re.error as e:
        failures.append(f"{p!r}: {e}")

print(f"python re: {len(patterns)} distinct patterns, {len(patterns) - len(failures)} compile")
for f in failures:
    print(f"  {f}", file=sys.stderr)
print(f"{len(patterns) - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
