#!/usr/bin/env bash
# Ingress data plane benchmark, on loopback, in one run: the same agent and app reached
#   direct   - HTTPS straight to the agent's `directListen` port (no relay),
#   gateway  - through our SNI gateway (`svc gateway run`) and the agent's tunnel,
#   nginx    - through nginx `stream { ssl_preread on; }` forwarding SNI node-demo-acme.localhost to
#              the agent's direct port (the peer we compare with).
# It reports bulk throughput (1 stream, 16 streams; curl), requests/s and p50/p99 latency
# (wrk, 1 connection and 16 connections), and the gateway's RSS per 1,000 idle tunneled
# connections, then checks the goals. Method and results: docs/performance.md, "Ingress
# data plane: gateway vs direct vs nginx".
#
# Usage: bench/ingress.sh            (env: ROUNDS=3 BULK_MIB=256 BULK16_MIB=64
#                                      WRK_SECS=8 IDLE_CONNS=1000 IDLE_SETTLE=5 IDLE_ONLY=0
#                                      KEEP_TMP=0 CARGO_TARGET_DIR SVC_BIN=<a built svc, no build>
#                                      IDLE_OPEN_GAP=<s between idle opens> IDLE_SMAPS_DIR=<dir>
#                                      TCP_CC=<congestion control for the run, e.g. cubic>
#                                      BUSY=0 BUSY_CPU_SECS=<burner's CPU limit>
#                                      DETAIL=0: 1 attributes timers and CPU first)
#
# BUSY=1 runs the throughput rounds on a busy machine: the bench starts one CPU burner (a
# shell loop, not pinned, same nice) before the rounds and stops it after them. The burner is
# bounded by itself: RLIMIT_CPU (BUSY_CPU_SECS, default from ROUNDS and WRK_SECS) kills it,
# and it stops on its own after as many wall-clock seconds, even if this script is killed
# before its cleanup. The report says how much of a core it kept busy, the load average at
# the start, and ends with one `POINT3 ...` line (issue 44, point 3: gateway/nginx ratios and
# the verdict) that several runs can be gathered by.
#
# TCP congestion control matters on loopback: BBR without the fq qdisc paces with timers
# inside TCP, and a relay's timer-driven sends then run in whoever is on the CPU, often the
# client. The report names the congestion control and qdisc it ran with; TCP_CC= sets
# net.ipv4.tcp_congestion_control for the run (root) and puts the old value back at exit.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH="$ROOT/bench"
# shellcheck source=bench/common.sh
. "$BENCH/common.sh"
ROUNDS=${ROUNDS:-3}
BULK_MIB=${BULK_MIB:-256}     # one stream downloads this much
BULK16_MIB=${BULK16_MIB:-64}  # each of the 16 concurrent streams downloads this much
WRK_SECS=${WRK_SECS:-8}
IDLE_CONNS=${IDLE_CONNS:-1000}
# Seconds the idle connections sit before RSS is read: past the agent's 2 s hibernation of an
# idle HTTP/1.1 connection, so that the last one opened is measured idle too.
IDLE_SETTLE=${IDLE_SETTLE:-5}
# 1: only the idle step (no throughput rounds), for the agent's and the gateway's memory.
IDLE_ONLY=${IDLE_ONLY:-0}
HOST=node-demo-acme.localhost
BUSY=${BUSY:-0}
[ "$IDLE_ONLY" = 1 ] && BUSY=0
# The load average before anything of this run (the build included) starts: other work on
# the machine (another build, another bench) shows here.
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
if [ "$BUSY" != 1 ] && awk -v l="${LOAD_START%% *}" 'BEGIN{exit !(l > 0.5)}'; then
  say "warning: load average $LOAD_START at the start: the machine is not quiet"
fi

# ---------------------------------------------------------------------------- tools
bench_tools_and_build wrk

# More descriptors than the default 1,024: idle connections count three times here.
ulimit -n 16384 2>/dev/null || ulimit -n "$(ulimit -Hn)" || true

