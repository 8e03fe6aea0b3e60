#!/usr/bin/env bash
# Issue 21, point 6: `svc manifest validate DIR` against check-jsonschema (PyPI) with our own
# generated V5 schema, on the same directory of manifests, in one run. The files are the
# corpus's valid V5 cases (JSON and YAML), copied round-robin to COUNT files. Reported: docs/s
# of each, their ratio, and each one's floor: for check-jsonschema, Python parsing the same
# files with the parsers it uses (json, ruamel.yaml); for svc, reading them (`cat`), its parse
# floor proper being measured in process by `cargo bench -p manifest-core` (docs/performance.md,
# "Validation against the parse floor").
#
# Usage: bench/validate.sh      (env: COUNT=10000 ROUNDS=3 CARGO_TARGET_DIR)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
COUNT=${COUNT:-10000}
ROUNDS=${ROUNDS:-3}

say "building svc (release, target $TARGET)"
(cd "$ROOT" && CARGO_TARGET_DIR="$TARGET" cargo build --release -p svc-cli >&2)
SVC="$TARGET/release/svc"
[ -x "$SVC" ] || die "no $SVC"

VENV="$TARGET/bench-venv"
if [ ! -x "$VENV/bin/check-jsonschema" ]; then
  say "installing check-jsonschema into $VENV"
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install -q check-jsonschema >&2
fi
PEER_VERSION=$("$VENV/bin/check-jsonschema" --version | head -n 1)

TMP=$(mktemp -d /tmp/svc-validate-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/m"
python3 - "$ROOT/tests/corpus/v5" "$TMP/m" "$COUNT" <<'EOF'
import glob, json, os, shutil, sys
corpus, out, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
valid = []
for expect in sorted(glob.glob(f"{corpus}/*.expect.json")):
    if json.load(open(expect)).get("valid"):
        stem = expect[: -len(".expect.json")]
        valid += [p for p in (stem + ".json", stem + ".yaml") if os.path.exists(p)]
if not valid:
    sys.exit("no valid V5 case in the corpus")
for i in range(count):
    src = valid[i % len(valid)]
    shutil.copyfile(src, f"{out}/{i:05d}-{os.path.basename(src)}")
EOF
"$SVC" manifest schema --version 5 >"$TMP/v5.schema.json"
FILES=$(find "$TMP/m" -type f | wc -l)
say "$FILES manifests in $TMP/m; peer: $PEER_VERSION"

now() { date +%s.%N; }
RES="$TMP/results"; : >"$RES"
record() { echo "$1 $2 $3" >>"$RES"; say "round $2 $1 = $3 s"; }
for r in $(seq 1 "$ROUNDS"); do
  t0=$(now)
  "$SVC" manifest validate "$TMP/m" --format json >"$TMP/svc.json" || [ $? -eq 1 ] || die "svc failed"
  t1=$(now)
  "$VENV/bin/check-jsonschema" --schemafile "$TMP/v5.schema.json" "$TMP"/m/* >"$TMP/peer.out" 2>&1 \
    || [ $? -eq 1 ] || { tail -n 5 "$TMP/peer.out" >&2; die "check-jsonschema failed"; }
  t2=$(now)
  cat "$TMP"/m/* >/dev/null
  t3=$(now)
  "$VENV/bin/python" - "$TMP/m" <<'EOF'
import json, os, sys
from ruamel.yaml import YAML
yaml = YAML(typ="safe")
d = sys.argv[1]
for name in os.listdir(d):
    with open(os.path.join(d, name), "rb") as f:
        data = f.read()
    try:
        json.loads(data)
    except ValueError:
        # A corpus case keeps YAML in a `.json` file (svc reads content, not names).
        yaml.load(data)
EOF
  t4=$(now)
  record svc "$r" "$(awk -v a="$t1" -v b="$t0" 'BEGIN{print a-b}')"
  record peer "$r" "$(awk -v a="$t2" -v b="$t1" 'BEGIN{print a-b}')"
  record read_floor "$r" "$(awk -v a="$t3" -v b="$t2" 'BEGIN{print a-b}')"
  record python_parse_floor "$r" "$(awk -v a="$t4" -v b="$t3" 'BEGIN{print a-b}')"
done
SVC_VALID=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['summary']['valid'])" "$TMP/svc.json")

python3 - "$RES" "$FILES" "$ROUNDS" "$PEER_VERSION" "$SVC_VALID" <<'EOF'
import statistics, sys
from collections import defaultdict
res, files, rounds, peer, svc_valid = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
vals = defaultdict(list)
for line in open(res):
    what, _round, secs = line.split()
    vals[what].append(float(secs))
med = {k: statistics.median(v) for k, v in vals.items()}
rate = lambda k: files / med[k]
print(f"\n### Validating a directory of {files} V5 manifests (median of {rounds} rounds)\n")
print("| What | Time | docs/s |\n|---|---|---|")
for k, label in [("svc", "svc manifest validate DIR"), ("peer", f"check-jsonschema ({peer})"),
                 ("read_floor", "reading the files (cat)"), ("python_parse_floor", "Python parsing them (json, ruamel.yaml)")]:
    print(f"| {label} | {med[k]:.2f} s | {rate(k):,.0f} |")
ratios = [p / s for p, s in zip(vals["peer"], vals["svc"])]
print(f"\nsvc / check-jsonschema: {statistics.median(ratios):.1f}x (per-round ratios: "
      + ", ".join(f"{x:.1f}" for x in ratios) + f"); goal at least 20x: {'met' if statistics.median(ratios) >= 20 else 'missed'}.")
print(f"check-jsonschema at {med['python_parse_floor'] / med['peer'] * 100:.0f}% of its Python parse floor's speed; "
      f"svc valid files: {svc_valid} of {files}.")
EOF
