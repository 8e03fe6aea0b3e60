// The benchmark's app behind the agent (bench/ingress.sh): GET /bytes?n=N streams N bytes
// from memory (respecting backpressure), GET /health answers 200, anything else a small
// fixed body. Usage: node ingress-app.js PORT
'use strict';
const http = require('http');

const port = Number(process.argv[2]);
const CHUNK = Buffer.alloc(1 << 20, 'x');
const SMALL = Buffer.from('{"ok":true,"bench":"ingress"}\n');

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x');
  if (url.pathname === '/bytes') {
    let left = Number(url.searchParams.get('n') || 0);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(left) });
    const pump = () => {
      while (left > 0) {
        const n = Math.min(left, CHUNK.length);
        left -= n;
        const ok = res.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n));
        if (!ok) return res.once('drain', pump);
      }
      res.end();
    };
    return pump();
  }
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(SMALL.length) });
  res.end(SMALL);
});
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1', () => console.log(`bench app on 127.0.0.1:${port}`));
