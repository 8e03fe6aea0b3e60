#!/usr/bin/env python3
"""New-connection latency and gateway failover for bench/failover.sh.

  newconn.py latency PORT HOST CAFILE COUNT
      COUNT new connections to 127.0.0.1:PORT one after another, each a TCP connect, a TLS
      handshake with SNI HOST (verified against CAFILE), `GET /small` and the whole answer,
      then closed. Prints: RESULT count=N p50_us=.. p99_us=.. mean_us=..

  newconn.py failover PRIMARY SECONDARY HOST CAFILE KILL_PID WARM_SECS
      The client of a name with two addresses: each new connection tries PRIMARY, and
      SECONDARY if PRIMARY fails. After WARM_SECS of connections (all must succeed) it sends
      SIGKILL to KILL_PID (PRIMARY's gateway) and goes on: the failover time is from the kill
      to the first answer completed after it (through SECONDARY), then 1 s more of connections
      that must all succeed. Prints: RESULT failover_us=.. failed_after_kill=.. after=N
"""
import os
import signal
import socket
import ssl
import statistics
import sys
import time


def one(ctx, port, host):
    """One new connection: True when it answered 200."""
    raw = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    try:
        tls = ctx.wrap_socket(raw, server_hostname=host)
        tls.sendall(f"GET /small HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        got = b""
        while True:
            chunk = tls.recv(65536)
            if not chunk:
                break
            got += chunk
        return got.startswith(b"HTTP/1.1 200")
    finally:
        raw.close()


def attempt(ctx, port, host):
    try:
        return one(ctx, port, host)
    except (OSError, ssl.SSLError):
        return False


def context(cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def latency(port, host, cafile, count):
    ctx = context(cafile)
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        if not one(ctx, port, host):
            sys.exit(f"port {port}: a connection was not answered 200")
        times.append((time.perf_counter() - t0) * 1e6)
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    print(f"RESULT count={count} p50_us={statistics.median(times):.0f} p99_us={p99:.0f} mean_us={statistics.mean(times):.0f}")


def failover(primary, secondary, host, cafile, kill_pid, warm):
    ctx = context(cafile)
    connect = lambda: attempt(ctx, primary, host) or attempt(ctx, secondary, host)
    start = time.monotonic()
    while time.monotonic() - start < warm:
        if not connect():
            sys.exit("a connection failed before the kill")
    os.kill(kill_pid, signal.SIGKILL)
    killed = time.perf_counter()
    failed = 0
    while not connect():
        failed += 1
        if time.perf_counter() - killed > 30:
            sys.exit("no connection answered within 30 s of the kill")
    first = time.perf_counter()
    after = 0
    while time.perf_counter() - first < 1:
        if not connect():
            failed += 1
        after += 1
    print(f"RESULT failover_us={(first - killed) * 1e6:.0f} failed_after_kill={failed} after={after}")


def main():
    mode = sys.argv[1]
    if mode == "latency":
        latency(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif mode == "failover":
        failover(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]), float(sys.argv[7]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
