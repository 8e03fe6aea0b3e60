#!/usr/bin/env bash
# Issue 44, point 5, the publication side: what `svc serve` costs with N live executions and
# no traffic. Two services on SQLite (loopback, RUST_LOG=warn), the peer's binary and ours,
# run side by side; each gets N continuous applications of one job that prints a line and
# then waits (a source release of a few bytes, `svc app deploy` until it runs). After SETTLE
# s, the CPU time (utime+stime of /proc/PID/stat) of each service's process, its jobs not
# counted, and apart that of its scheduler and output threads (`svc-scheduler`,
# `svc-output`), are read over the same WINDOW s for both, ROUNDS times; the medians are
# printed, as % of one core.
#
# Usage: PEER=/path/to/an/older/svc bench/idle-publication.sh
#        (env: JOBS=3 ROUNDS=5 WINDOW=20 SETTLE=5 SVC=prebuilt svc (else a release build))
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
JOBS=${JOBS:-3}
ROUNDS=${ROUNDS:-5}
WINDOW=${WINDOW:-20}
SETTLE=${SETTLE:-5}
PEER=${PEER:?set PEER to the svc binary to compare with}

if [ -z "${SVC:-}" ]; then
  say "building svc (release, target $TARGET)"
  (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET" cargo build --release -p svc-cli >&2)
  SVC="$TARGET/release/svc"
fi
[ -x "$SVC" ] || die "no $SVC"
[ -x "$PEER" ] || die "no $PEER"
for tool in node python3; do command -v "$tool" >/dev/null || die "needs $tool"; done

bench_scratch svc-idle-publication

# CPU ticks of process $1 itself (its jobs are its children, not counted), and of its
# threads named svc-scheduler and svc-output together: `process threads`.
ticks() {
  python3 - "$1" <<'EOF'
import os, sys
pid = sys.argv[1]
def cpu(path):
    s = open(path).read()
    f = s[s.rindex(")") + 2:].split()
    return int(f[11]) + int(f[12])
threads = 0
for tid in os.listdir(f"/proc/{pid}/task"):
    try:
        if open(f"/proc/{pid}/task/{tid}/comm").read().strip() in ("svc-scheduler", "svc-output"):
            threads += cpu(f"/proc/{pid}/task/{tid}/stat")
    except OSError:
        pass
print(cpu(f"/proc/{pid}/stat"), threads)
EOF
}

# Starts the service of binary $2 (labelled $1) with JOBS live executions; its pid in $1.pid.
start() {
  local label=$1 bin=$2 dir="$TMP/$1" port i
  mkdir -p "$dir"
  port=$(bench_free_port)
  RUST_LOG=warn "$bin" serve --listen "127.0.0.1:$port" --data-dir "$dir/data" --jobs-per-processor "$JOBS" \
    >"$dir/serve.log" 2>&1 &
  PIDS+=($!)
  echo $! >"$dir/pid"
  for _ in $(seq 1 300); do
    python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$port" 2>/dev/null \
      && break
    sleep 0.1
  done
  export SVC_SERVER="http://127.0.0.1:$port"
  export SVC_TOKEN
  SVC_TOKEN=$("$bin" admin token create --data-dir "$dir/data" --org bench --role developer 2>/dev/null)
  "$bin" admin spend-authority set --data-dir "$dir/data" --org bench --micros 100000000000 >/dev/null 2>&1
  for i in $(seq 1 "$JOBS"); do
    mkdir -p "$dir/idle-$i"
    printf '%s\n' 'console.log("up");' 'setInterval(() => {}, 60000);' >"$dir/idle-$i/main.js"
    cat >"$dir/idle-$i/manifest.yaml" <<YAML
schema: svc.application-manifest
schemaVersion: 5
applicationId: idle-$i
release:
  mode: source
runtime:
  kind: javascript
  entrypoint:
    file: main.js
execution:
  mode: continuous
deployment:
  schedule:
    duration: 1h
  spend:
    unit: service_credit_micros
    perJob: "100000"
    rate:
      amount: "100000000"
      window: 30d
state:
  mode: "off"
YAML
    "$bin" app deploy "$dir/idle-$i" >"$dir/idle-$i/deploy.log" 2>&1 \
      || { cat "$dir/idle-$i/deploy.log" "$dir/serve.log" >&2; die "$label: idle-$i does not run"; }
  done
  say "$label: $JOBS executions live"
}

start before "$PEER"
start ours "$SVC"
say "settling ${SETTLE} s"
sleep "$SETTLE"
RES="$TMP/results"
: >"$RES"
for r in $(seq 1 "$ROUNDS"); do
  read -r b0 bt0 < <(ticks "$(cat "$TMP/before/pid")")
  read -r o0 ot0 < <(ticks "$(cat "$TMP/ours/pid")")
  sleep "$WINDOW"
  read -r b1 bt1 < <(ticks "$(cat "$TMP/before/pid")")
  read -r o1 ot1 < <(ticks "$(cat "$TMP/ours/pid")")
  echo "$((b1 - b0)) $((bt1 - bt0)) $((o1 - o0)) $((ot1 - ot0))" >>"$RES"
  say "round $r: before $((b1 - b0)) ticks (scheduler and output $((bt1 - bt0))), ours $((o1 - o0)) ($((ot1 - ot0)))"
done

python3 - "$RES" "$WINDOW" "$(getconf CLK_TCK)" "$ROUNDS" "$JOBS" <<'EOF'
import statistics, sys
res, window, hz, rounds, jobs = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
rows = [list(map(int, line.split())) for line in open(res)]
pct = lambda col: statistics.median(r[col] for r in rows) / hz / window * 100
print(f"\n### Idle publication scheduler: % of one core over {window:.0f} s, {jobs} live executions (median of {rounds} rounds)\n")
print("| Binary | `svc serve` CPU (its jobs not counted) | Scheduler and output threads |")
print("|---|---|---|")
print(f"| before | {pct(0):.2f}% | {pct(1):.2f}% |")
print(f"| ours | {pct(2):.2f}% | {pct(3):.2f}% |")
EOF
