# Shared by the loopback benchmarks (bench/ingress.sh, bench/failover.sh): sourced once ROOT
# is set; the functions below use HOST, TMP and PIDS, which the script sets before calling them.

TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
case "$TARGET" in /*) ;; *) TARGET="$ROOT/$TARGET" ;; esac

say() { printf '[bench] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# A scratch directory TMP (named after $1) and a list PIDS of what the bench started: at exit,
# each is killed and waited for, then TMP removed.
bench_scratch() {
  TMP=$(mktemp -d "/tmp/$1.XXXXXX")
  PIDS=()
  trap bench_cleanup EXIT
}
bench_cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$TMP"
}

# Installs what is missing (Debian), then builds the release `svc` (or takes SVC_BIN); sets SVC.
bench_tools_and_build() {
  local need=() tool SUDO=
  [ -e /usr/lib/nginx/modules/ngx_stream_module.so ] && command -v nginx >/dev/null || need+=(nginx libnginx-mod-stream)
  for tool in "$@" curl openssl python3; do command -v "$tool" >/dev/null || need+=("$tool"); done
  command -v node >/dev/null || need+=(nodejs)
  if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    command -v apt-get >/dev/null || die "missing ${need[*]} and no apt-get"
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}" >&2 \
      || { $SUDO apt-get update >&2 && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}" >&2; }
  fi
  if [ -n "${SVC_BIN:-}" ]; then
    # A binary built before (to compare two builds in one session): no build.
    say "using $SVC_BIN (SVC_BIN), not building"
    SVC=$SVC_BIN
  else
    say "building svc (release, target $TARGET)"
    (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET" cargo build --release -p svc-cli >&2)
    SVC="$TARGET/release/svc"
  fi
  [ -x "$SVC" ] || die "no $SVC"
}

bench_free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts `svc ingress demo` in $TMP/demo on ports $1 (console) and $2 (API): the development
# CA and the coordinator whose agent API signs the bench agent's CSR (its own gateway and
# job sit idle). Sets CA.
bench_demo() {
  say "starting svc ingress demo (CA and coordinator)"
  "$SVC" ingress demo --data-dir "$TMP/demo" --listen "127.0.0.1:$1" --api-listen "127.0.0.1:$2" >"$TMP/demo.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 600); do grep -q '^ready ' "$TMP/demo.log" && break; sleep 0.1; done
  grep -q '^ready ' "$TMP/demo.log" || { cat "$TMP/demo.log" >&2; die "the demo did not come up"; }
  CA="$TMP/demo/ca.pem"
}

# A gateway tunnel certificate signed by the demo's CA: $TMP/tunnel.pem and its key.
bench_tunnel_cert() {
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=gateway.localhost \
    -keyout "$TMP/tunnel-key.pem" -out "$TMP/tunnel.csr" 2>/dev/null
  printf 'subjectAltName=DNS:gateway.localhost\nbasicConstraints=CA:FALSE\n' >"$TMP/tunnel.ext"
  openssl x509 -req -in "$TMP/tunnel.csr" -CA "$CA" -CAkey "$TMP/demo/ca-key.pem" -CAcreateserial \
    -days 2 -extfile "$TMP/tunnel.ext" -out "$TMP/tunnel.pem" 2>/dev/null
}

# nginx on port $1 with `stream { ssl_preread on; }`, sending SNI $HOST to port $2 (the
# agent's direct port) and any other name nowhere. Sets NGINX_PID.
bench_nginx() {
  mkdir -p "$TMP/nginx"
  cat >"$TMP/nginx/nginx.conf" <<NGINX
load_module /usr/lib/nginx/modules/ngx_stream_module.so;
worker_processes auto;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 8192; }
stream {
    map \$ssl_preread_server_name \$upstream {
        $HOST agent;
        default  refuse;
    }
    upstream agent  { server 127.0.0.1:$2; }
    upstream refuse { server 127.0.0.1:1; }
    server {
        listen 127.0.0.1:$1;
        ssl_preread on;
        proxy_pass \$upstream;
    }
}
NGINX
  nginx -t -q -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/error.log" >&2
  nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/error.log" -g 'daemon off;' &
  NGINX_PID=$!; PIDS+=($NGINX_PID)
}
