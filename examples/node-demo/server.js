// The bundled Node.js demo: a small web server with the routes the ingress add-on checks.
// Run it with `node server.js` (PORT defaults to 8080).
"use strict";

const http = require("node:http");

const port = Number(process.env.PORT || 8080);
const started = Date.now();

const server = http.createServer((req, res) => {
  const url = new URL(req.url, "http://localhost");
  if (url.pathname === "/health") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ status: "ok", uptimeMs: Date.now() - started }));
    return;
  }
  if (url.pathname === "/") {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><title>svc demo</title><h1>Hello from the svc Node.js demo</h1>\n");
    return;
  }
  res.writeHead(404, { "content-type": "text/plain" });
  res.end("not found\n");
});

server.listen(port, "127.0.0.1", () => {
  console.log(`node-demo listening on http://127.0.0.1:${port}`);
});
