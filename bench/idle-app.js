// The idle benchmark's app (bench/idle.sh): the lightest web job that deploys, with only
// GET /health (the agent's health check) and GET / . Usage: node server.js (PORT, default 8080)
'use strict';
const http = require('http');

const BODY = Buffer.from('{"ok":true,"bench":"idle"}\n');
http
  .createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(BODY.length) });
    res.end(BODY);
  })
  .listen(Number(process.env.PORT || 8080));
