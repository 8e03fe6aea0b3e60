// The bundled Node.js demo: a small web server with no npm dependencies (node:http only).
// Run it with `node server.js` (PORT defaults to 8080). `svc ingress demo` carries a copy of
// this file inside the binary and runs it behind the agent.
//
//   GET /            a page that shows the JSON endpoint and a live event stream
//   GET /api/info    JSON: the client address the app sees (through PROXY v2), time, uptime
//   GET /events      server-sent events: a tick every second
//   GET /health      the app's own health, which the agent's /health checks
"use strict";

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

server.listen(port, "127.0.0.1", () => {
  console.log(`node-demo listening on http://127.0.0.1:${port}`);
});
