#!/usr/bin/env python3
"""The 900 KB attack on `svc serve` (issue 14): publications of a manifest of `a: 1` lines sent
at once and never read, then closed; the server's RSS (VmRSS of /proc/PID/status) before,
at peak and after, and how long a GET waits meanwhile. Method and results:
docs/performance.md, "Memory after load".

Usage: bench/memory-after-load.py [SVC] [N]     (default target/debug/svc, 30 publications;
       env LINES=174000: `a: 1` lines, the most a 1 MiB JSON body holds)
"""

import json
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SVC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/debug/svc")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 30
LINES = int(os.environ.get("LINES", "174000"))

data = tempfile.mkdtemp(prefix="svc-memory-")
token = subprocess.run(
    [SVC, "admin", "token", "create", "--data-dir", data, "--org", "acme", "--role", "developer"],
    capture_output=True, text=True, check=True,
).stdout.strip()
server = subprocess.Popen(
    [SVC, "serve", "--listen", "127.0.0.1:0", "--data-dir", data],
    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
)
for line in server.stderr:
    found = re.search(r"listening on http://(\S+):(\d+)", line)
    if found:
        host, port = found.group(1), int(found.group(2))
        break
threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()


def rss_mb():
    with open(f"/proc/{server.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return 0


def send(path, body, auth=True):
    sock = socket.create_connection((host, port))
    payload = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    if auth:
        head += f"Authorization: Bearer {token}\r\n"
    head += f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    sock.sendall(head.encode() + payload)
    return sock


def get_seconds():
    """A GET (401 without a token: no store work), timed."""
    start = time.time()
    sock = socket.create_connection((host, port))
    sock.sendall(b"GET /api/capabilities HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    sock.recv(100)
    sock.close()
    return time.time() - start


try:
    send("/api/applications", {"applicationId": "demo"}).recv(100)
    time.sleep(1)
    before = rss_mb()
    manifest = "a: 1\n" * LINES
    started = time.time()
    unread = [send("/api/applications/demo/policy-versions", {"manifest": manifest}) for _ in range(N)]
    peak, slowest_get = before, 0.0
    while True:
        peak = max(peak, rss_mb())
        slowest_get = max(slowest_get, get_seconds())
        ready, _, _ = select.select(unread, [], [], 0)
        if len(ready) == N:
            break
        time.sleep(0.5)
    answered = time.time() - started
    for sock in unread:
        sock.close()
    time.sleep(13)  # idle blocking-pool threads retire after 10 s
    for _ in range(20):
        get_seconds()
    after = rss_mb()
    print(f"{N} publications of {LINES} `a: 1` lines, answered in {answered:.1f} s, never read")
    print(f"RSS before {before} MB, peak {peak} MB, after {after} MB; slowest GET meanwhile {slowest_get:.2f} s")
finally:
    server.kill()
    server.wait()
    subprocess.run(["rm", "-rf", data])