CC_SYSCTL=/proc/sys/net/ipv4/tcp_congestion_control
CC_BEFORE=$(cat "$CC_SYSCTL")
if [ -n "${TCP_CC:-}" ] && [ "$TCP_CC" != "$CC_BEFORE" ]; then
  grep -qw "$TCP_CC" /proc/sys/net/ipv4/tcp_available_congestion_control \
    || die "congestion control $TCP_CC not available ($(cat /proc/sys/net/ipv4/tcp_available_congestion_control))"
  echo "$TCP_CC" >"$CC_SYSCTL" || die "cannot set $CC_SYSCTL (root needed)"
  say "congestion control $TCP_CC for this run (was $CC_BEFORE)"
else
  CC_BEFORE=
fi
NETWORK="congestion control $(cat "$CC_SYSCTL"), loopback qdisc $(tc qdisc show dev lo 2>/dev/null | awk 'NR==1{print $2}' || echo unknown), default_qdisc $(cat /proc/sys/net/core/default_qdisc)"

# ---------------------------------------------------------------------------- processes
TMP=$(mktemp -d /tmp/svc-ingress-bench.XXXXXX)
PIDS=()
cleanup() {
  local pid
  [ -z "${CC_BEFORE:-}" ] || echo "$CC_BEFORE" >"$CC_SYSCTL" || true
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "${KEEP_TMP:-0}" = 1 ]; then say "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { bench_free_port; }
DEMO_PORT=$(free_port); API_PORT=$(free_port); GW_PORT=$(free_port); TUN_PORT=$(free_port); ADMIN_PORT=$(free_port)
DIRECT_PORT=$(free_port); NGINX_PORT=$(free_port); APP_PORT=$(free_port)

bench_demo "$DEMO_PORT" "$API_PORT"

# The gateway under test runs alone in its own process (so its RSS is its own), with a
# tunnel certificate from the demo's CA, and the demo route's public route key.
bench_tunnel_cert
mkdir -p "$TMP/agent"
python3 - "$TMP" "$GW_PORT" "$TUN_PORT" "$ADMIN_PORT" "$DIRECT_PORT" "$APP_PORT" <<'EOF'
import glob, hashlib, json, os, sys
# The route key's public half: the last 32 bytes of its PKCS#8 document (ring's v2 form).
def route_public_key(text):
    import base64
    der = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return base64.urlsafe_b64encode(der[-32:]).decode().rstrip("=")
