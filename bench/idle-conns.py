#!/usr/bin/env python3
"""Idle tunneled connections for bench/ingress.sh: reads the VmRSS of the given processes,
opens COUNT TLS connections to 127.0.0.1:PORT with SNI HOST (verified against CAFILE),
completes each handshake and one HTTP request (so the agent's TLS and HTTP state exist on
every connection), leaves them idle, waits SETTLE seconds, reads VmRSS again, closes them.
Prints one line: RESULT count=N name=before_kib:after_kib ...

Usage: idle-conns.py PORT HOST CAFILE COUNT SETTLE name=PID [name=PID ...]
"""
import socket
import ssl
import sys
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def main():
    port, host, cafile, count, settle = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    procs = [a.split("=", 1) for a in sys.argv[6:]]
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.set_alpn_protocols(["http/1.1"])
    time.sleep(settle)
    before = {name: rss_kib(pid) for name, pid in procs}
    conns = []
    request = f"GET /small HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    for i in range(count):
        raw = socket.create_connection(("127.0.0.1", int(port)), timeout=30)
        tls = ctx.wrap_socket(raw, server_hostname=host)
        tls.sendall(request)
        got = b""
        while b"\r\n\r\n" not in got or not got.endswith(b"\n"):
            chunk = tls.recv(4096)
            if not chunk:
                raise RuntimeError(f"connection {i} closed: {got!r}")
            got += chunk
        if not got.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"connection {i}: {got[:60]!r}")
        conns.append(tls)
    time.sleep(settle)
    after = {name: rss_kib(pid) for name, pid in procs}
    # Still open? Every connection must still answer.
    alive = 0
    for tls in conns:
        try:
            tls.sendall(request)
            if tls.recv(4096).startswith(b"HTTP/1.1 200"):
                alive += 1
        except OSError:
            pass
    for tls in conns:
        tls.close()
    fields = " ".join(f"{name}={before[name]}:{after[name]}" for name, _ in procs)
    print(f"RESULT count={count} alive={alive} {fields}", flush=True)


if __name__ == "__main__":
    main()
