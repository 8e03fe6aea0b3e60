#!/usr/bin/env bash
# Issue 44, point 5: what `svc relay serve` costs with N live deployments and no traffic. One
# coordinator on SQLite (loopback, default revalidation, RUST_LOG=warn) per binary; N light
# node apps (bench/idle-app.js: /health and /) are deployed through the API and waited for
# until every one is live; after SETTLE s, the CPU time (utime+stime of /proc/PID/stat) and
# RSS of the coordinator, and apart those of its jobs (agents, apps), are read over WINDOW s,
# ROUNDS times; the median is printed, as % of one core, with the RSS per deployment.
#
# With PEER=/path/to/an/older/svc, the same is run with that binary first, then ours, and
# both are printed side by side (measure the two in one run: the machine is shared).
#
# Usage: bench/idle.sh      (env: COUNTS="0 20 100" ROUNDS=3 WINDOW=30 SETTLE=10 PEER=
#                            SVC=prebuilt svc (else a release build) CARGO_TARGET_DIR)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
COUNTS=${COUNTS:-"0 20 100"}
ROUNDS=${ROUNDS:-3}
WINDOW=${WINDOW:-30}
SETTLE=${SETTLE:-10}
PEER=${PEER:-}

if [ -z "${SVC:-}" ]; then
  say "building svc (release, target $TARGET)"
  (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET" cargo build --release -p svc-cli >&2)
  SVC="$TARGET/release/svc"
fi
[ -x "$SVC" ] || die "no $SVC"
for tool in node curl python3; do command -v "$tool" >/dev/null || die "needs $tool"; done

bench_scratch svc-idle-bench
RES="$TMP/results"; : >"$RES"

# CPU ticks and RSS (KiB) of process $1 and, apart, of all its descendants:
# `self_ticks self_rss_kib jobs_ticks jobs_rss_kib jobs`.
sample() {
  python3 - "$1" <<'EOF'
import os, sys
root = int(sys.argv[1])
parent, stat, rss = {}, {}, {}
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        with open(f"/proc/{p}/stat") as f:
            s = f.read()
        with open(f"/proc/{p}/status") as f:
            st = f.read()
    except OSError:
        continue
    fields = s[s.rindex(")") + 2:].split()
    pid = int(p)
    parent[pid] = int(fields[1])
    stat[pid] = int(fields[11]) + int(fields[12])
    rss[pid] = next((int(l.split()[1]) for l in st.splitlines() if l.startswith("VmRSS:")), 0)
def under(pid):
    while pid > 1:
        pid = parent.get(pid, 0)
        if pid == root:
            return True
    return False
kids = [p for p in stat if under(p)]
print(stat.get(root, 0), rss.get(root, 0), sum(stat[p] for p in kids), sum(rss[p] for p in kids), len(kids))
EOF
}

# Runs the coordinator of binary $2 (labelled $1) through COUNTS.
run_one() {
  local label=$1 bin=$2 dir="$TMP/$1" api pub coord n have i
  mkdir -p "$dir"
  api=$(bench_free_port); pub=$(bench_free_port)
  "$bin" relay admin invite --data-dir "$dir/relay" --org bench >/dev/null 2>&1
  export SVC_RELAY_TOKEN
  SVC_RELAY_TOKEN=$("$bin" relay admin token --data-dir "$dir/relay" --org bench 2>/dev/null)
  export SVC_RELAY="http://127.0.0.1:$api"
  RUST_LOG=warn "$bin" relay serve --data-dir "$dir/relay" --listen "127.0.0.1:$api" --public "127.0.0.1:$pub" \
    >"$dir/serve.log" 2>&1 &
  coord=$!; PIDS+=("$coord")
  for _ in $(seq 1 600); do grep -q '^ready ' "$dir/serve.log" && break; sleep 0.1; done
  grep -q '^ready ' "$dir/serve.log" || { cat "$dir/serve.log" >&2; die "$label: the coordinator did not come up"; }
  head -5 "$dir/serve.log" >&2
  have=0
  for n in $COUNTS; do
    if [ "$n" -gt "$have" ]; then
      say "$label: deploying $((n - have)) more (to $n)"
      for i in $(seq $((have + 1)) "$n"); do
        mkdir -p "$dir/p$i"
        cp "$ROOT/bench/idle-app.js" "$dir/p$i/server.js"
        cat >"$dir/p$i/ingress.json" <<JSON
{"version": 1, "name": "idle-$i", "runtime": "node",
 "app": {"dir": ".", "entrypoint": "server.js", "port": 8080, "healthPath": "/health"},
 "spend": {"ceilingMicros": 5000000, "fundPeriods": 1}}
JSON
      done
      # Eight at a time: sent and funded; then every one waited for until live.
      seq $((have + 1)) "$n" | xargs -P 8 -I{} sh -c \
        'cd "$1/p$2" && "$0" ingress deploy --no-wait >"$1/p$2/deploy.log" 2>&1 || { cat "$1/p$2/deploy.log" >&2; exit 1; }' \
        "$bin" "$dir" {} || die "$label: a deploy failed"
      for i in $(seq $((have + 1)) "$n"); do
        (cd "$dir/p$i" && "$bin" ingress deploy --timeout 300 >"$dir/p$i/live.log" 2>&1) \
          || { cat "$dir/p$i/live.log" >&2; die "$label: idle-$i is not live"; }
      done
      have=$n
    fi
    say "$label: $n live; settling ${SETTLE} s"
    sleep "$SETTLE"
    for r in $(seq 1 "$ROUNDS"); do
      read -r c0 _ j0 _ _ < <(sample "$coord")
      sleep "$WINDOW"
      read -r c1 crss j1 jrss jobs < <(sample "$coord")
      echo "$label $n $r $((c1 - c0)) $crss $((j1 - j0)) $jrss $jobs" >>"$RES"
      say "$label n=$n round $r: coordinator $((c1 - c0)) ticks, rss $crss KiB; jobs ($jobs processes) $((j1 - j0)) ticks"
    done
  done
  kill "$coord" 2>/dev/null || true
  wait "$coord" 2>/dev/null || true
}

[ -n "$PEER" ] && run_one before "$PEER"
run_one ours "$SVC"

python3 - "$RES" "$WINDOW" "$(getconf CLK_TCK)" "$ROUNDS" <<'EOF'
import statistics, sys
from collections import defaultdict
res, window, hz, rounds = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rows = defaultdict(list)
for line in open(res):
    label, n, _r, c, crss, j, jrss, jobs = line.split()
    rows[(label, int(n))].append((int(c), int(crss), int(j), int(jrss), int(jobs)))
pct = lambda ticks: ticks / hz / window * 100
print(f"\n### Idle coordinator: % of one core over {window:.0f} s (median of {rounds} rounds)\n")
print("| Binary | Live deployments | Coordinator CPU | Coordinator RSS | RSS per deployment | Jobs' CPU (agents, apps) | Jobs' RSS |")
print("|---|---|---|---|---|---|---|")
base = {}
for (label, n) in sorted(rows, key=lambda k: (k[0] != "before", k[1])):
    v = rows[(label, n)]
    c = statistics.median(pct(x[0]) for x in v)
    rss = statistics.median(x[1] for x in v)
    j = statistics.median(pct(x[2]) for x in v)
    jrss = statistics.median(x[3] for x in v)
    if n == 0:
        base[label] = rss
    per = f"{(rss - base[label]) / n:.0f} KiB" if n and label in base else "-"
    print(f"| {label} | {n} | {c:.2f}% | {rss / 1024:.1f} MiB | {per} | {j:.2f}% | {jrss / 1024:.0f} MiB |")
EOF
