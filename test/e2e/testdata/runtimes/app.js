// A Node.js service as PID 1 would run it: it stays up until it is stopped
// and has no SIGTERM listener of its own, so Node.js's built-in one-shot
// handler (SA_RESETHAND: reset the terminal, re-raise) is what SIGTERM
// meets. With the argument "handle" it registers the listener the fix
// names, which exits 0. With "close" it serves HTTP on :8081 (it prints
// "ready" once it listens, and "request" when one comes), each request
// answered after 60 s, and on SIGTERM calls server.close(), which waits for
// the requests in flight: a shutdown that does not finish in the grace.
if (process.argv[2] === 'handle') {
  process.on('SIGTERM', () => process.exit(0));
}
if (process.argv[2] === 'close') {
  const http = require('http');
  const server = http.createServer((req, res) => {
    console.log('request');
    setTimeout(() => res.end('ok\n'), 60000);
  });
  server.listen(8081, '127.0.0.1', () => console.log('ready'));
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}
setInterval(() => {}, 1 << 30);
if (process.argv[2] !== 'close') {
  console.log('ready'); // "close" says it once it listens
}
