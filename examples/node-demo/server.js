// The bundled Node.js demo: a small web server with no npm dependencies (node:http only).
// Run it with `node server.js` (PORT defaults to 8080). `svc ingress demo` carries a copy of
// this file inside the binary and runs it behind the agent.
//
//   GET /            a page that shows the JSON endpoint and a live event stream
//   GET /api/info    JSON: the client address the app sees (through PROXY v2), time, uptime
//   GET /events      server-sent events: a tick every second
//   GET /ws          WebSocket echo (text messages come back as "echo: <text>")
//   GET /health      the app's own health, which the agent's /health checks
"use strict";

const crypto = require("node:crypto");
const http = require("node:http");

const port = Number(process.env.PORT || 8080);
const started = Date.now();

const page = `<!doctype html>
<html lang="en">
<meta charset="utf-8">
<title>svc demo</title>
<h1>Hello from the svc Node.js demo</h1>
<p>Served by a job behind NAT, through the svc gateway, with a certificate only the job holds.</p>
<p>Your address, as the app sees it: <code id="client">...</code></p>
<p>Events: <code id="tick">waiting</code></p>
<script>
fetch("/api/info").then(r => r.json()).then(i => { document.getElementById("client").textContent = i.clientAddress; });
const events = new EventSource("/events");
events.onmessage = e => { document.getElementById("tick").textContent = e.data; };
</script>
</html>
`;

function clientAddress(req) {
  // The agent terminates TLS and forwards the client address it read from the PROXY header.
  const forwarded = req.headers["x-forwarded-for"];
  return forwarded ? String(forwarded).split(",")[0].trim() : req.socket.remoteAddress;
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, "http://localhost");
  if (url.pathname === "/health") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ status: "ok", uptimeMs: Date.now() - started }));
  } else if (url.pathname === "/") {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(page);
  } else if (url.pathname === "/api/info") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({
      clientAddress: clientAddress(req),
      host: req.headers.host || null,
      protocol: req.headers["x-forwarded-proto"] || "http",
      time: new Date().toISOString(),
      uptimeMs: Date.now() - started,
    }));
  } else if (url.pathname === "/events") {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    let n = 0;
    const send = () => res.write(`data: tick ${++n} at ${new Date().toISOString()}\n\n`);
    send();
    const timer = setInterval(send, 1000);
    req.on("close", () => clearInterval(timer));
  } else {
    res.writeHead(404, { "content-type": "text/plain" });
    res.end("not found\n");
  }
});

// A minimal RFC 6455 echo (no npm dependency): text frames of any size, ping, close.
server.on("upgrade", (req, socket) => {
  const url = new URL(req.url, "http://localhost");
  const key = req.headers["sec-websocket-key"];
  if (url.pathname !== "/ws" || String(req.headers.upgrade).toLowerCase() !== "websocket" || !key) {
    socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n");
    return;
  }
  const accept = crypto.createHash("sha1").update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
  let pending = Buffer.alloc(0);
  const send = (opcode, payload) => {
    const n = payload.length;
    const head = n < 126 ? Buffer.from([0x80 | opcode, n])
      : n < 65536 ? Buffer.from([0x80 | opcode, 126, n >> 8, n & 255])
      : Buffer.concat([Buffer.from([0x80 | opcode, 127]), (() => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; })()]);
    socket.write(Buffer.concat([head, payload]));
  };
  socket.on("data", (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    for (;;) {
      if (pending.length < 2) return;
      const opcode = pending[0] & 0x0f;
      let n = pending[1] & 0x7f;
      let at = 2;
      if (n === 126) { if (pending.length < 4) return; n = pending.readUInt16BE(2); at = 4; }
      else if (n === 127) { if (pending.length < 10) return; n = Number(pending.readBigUInt64BE(2)); at = 10; }
      const masked = (pending[1] & 0x80) !== 0;
      const end = at + (masked ? 4 : 0) + n;
      if (pending.length < end) return;
      const payload = Buffer.from(pending.subarray(end - n, end));
      if (masked) {
        const mask = pending.subarray(at, at + 4);
        for (let i = 0; i < n; i++) payload[i] ^= mask[i & 3];
      }
      pending = pending.subarray(end);
      if (opcode === 0x1) send(0x1, Buffer.concat([Buffer.from("echo: "), payload]));
      else if (opcode === 0x9) send(0xa, payload);
      else if (opcode === 0x8) { send(0x8, payload); socket.end(); return; }
    }
  });
  socket.on("error", () => socket.destroy());
});

server.listen(port, "127.0.0.1", () => {
  console.log(`node-demo listening on http://127.0.0.1:${port}`);
});