tmp, gw, tun, admin, direct, app = sys.argv[1], *map(int, sys.argv[2:])
# The demo deployment's agent, in the job directory beside the data directory.
agent_dir = os.path.dirname(glob.glob(f"{tmp}/demo-jobs/dep_*/r1/agent/agent.json")[0])
agent = json.load(open(f"{agent_dir}/agent.json"))
# The job's agent reads its files where its sandbox mounts them; this one runs outside.
agent["gatewayCa"] = os.path.join(agent_dir, os.path.basename(agent["gatewayCa"]))
agent.update(gateway=f"127.0.0.1:{tun}", appPort=app, directListen=f"127.0.0.1:{direct}")
fd = os.open(f"{tmp}/agent/agent.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, json.dumps(agent, indent=2).encode()); os.close(fd)
json.dump({
    "public": f"127.0.0.1:{gw}", "tunnel": f"127.0.0.1:{tun}", "admin": f"127.0.0.1:{admin}",
    "tunnelCert": f"{tmp}/tunnel.pem", "tunnelKey": f"{tmp}/tunnel-key.pem",
    "routes": [{"routeId": agent["routeId"], "hostnames": [agent["hostname"]],
                "routePublicKey": route_public_key(agent["routeKey"]),
                "proxyProtocol": agent["proxyProtocol"], "maxConnections": 4096}],
}, open(f"{tmp}/gateway.json", "w"), indent=2)
EOF

say "starting the bench app, the gateway and the agent"
node "$BENCH/ingress-app.js" "$APP_PORT" >"$TMP/app.log" 2>&1 &
PIDS+=($!)
"$SVC" gateway run --config "$TMP/gateway.json" >"$TMP/gateway.log" 2>&1 &
GW_PID=$!; PIDS+=($GW_PID)
"$SVC" agent run --config "$TMP/agent/agent.json" >"$TMP/agent.log" 2>&1 &
AGENT_PID=$!; PIDS+=($AGENT_PID)

bench_nginx "$NGINX_PORT" "$DIRECT_PORT"

declare -A PORT=([direct]=$DIRECT_PORT [gateway]=$GW_PORT [nginx]=$NGINX_PORT)
PATHS=(direct gateway nginx)
url() { echo "https://$HOST:${PORT[$1]}$2"; }
FETCH_WRAP=()  # a command curl runs under (perf, for the 1-stream download)
fetch() { # path, url path, output file; prints "bytes seconds"
  "${FETCH_WRAP[@]}" curl -sS --http1.1 --cacert "$CA" --resolve "$HOST:${PORT[$1]}:127.0.0.1" -o "$3" \
    -w '%{size_download} %{time_total}\n' "$(url "$1" "$2")"
}
for p in "${PATHS[@]}"; do
  ok=
  for _ in $(seq 1 150); do
    if [ "$(curl -s --cacert "$CA" --resolve "$HOST:${PORT[$p]}:127.0.0.1" -o /dev/null -w '%{http_code}' "$(url "$p" /small)")" = 200 ]; then ok=1; break; fi
    sleep 0.2
  done
  [ -n "$ok" ] || { tail -n 20 "$TMP"/*.log "$TMP/nginx/error.log" >&2; die "$p does not answer"; }
done
say "all three paths answer 200 (direct :$DIRECT_PORT, gateway :$GW_PORT, nginx :$NGINX_PORT)"

# wrk takes the server name (SNI) from the URL's host, and glibc does not resolve
# $HOST: run it in a private mount namespace whose /etc/hosts names it.
{ echo "127.0.0.1 $HOST"; cat /etc/hosts; } >"$TMP/hosts"
if unshare -m sh -c "mount --bind '$TMP/hosts' /etc/hosts && getent hosts $HOST" >/dev/null 2>&1; then
  wrk_run() { unshare -m sh -c "mount --bind '$TMP/hosts' /etc/hosts && exec wrk \"\$@\"" wrk "$@"; }
else
  die "cannot give wrk a resolvable $HOST (needs unshare -m, i.e. root)"
fi

# ---------------------------------------------------------------------------- measuring
RES="$TMP/results"; : >"$RES"   # lines: metric path round value
# CPU time (ms) used so far by the relay of a path: the gateway process, or nginx's master and
# workers. End-to-end throughput is bounded by curl, the agent and the app sharing the cores,
# so the relay's own CPU per GiB moved is the sharper comparison.
relay_cpu_ms() {
  local pids=() pid total=0 hz
  case $1 in
    gateway) pids=("$GW_PID") ;;
    nginx) pids=("$NGINX_PID" $(pgrep -P "$NGINX_PID" || true)) ;;
    *) echo 0; return ;;
  esac
  hz=$(getconf CLK_TCK)
  for pid in "${pids[@]}"; do
    # utime and stime are fields 14 and 15; the command name (field 2) has no spaces here.
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
  done
  echo $((total * 1000 / hz))
}
record() { echo "$1 $2 $3 $4" >>"$RES"; say "round $3 $2 $1 = $4"; }

# CPU time (ms) of the client (curl: the children this script has reaped, plus a few ms of
# awk and date) and of the agent, the other end of every path.
client_cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{print int(($16 + $17) * 1000 / hz)}' "/proc/$$/stat"; }
agent_cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{print int(($14 + $15) * 1000 / hz)}' "/proc/$AGENT_PID/stat"; }
# High-resolution timer expirations on the whole machine during the 1-stream download, when
# perf can count them: TCP's own pacing (BBR without fq) arms one per paced burst.
PERF_TIMERS=
if command -v perf >/dev/null && perf stat -a -x, -e timer:hrtimer_expire_entry -o /dev/null true 2>/dev/null; then
  PERF_TIMERS=1
fi
per_gib() { awk -v c="$1" -v b="$2" 'BEGIN{printf "%.0f", c/(b/1073741824)}'; }

bulk() { # path round
  local p=$1 r=$2 n=$((BULK_MIB << 20)) n16=$((BULK16_MIB << 20)) out t0 t1 i curls=() c0 c1 k0 k1 a0 a1
  c0=$(relay_cpu_ms "$p"); k0=$(client_cpu_ms); a0=$(agent_cpu_ms)
  [ -z "$PERF_TIMERS" ] || FETCH_WRAP=(perf stat -a -x, -e timer:hrtimer_expire_entry -o "$TMP/timers" --)
  out=$(fetch "$p" "/bytes?n=$n" /dev/null)
  FETCH_WRAP=()
  [ "${out%% *}" = "$n" ] || die "$p: short download ($out)"
  [ -z "$PERF_TIMERS" ] || record timers_per_gib "$p" "$r" "$(per_gib "$(awk -F, '/hrtimer_expire_entry/{print $1}' "$TMP/timers")" "$n")"
  record bulk1 "$p" "$r" "$(awk -v b="${out%% *}" -v s="${out#* }" 'BEGIN{printf "%.0f", b/s/1048576}')"
  t0=$(date +%s.%N)
  for i in $(seq 1 16); do fetch "$p" "/bytes?n=$n16" /dev/null >"$TMP/bulk16.$i" & curls+=($!); done
  wait "${curls[@]}"
  t1=$(date +%s.%N)
  for i in $(seq 1 16); do
    read -r got _ <"$TMP/bulk16.$i"; [ "$got" = "$n16" ] || die "$p: short download in 16 streams ($got)"
  done
  record bulk16 "$p" "$r" "$(awk -v b=$((16 * n16)) -v a="$t0" -v z="$t1" 'BEGIN{printf "%.0f", b/(z-a)/1048576}')"
  c1=$(relay_cpu_ms "$p"); k1=$(client_cpu_ms); a1=$(agent_cpu_ms)
  record relay_cpu_ms_per_gib "$p" "$r" "$(per_gib $((c1 - c0)) $((n + 16 * n16)))"
  record client_cpu_ms_per_gib "$p" "$r" "$(per_gib $((k1 - k0)) $((n + 16 * n16)))"
  record agent_cpu_ms_per_gib "$p" "$r" "$(per_gib $((a1 - a0)) $((n + 16 * n16)))"
}

load() { # path round connections threads
  local p=$1 r=$2 c=$3 t=$4 line
  line=$(wrk_run -t"$t" -c"$c" -d"${WRK_SECS}s" --timeout 5s -s "$BENCH/wrk-report.lua" "$(url "$p" /small)" | grep '^RESULT')
  case "$line" in *" errors=0 non2xx=0"*) ;; *) die "$p: wrk saw errors: $line" ;; esac
  set -- $line
  record "rps_c$c" "$p" "$r" "${2#rps=}"
  record "p50_c$c" "$p" "$r" "${3#p50=}"
  record "p99_c$c" "$p" "$r" "${4#p99=}"
}

# One CPU burner for BUSY=1 (see the top). Bounded twice so that it cannot outlive the bench
# for long: RLIMIT_CPU (the kernel kills it after BUSY_CPU_SECS of CPU) and its own clock
# (bash's SECONDS, a builtin loop with no forks) after as many seconds of wall time.
BURN_PID=
BUSY_SUMMARY="no burner (BUSY=0)"
burn_start() {
  local limit=${BUSY_CPU_SECS:-$(( ROUNDS * (6 * WRK_SECS + 120) + 600 ))}
  ( ulimit -t "$limit" && exec bash -c 'while [ "$SECONDS" -lt "$1" ]; do :; done' burner "$limit" ) &
  BURN_PID=$!; PIDS+=("$BURN_PID")
  BURN_T0=$(date +%s.%N)
  BURN_C0=$(awk '{print $14 + $15}' "/proc/$BURN_PID/stat")
  say "busy: one CPU burner (pid $BURN_PID, at most $limit CPU seconds and $limit s)"
}
burn_stop() {
  local c1 t1
  [ -n "$BURN_PID" ] || return 0
  t1=$(date +%s.%N)
  if c1=$(awk '{print $14 + $15}' "/proc/$BURN_PID/stat" 2>/dev/null) && kill -TERM "$BURN_PID" 2>/dev/null; then
    wait "$BURN_PID" 2>/dev/null || true
    BUSY_SUMMARY=$(awk -v c="$((c1 - BURN_C0))" -v hz="$(getconf CLK_TCK)" -v a="$BURN_T0" -v z="$t1" \
      'BEGIN{printf "busy: one burner, %.2f cores over %.0f s", c / hz / (z - a), z - a}')
  else
    BUSY_SUMMARY="busy: the burner ended before the rounds did (its limit is too low: raise BUSY_CPU_SECS)"
  fi
  BURN_PID=
  say "$BUSY_SUMMARY"
}

# DETAIL=1: where the timers and the relay's CPU come from, before the rounds. For each path,
# one 1-stream download under `perf record -a` of timer:hrtimer_expire_entry, counted per GiB
# by the timer's function (tcp_pace_kick: TCP pacing; hrtimer_wakeup: a sleep or a poll with
# a timeout ending; tick_nohz_handler or tick_sched_timer: the tick of a busy CPU) and by the
# process on the CPU when it fired, with the relay's own CPU per GiB; then the top of a
# `perf record` of the gateway process during one more download. ROUNDS=0 stops after it.
detail() {
  local p n=$((BULK_MIB << 20)) c0 c1
  command -v perf >/dev/null || die "DETAIL=1 needs perf"
  for p in "${PATHS[@]}"; do
    FETCH_WRAP=(perf record -q -a -e timer:hrtimer_expire_entry -o "$TMP/detail.$p.data" --)
    c0=$(relay_cpu_ms "$p")
    fetch "$p" "/bytes?n=$n" /dev/null >/dev/null
    c1=$(relay_cpu_ms "$p")
    FETCH_WRAP=()
    perf script -i "$TMP/detail.$p.data" -F comm,trace 2>/dev/null \
      | awk -v p="$p" -v gib="$(awk -v n="$n" 'BEGIN{print n / 1073741824}')" -v cpu=$((c1 - c0)) '
          { for (i = 1; i <= NF; i++) if ($i ~ /^function=/) f = substr($i, 10); by_f[f]++; by_c[$1]++; total++ }
          END {
            printf "[detail] %s: %.0f timer expirations per GiB; relay CPU %.0f ms per GiB\n", p, total / gib, cpu / gib
            for (f in by_f) printf "[detail] %s   function %-28s %8.0f per GiB\n", p, f, by_f[f] / gib
            for (c in by_c) printf "[detail] %s   on cpu   %-28s %8.0f per GiB\n", p, c, by_c[c] / gib
          }' | sort -k1,2 -k6,6nr >&2
  done
  FETCH_WRAP=(perf record -q -g -p "$GW_PID" -o "$TMP/detail.gateway-cpu.data" --)
  fetch gateway "/bytes?n=$n" /dev/null >/dev/null
  FETCH_WRAP=()
  perf report -i "$TMP/detail.gateway-cpu.data" --no-children --sort sym --stdio 2>/dev/null \
    | grep -E '^ +[0-9.]+%' | head -n 25 | sed 's/^/[detail] gateway cpu /' >&2
}

[ "$IDLE_ONLY" = 1 ] && ROUNDS=0
if [ "${DETAIL:-0}" = 1 ]; then
  detail
  [ "$ROUNDS" != 0 ] || [ "$IDLE_ONLY" = 1 ] || exit 0
fi
LOAD_ROUNDS=$(cut -d' ' -f1-3 /proc/loadavg)
say "load average $LOAD_ROUNDS before the rounds ($LOAD_START at the start)"
[ "$BUSY" != 1 ] || burn_start
for r in $(seq 1 "$ROUNDS"); do
  # Rotate the order each round, so drift in the machine's speed does not favour one path.
  order=("${PATHS[@]:$(( (r - 1) % 3 ))}" "${PATHS[@]:0:$(( (r - 1) % 3 ))}")
  for p in "${order[@]}"; do bulk "$p" "$r"; done
  for p in "${order[@]}"; do load "$p" "$r" 1 1; done
  for p in "${order[@]}"; do load "$p" "$r" 16 2; done
done
burn_stop

say "opening $IDLE_CONNS idle connections through the gateway"
idle=$(python3 "$BENCH/idle-conns.py" "$GW_PORT" "$HOST" "$CA" "$IDLE_CONNS" "$IDLE_SETTLE" gateway="$GW_PID" agent="$AGENT_PID" | grep '^RESULT')
say "$idle"
if [ "$IDLE_ONLY" = 1 ]; then
  python3 - "$idle" <<'EOF'
import sys
f = dict(kv.split("=", 1) for kv in sys.argv[1].split()[1:])
count = int(f["count"])
for name in ["gateway", "agent"]:
    b, a = map(int, f[name].split(":"))
    print(f"{name}: RSS {b / 1024:.1f} -> {a / 1024:.1f} MiB, {(a - b) / 1024 / count * 1000:.1f} MiB per 1,000 idle connections")
    for part in ["anon", "lazyfree"]:
        if f"{name}_{part}" in f:
            b, a = map(int, f[f"{name}_{part}"].split(":"))
            print(f"  {part}: {b / 1024:.1f} -> {a / 1024:.1f} MiB, {(a - b) / 1024 / count * 1000:.1f} MiB per 1,000")
print(f"{f['alive']} of {count} still answering after the idle wait")
EOF
  exit 0
fi

# ---------------------------------------------------------------------------- report
python3 - "$RES" "$idle" "$NETWORK" "$ROUNDS" "$BULK_MIB" "$BULK16_MIB" "$WRK_SECS" \
  "$BUSY" "$BUSY_SUMMARY" "$LOAD_START" "$LOAD_ROUNDS" <<'EOF'
import statistics, sys
from collections import defaultdict
res, idle, network, rounds, bulk, bulk16, secs, busy, busy_summary, load_start, load_rounds = sys.argv[1:]
vals = defaultdict(list)
for line in open(res):
    metric, path, _round, value = line.split()
    vals[metric, path].append(float(value))
med = lambda m, p: statistics.median(vals[m, p])
paths = ["direct", "gateway", "nginx"]
ms = lambda us: f"{us / 1000:.2f} ms"
print(f"\n### Results (median of {rounds} rounds; bulk {bulk} MiB on 1 stream, 16 x {bulk16} MiB; wrk {secs} s per run)\n")
print(f"TCP: {network}.\n")
print(f"Machine: {busy_summary}; load average {load_start} at the start, {load_rounds} before the rounds.\n")
print("| Path | 1 stream MiB/s | 16 streams MiB/s | req/s, 1 conn | p50 / p99, 1 conn | req/s, 16 conns | p50 / p99, 16 conns |")
print("|---|---|---|---|---|---|---|")
for p in paths:
    print(f"| {p} | {med('bulk1', p):.0f} | {med('bulk16', p):.0f} | {med('rps_c1', p):.0f} | "
          f"{ms(med('p50_c1', p))} / {ms(med('p99_c1', p))} | {med('rps_c16', p):.0f} | "
          f"{ms(med('p50_c16', p))} / {ms(med('p99_c16', p))} |")
print(f"\nRelay CPU per GiB moved during the bulk runs (user + system): gateway "
      f"{med('relay_cpu_ms_per_gib', 'gateway'):.0f} ms, nginx {med('relay_cpu_ms_per_gib', 'nginx'):.0f} ms.")
print("Client (curl) and agent CPU per GiB, direct / gateway / nginx: client "
      + " / ".join(f"{med('client_cpu_ms_per_gib', p):.0f}" for p in paths) + " ms, agent "
      + " / ".join(f"{med('agent_cpu_ms_per_gib', p):.0f}" for p in paths) + " ms.")
timers = ("timers_per_gib", "direct") in vals
if timers:
    print("High-resolution timer expirations per GiB of the 1-stream download (whole machine), "
          "direct / gateway / nginx: " + " / ".join(f"{med('timers_per_gib', p):.0f}" for p in paths) + ".")
print("\nPer round (direct / gateway / nginx):\n")
metrics = ["relay_cpu_ms_per_gib", "client_cpu_ms_per_gib", "agent_cpu_ms_per_gib"] + (["timers_per_gib"] if timers else [])
for m in metrics + ["bulk1", "bulk16", "rps_c1", "p99_c1", "rps_c16", "p99_c16"]:
    rows = ", ".join(" / ".join(f"{vals[m, p][i]:.0f}" for p in paths) for i in range(len(vals[m, "direct"])))
    print(f"- {m}: {rows}")
# A per-round ratio; a zero denominator (too little moved for the clock tick) counts as infinite.
rounds_ratio = lambda m, a, b: [x / y if y else float("inf") for x, y in zip(vals[m, a], vals[m, b])]
ratio = lambda m, a, b: statistics.median(rounds_ratio(m, a, b))
print("\nPer-round gateway/nginx ratios: "
      + "; ".join(f"{m} " + ", ".join(f"{x:.2f}" for x in rounds_ratio(m, "gateway", "nginx"))
                  for m in ["bulk1", "bulk16", "relay_cpu_ms_per_gib"] + (["timers_per_gib"] if timers else [])) + ".")
print("\nMedian of the per-round ratios (paths measured seconds apart in each round): "
      + "; ".join(f"{m} gateway/direct {ratio(m, 'gateway', 'direct'):.2f}, gateway/nginx {ratio(m, 'gateway', 'nginx'):.2f}, "
                  f"nginx/direct {ratio(m, 'nginx', 'direct'):.2f}" for m in ["bulk1", "bulk16"]) + ".")
f = dict(kv.split("=", 1) for kv in idle.split()[1:])
count = int(f["count"])
def per_k(name):
    b, a = map(int, f[name].split(":"))
    return b, a, (a - b) / 1024 / count * 1000
gb, ga, gk = per_k("gateway")
ab, aa, ak = per_k("agent")
print(f"\nIdle connections: {count} opened through the gateway, {f['alive']} still answering after the idle wait.")
print(f"Gateway RSS {gb / 1024:.1f} -> {ga / 1024:.1f} MiB: {gk:.1f} MiB per 1,000 idle connections "
      f"(agent: {ab / 1024:.1f} -> {aa / 1024:.1f} MiB, {ak:.1f} MiB per 1,000).")
verdict = lambda ok: "**met**" if ok else "**missed**"
print("\n### Goals (throughput: median of the per-round ratios)\n")
print("| Goal | Measured | Verdict |\n|---|---|---|")
# Throughput is judged by the median of the per-round ratios: the machine's speed drifts
# between rounds, and within a round the paths run seconds apart.
for m, label in [("bulk1", "1 stream"), ("bulk16", "16 streams")]:
    g, d, n = med(m, "gateway"), med(m, "direct"), med(m, "nginx")
    gd, gn = ratio(m, "gateway", "direct"), ratio(m, "gateway", "nginx")
    print(f"| throughput >= 90% of direct, {label} | {gd * 100:.0f}% (medians {g:.0f} vs {d:.0f} MiB/s) | {verdict(gd >= 0.9)} |")
    print(f"| throughput >= nginx, {label} | {gn * 100:.0f}% of nginx (medians {g:.0f} vs {n:.0f} MiB/s) | {verdict(gn >= 1)} |")
for c in ["1", "16"]:
    added = med(f"p99_c{c}", "gateway") - med(f"p99_c{c}", "direct")
    nadded = med(f"p99_c{c}", "nginx") - med(f"p99_c{c}", "direct")
    print(f"| p99 added latency < 1 ms, {c} conn{'s' if c != '1' else ''} | {added / 1000:+.2f} ms (nginx {nadded / 1000:+.2f} ms) | {verdict(added < 1000)} |")
print(f"| gateway RSS < 50 MiB per 1,000 idle connections | {gk:.1f} MiB | {verdict(gk < 50 and int(f['alive']) == count)} |")
# Issue 44, point 3: throughput >= nginx on 1 and 16 streams (the rows above), relay CPU per
# GiB <= 0.4x nginx's, and timer expirations per GiB of the 1-stream download <= nginx's.
cpu = ratio("relay_cpu_ms_per_gib", "gateway", "nginx")
print(f"| relay CPU per GiB <= 0.4x nginx | {cpu:.2f}x (medians {med('relay_cpu_ms_per_gib', 'gateway'):.0f} vs "
      f"{med('relay_cpu_ms_per_gib', 'nginx'):.0f} ms) | {verdict(cpu <= 0.4)} |")
if timers:
    tim = ratio("timers_per_gib", "gateway", "nginx")
    print(f"| timer expirations per GiB <= nginx, 1 stream | {tim:.2f}x (medians {med('timers_per_gib', 'gateway'):.0f} vs "
          f"{med('timers_per_gib', 'nginx'):.0f}) | {verdict(tim <= 1)} |")
else:
    tim = None
    print("| timer expirations per GiB <= nginx, 1 stream | not measured (perf cannot count timer:hrtimer_expire_entry) | **missed** |")
b1, b16 = ratio("bulk1", "gateway", "nginx"), ratio("bulk16", "gateway", "nginx")
met = b1 >= 1 and b16 >= 1 and cpu <= 0.4 and tim is not None and tim <= 1
print(f"\nPOINT3 bulk1={b1:.2f} bulk16={b16:.2f} cpu={cpu:.2f} timers={'na' if tim is None else f'{tim:.2f}'} "
      f"busy={1 if busy == '1' else 0} verdict={'met' if met else 'missed'} rounds={rounds} load={load_start.split()[0]}")
EOF
