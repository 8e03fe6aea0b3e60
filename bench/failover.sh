#!/usr/bin/env bash
# Issue 20, point 6, on loopback, in one run:
#   - new-connection latency (a TCP connect, a TLS handshake, GET /small, closed: one
#     handshake per request) to the same agent and app three ways: direct (the agent's
#     `directListen` port), gateway (`svc gateway run` and the agent's tunnel), nginx
#     (`stream { ssl_preread on; }` in front of the direct port): p50/p99 and the
#     gateway's added latency against both peers;
#   - failover: two gateways serving the route, the agent tunnelling to both (the second
#     pinned by its certificate's digest); a client that tries gateway A then B has A killed
#     (SIGKILL) under it: time from the kill to the first answered new connection.
# Method and results: docs/performance.md, "New connections and gateway failover".
#
# Usage: bench/failover.sh      (env: ROUNDS=3 COUNT=500 TRIALS=5 KEEP_TMP=0 CARGO_TARGET_DIR
#                               POOL_PER_REPLICA: the gateways' poolPerReplica, default theirs;
#                               PERF_COUNT=N: also the CPU time, syscalls and context switches
#                               each process spends per new connection, over N connections per
#                               path (perf stat); PERF_TRACE=1: and the gateway's syscalls by name;
#                               PERF_RECORD=1: and where the gateway's and the agent's CPU went;
#                               GATEWAY_WORKERS: the gateways' runtime threads)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH="$ROOT/bench"
# shellcheck source=bench/common.sh
. "$BENCH/common.sh"
ROUNDS=${ROUNDS:-3}
COUNT=${COUNT:-500}
TRIALS=${TRIALS:-5}
HOST=node-demo-acme.localhost

bench_tools_and_build

TMP=$(mktemp -d /tmp/svc-failover-bench.XXXXXX)
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "${KEEP_TMP:-0}" = 1 ]; then say "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { bench_free_port; }
DEMO_PORT=$(free_port); API_PORT=$(free_port); DIRECT_PORT=$(free_port); NGINX_PORT=$(free_port); APP_PORT=$(free_port)
declare -A GW_PUBLIC GW_TUNNEL GW_ADMIN GW_PID
for g in a b; do GW_PUBLIC[$g]=$(free_port); GW_TUNNEL[$g]=$(free_port); GW_ADMIN[$g]=$(free_port); done

bench_demo "$DEMO_PORT" "$API_PORT"

# One tunnel certificate for both gateways; the agent trusts A by the CA and pins B.
bench_tunnel_cert
mkdir -p "$TMP/agent"
python3 - "$TMP" "$DIRECT_PORT" "$APP_PORT" "${GW_PUBLIC[a]}" "${GW_TUNNEL[a]}" "${GW_ADMIN[a]}" \
  "${GW_PUBLIC[b]}" "${GW_TUNNEL[b]}" "${GW_ADMIN[b]}" <<'EOF'
import glob, hashlib, json, os, ssl, sys
# The route key's public half: the last 32 bytes of its PKCS#8 document (ring's v2 form).
def route_public_key(text):
    import base64
    der = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return base64.urlsafe_b64encode(der[-32:]).decode().rstrip("=")
tmp, direct, app, *gw = sys.argv[1], *map(int, sys.argv[2:])
agent_dir = os.path.dirname(glob.glob(f"{tmp}/demo-jobs/dep_*/r1/agent/agent.json")[0])
agent = json.load(open(f"{agent_dir}/agent.json"))
# The job's agent reads its files where its sandbox mounts them; this one runs outside.
agent["gatewayCa"] = os.path.join(agent_dir, os.path.basename(agent["gatewayCa"]))
pin = hashlib.sha256(ssl.PEM_cert_to_DER_cert(open(f"{tmp}/tunnel.pem").read())).hexdigest()
agent.update(gateway=f"127.0.0.1:{gw[1]}", appPort=app, directListen=f"127.0.0.1:{direct}",
             pinnedGateways=[{"address": f"127.0.0.1:{gw[4]}", "tunnelSha256": pin}])
