// A Node.js service as PID 1 would run it: it stays up until it is stopped
// and has no SIGTERM listener of its own, so Node.js's built-in one-shot
// handler (SA_RESETHAND: reset the terminal, re-raise) is what SIGTERM
// meets. With the argument "handle" it registers the listener the fix
// names, which exits 0.
if (process.argv[2] === 'handle') {
  process.on('SIGTERM', () => process.exit(0));
}
setInterval(() => {}, 1 << 30);
console.log('ready');
