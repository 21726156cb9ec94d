// A pool of persistent HTTP/1.1 connections, as Node.js programs keep them
// (test/e2e/clientshapes_test.go): --workers loops POST through one
// http.Agent({keepAlive: true, maxSockets: workers}), each request --think-ms
// after the last answer, 5 ms after a failure, never retried (Node.js's
// http client does not retry: it exposes req.reusedSocket for the caller to
// decide), so this count is the truth. The agent drops a free socket when
// its server closes it, and opens a new one when none is free.
//
// The same output as pool.py: one JSON line per request on stdout as it
// ends ({"w", "id", "start_us", "end_us", "outcome", "reused", "err"}), and
// when stdin ends, once every loop has finished its request, the tally:
// {"tally": {"ok": n, "broken": n, "refused": n, "other": n}}.
'use strict';
const http = require('http');

const args = { addr: '127.0.0.1:8080', workers: 8, 'think-ms': 20 };
for (let i = 2; i + 1 < process.argv.length; i += 2) {
  args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
}
const [host, port] = [args.addr.slice(0, args.addr.lastIndexOf(':')), Number(args.addr.slice(args.addr.lastIndexOf(':') + 1))];
const workers = Number(args.workers);
const think = Number(args['think-ms']);

const agent = new http.Agent({ keepAlive: true, maxSockets: workers });
const tally = { ok: 0, broken: 0, refused: 0, other: 0 };
let stopping = false;

// Microseconds since the epoch, from the monotonic clock anchored at the
// process's start (Date.now() has milliseconds only).
const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000);

function emit(line) {
  if (line.outcome) tally[line.outcome]++;
  process.stdout.write(JSON.stringify(line) + '\n');
}

function request(w, n) {
  return new Promise((resolve) => {
    const line = { w, id: `${w}-${n}`, start_us: nowUs(), reused: false };
    let done = false;
    const end = (outcome, err) => {
      if (done) return;
      done = true;
      line.outcome = outcome;
      if (err) line.err = String(err && err.code ? `${err.code}: ${err.message}` : err);
      line.end_us = nowUs();
      resolve(line);
    };
    const req = http.request({ host, port, method: 'POST', path: `/r/${w}-${n}`, agent,
      headers: { 'Content-Type': 'text/plain', 'Content-Length': 1 } }, (res) => {
      res.on('data', () => {});
      res.on('end', () => end(res.statusCode === 200 ? 'ok' : 'other', res.statusCode === 200 ? '' : `status ${res.statusCode}`));
      res.on('aborted', () => end('broken', 'response aborted'));
      res.on('error', (e) => end('broken', e));
    });
    req.on('socket', () => { line.reused = req.reusedSocket; });
    req.on('error', (e) => {
      line.reused = req.reusedSocket;
      switch (e.code) {
        case 'ECONNREFUSED':
          end('refused', e);
          break;
        case 'ECONNRESET': // also "socket hang up": closed before the answer
        case 'EPIPE':
          end('broken', e);
          break;
        default:
          end('other', e);
      }
    });
    req.setTimeout(15000, () => req.destroy(new Error('timeout')));
    req.end('x');
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function worker(w) {
  for (let n = 1; !stopping; n++) {
    const line = await request(w, n);
    emit(line);
    await sleep(line.outcome === 'ok' ? think : 5);
  }
}

const loops = [];
for (let w = 0; w < workers; w++) loops.push(worker(w));
process.stdin.on('data', () => {});
process.stdin.on('end', () => { stopping = true; });
Promise.all(loops).then(() => {
  process.stdout.write(JSON.stringify({ tally }) + '\n');
  agent.destroy();
  process.exit(0);
});