# Its gateways are these two: asking the demo's coordinator would replace B with its list.
agent.pop("coordinator", None)
fd = os.open(f"{tmp}/agent/agent.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
os.write(fd, json.dumps(agent, indent=2).encode()); os.close(fd)
for name, (public, tunnel, admin) in {"a": gw[0:3], "b": gw[3:6]}.items():
    json.dump({
        "public": f"127.0.0.1:{public}", "tunnel": f"127.0.0.1:{tunnel}", "admin": f"127.0.0.1:{admin}",
        "tunnelCert": f"{tmp}/tunnel.pem", "tunnelKey": f"{tmp}/tunnel-key.pem",
        "routes": [{"routeId": agent["routeId"], "hostnames": [agent["hostname"]],
                    "routePublicKey": route_public_key(agent["routeKey"]),
                    "proxyProtocol": agent["proxyProtocol"], "maxConnections": 4096}],
        # POOL_PER_REPLICA=0: no data connections dialed ahead (as before issue 44, point 4).
        **({"poolPerReplica": int(os.environ["POOL_PER_REPLICA"])} if "POOL_PER_REPLICA" in os.environ else {}),
    }, open(f"{tmp}/gateway-{name}.json", "w"), indent=2)
EOF

start_gateway() { # a|b
  # GATEWAY_WORKERS: the gateways' runtime threads (TOKIO_WORKER_THREADS; default one a core).
  ${GATEWAY_WORKERS:+env TOKIO_WORKER_THREADS=$GATEWAY_WORKERS} "$SVC" gateway run --config "$TMP/gateway-$1.json" >>"$TMP/gateway-$1.log" 2>&1 &
  GW_PID[$1]=$!; PIDS+=($!)
}
say "starting the bench app, gateways A and B, the agent and nginx"
node "$BENCH/ingress-app.js" "$APP_PORT" >"$TMP/app.log" 2>&1 &
PIDS+=($!)
start_gateway a
start_gateway b
"$SVC" agent run --config "$TMP/agent/agent.json" >"$TMP/agent.log" 2>&1 &
AGENT_PID=$!; PIDS+=($!)
bench_nginx "$NGINX_PORT" "$DIRECT_PORT"

# A gateway's replicas of the route in rotation (1 once the agent's tunnel to it is up).
in_rotation() {
  curl -s "http://127.0.0.1:${GW_ADMIN[$1]}/metrics" 2>/dev/null \
    | awk '/^svc_gateway_route_replicas\{.*state="in_rotation"\}/ {print $2; found=1} END {if (!found) print 0}'
}
wait_in_rotation() { # gateway
  for _ in $(seq 1 300); do [ "$(in_rotation "$1")" = 1 ] && return 0; sleep 0.1; done
  tail -n 20 "$TMP/agent.log" "$TMP/gateway-$1.log" >&2; die "the agent's tunnel to gateway $1 did not come up"
}
wait_in_rotation a
wait_in_rotation b
declare -A PORT=([direct]=$DIRECT_PORT [gateway]=${GW_PUBLIC[a]} [nginx]=$NGINX_PORT)
PATHS=(direct gateway nginx)
for p in "${PATHS[@]}"; do
  python3 "$BENCH/newconn.py" latency "${PORT[$p]}" "$HOST" "$CA" 3 >/dev/null || die "$p does not answer"
done
say "all paths answer (direct :$DIRECT_PORT, gateway A :${GW_PUBLIC[a]}, B :${GW_PUBLIC[b]}, nginx :$NGINX_PORT)"

RES="$TMP/results"; : >"$RES"   # lines: metric path round value
record() { echo "$1 $2 $3 $4" >>"$RES"; say "round $3 $2 $1 = $4"; }
for r in $(seq 1 "$ROUNDS"); do
  # Rotated each round, so drift in the machine's speed does not favour one path.
  order=("${PATHS[@]:$(( (r - 1) % 3 ))}" "${PATHS[@]:0:$(( (r - 1) % 3 ))}")
  for p in "${order[@]}"; do
    set -- $(python3 "$BENCH/newconn.py" latency "${PORT[$p]}" "$HOST" "$CA" "$COUNT" | grep '^RESULT')
    record p50 "$p" "$r" "${3#p50_us=}"
    record p99 "$p" "$r" "${4#p99_us=}"
  done
done

# The work per new connection, which a loaded machine's latencies hide (issue 44, point 4):
# each process's task-clock, syscalls and context switches over PERF_COUNT connections, read
# by `perf stat -p` around the client alone. The agent is counted on every path: on nginx's
# and direct it serves the connection directly, on the gateway's through its tunnel.
perf_counts() { # label pid[,pid...] -> starts perf stat in the background; sets PERF_PIDS
  perf stat -x, -e task-clock,raw_syscalls:sys_enter,context-switches -p "$2" -o "$TMP/perf-$1.csv" &
  PERF_PIDS+=($!)
}
if [ "${PERF_COUNT:-0}" -gt 0 ]; then
  command -v perf >/dev/null || die "PERF_COUNT needs perf (linux-perf)"
  NGINX_WORKERS=$(pgrep -P "$NGINX_PID" | paste -sd, -)
  declare -A PROXY_PIDS=([gateway]=${GW_PID[a]} [nginx]=$NGINX_WORKERS)
  for p in "${PATHS[@]}"; do
    PERF_PIDS=()
    [ -n "${PROXY_PIDS[$p]:-}" ] && perf_counts "$p-proxy" "${PROXY_PIDS[$p]}"
    perf_counts "$p-agent" "$AGENT_PID"
    if [ "$p" = gateway ] && [ "${PERF_TRACE:-0}" = 1 ]; then
      perf trace -s -p "${GW_PID[a]}" -o "$TMP/perf-trace-gateway.txt" & PERF_PIDS+=($!)
    fi
    if [ "$p" = gateway ] && [ "${PERF_RECORD:-0}" = 1 ]; then
      perf record -q -e cpu-clock -F 4000 -g -p "${GW_PID[a]}" -o "$TMP/perf-gateway.data" 2>/dev/null & PERF_PIDS+=($!)
      perf record -q -e cpu-clock -F 4000 -g -p "$AGENT_PID" -o "$TMP/perf-agent.data" 2>/dev/null & PERF_PIDS+=($!)
    fi
    sleep 0.5  # perf attached
    python3 "$BENCH/newconn.py" latency "${PORT[$p]}" "$HOST" "$CA" "$PERF_COUNT" >/dev/null
    for pid in "${PERF_PIDS[@]}"; do kill -INT "$pid"; done
    for pid in "${PERF_PIDS[@]}"; do wait "$pid" || true; done
  done
  python3 - "$TMP" "$PERF_COUNT" <<'PERF'
import csv, os, sys
tmp, n = sys.argv[1], int(sys.argv[2])
def read(label):
    path = f"{tmp}/perf-{label}.csv"
    if not os.path.exists(path):
        return None
    got = {}
    for row in csv.reader(l for l in open(path) if l.strip() and not l.startswith("#")):
        try:
            got[row[2]] = float(row[0])
        except (ValueError, IndexError):
            pass
    return got
fmt = lambda c: (f"{c['task-clock'] * 1000 / n:.0f} us | {c['raw_syscalls:sys_enter'] / n:.1f} | "
                 f"{c['context-switches'] / n:.1f}") if c else "- | - | -"
print(f"\n### Work per new connection ({n} connections per path, perf stat)\n")
print("| Path | proxy CPU | proxy syscalls | proxy switches | agent CPU | agent syscalls | agent switches |")
print("|---|---|---|---|---|---|---|")
for p in ["direct", "gateway", "nginx"]:
    print(f"| {p} | {fmt(read(p + '-proxy'))} | {fmt(read(p + '-agent'))} |")
PERF
  for who in gateway agent; do
    [ -f "$TMP/perf-$who.data" ] || continue
    echo; echo "Where $who's CPU went on the gateway path (perf record -e cpu-clock, self):"
    perf report -i "$TMP/perf-$who.data" --no-children --sort sym --stdio 2>/dev/null \
      | grep -E '^ +[0-9.]+%' | head -"${PERF_TOP:-25}"
  done
  [ -f "$TMP/perf-trace-gateway.txt" ] && { echo; echo "Gateway A's syscalls over $PERF_COUNT connections:"; awk -v n="$PERF_COUNT" '$1 ~ /^[a-z_0-9]+$/ && $2 ~ /^[0-9]+$/ {c[$1] += $2} END {for (k in c) printf "  %-16s %8d  %.2f per connection\n", k, c[k], c[k] / n}' "$TMP/perf-trace-gateway.txt" | sort -k2 -n -r | head -20; }
fi

for t in $(seq 1 "$TRIALS"); do
  wait_in_rotation a
  set -- $(python3 "$BENCH/newconn.py" failover "${GW_PUBLIC[a]}" "${GW_PUBLIC[b]}" "$HOST" "$CA" "${GW_PID[a]}" 1 | grep '^RESULT')
  record failover_us gateway "$t" "${2#failover_us=}"
  record failed_after_kill gateway "$t" "${3#failed_after_kill=}"
  wait "${GW_PID[a]}" 2>/dev/null || true
  start_gateway a
done

python3 - "$RES" "$ROUNDS" "$COUNT" "$TRIALS" <<'REPORT'
import statistics, sys
from collections import defaultdict
res, rounds, count, trials = sys.argv[1], *sys.argv[2:]
vals = defaultdict(list)
for line in open(res):
    metric, path, _round, value = line.split()
    vals[metric, path].append(float(value))
med = lambda m, p: statistics.median(vals[m, p])
ms = lambda us: f"{us / 1000:.2f} ms"
paths = ["direct", "gateway", "nginx"]
print(f"\n### New connections (median of {rounds} rounds of {count} connections each)\n")
print("| Path | p50 | p99 |\n|---|---|---|")
for p in paths:
    print(f"| {p} | {ms(med('p50', p))} | {ms(med('p99', p))} |")
ratio = lambda m, a, b: statistics.median(x / y for x, y in zip(vals[m, a], vals[m, b]))
print()
for q in ["p50", "p99"]:
    print(f"{q}: gateway adds {ms(med(q, 'gateway') - med(q, 'direct'))} to direct (nginx adds "
          f"{ms(med(q, 'nginx') - med(q, 'direct'))}); per-round ratios gateway/direct "
          f"{ratio(q, 'gateway', 'direct'):.2f}, gateway/nginx {ratio(q, 'gateway', 'nginx'):.2f}.")
f = vals["failover_us", "gateway"]
failed = vals["failed_after_kill", "gateway"]
print(f"\n### Failover ({trials} trials: gateway A killed under a client that tries A, then B)\n")
print(f"Kill to first answered new connection: median {ms(statistics.median(f))}, max {ms(max(f))} "
      f"(trials: {', '.join(ms(x) for x in f)}); new connections failed after the kill: {int(sum(failed))}.")
REPORT
