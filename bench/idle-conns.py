#!/usr/bin/env python3
"""Idle tunneled connections for bench/ingress.sh: reads the VmRSS of the given processes,
opens COUNT TLS connections to 127.0.0.1:PORT with SNI HOST (verified against CAFILE),
completes each handshake and one HTTP request (so the agent's TLS and HTTP state exist on
every connection), leaves them idle, waits SETTLE seconds, reads VmRSS again, closes them.
Prints one line: RESULT count=N alive=N name=before_kib:after_kib ... name_anon=... name_lazyfree=...
(the VmRSS, then from /proc/PID/smaps_rollup the anonymous part and the part freed with
MADV_FREE but still counted until the kernel takes it back; all in KiB, before:after).

Usage: idle-conns.py PORT HOST CAFILE COUNT SETTLE name=PID [name=PID ...]
(env IDLE_OPEN_GAP=SECONDS: a pause after each connection opened, to see how much of what is
held depends on how many connections were busy at once; IDLE_SMAPS_DIR=DIR: copies each process's /proc/PID/smaps there, NAME.before and
NAME.after, to see which mappings grew)
"""
import os
import shutil
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


def rollup_kib(pid):
    """The anonymous and the lazily freed KiB of `pid` (0 where the kernel does not say)."""
    fields = {"Anonymous": 0, "LazyFree": 0}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in fields:
                    fields[key] = int(rest.split()[0])
    except OSError:
        pass
    return fields["Anonymous"], fields["LazyFree"]


def measure(procs, when):
    keep = os.environ.get("IDLE_SMAPS_DIR")
    if keep:
        for name, pid in procs:
            shutil.copyfile(f"/proc/{pid}/smaps", os.path.join(keep, f"{name}.{when}"))
    return {name: (rss_kib(pid), *rollup_kib(pid)) for name, pid in procs}


def main():
    port, host, cafile, count, settle = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    procs = [a.split("=", 1) for a in sys.argv[6:]]
    # IDLE_OPEN_GAP=SECONDS: a pause after each connection is opened (default none).
    gap = float(os.environ.get("IDLE_OPEN_GAP", "0"))
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.set_alpn_protocols(["http/1.1"])
    time.sleep(settle)
    before = measure(procs, "before")
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
        if gap:
            time.sleep(gap)
    time.sleep(settle)
    after = measure(procs, "after")
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
    fields = " ".join(
        f"{name}={before[name][0]}:{after[name][0]} {name}_anon={before[name][1]}:{after[name][1]}"
        f" {name}_lazyfree={before[name][2]}:{after[name][2]}"
        for name, _ in procs
    )
    print(f"RESULT count={count} alive={alive} {fields}", flush=True)


if __name__ == "__main__":
    main()
