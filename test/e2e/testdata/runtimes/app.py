# A CPython service as PID 1 would run it: it stays up until it is stopped
# and leaves SIGTERM at its default action. With the argument "handle" it
# installs the handler the fix names, which exits 0.
import signal
import sys
import time

if sys.argv[1:] == ["handle"]:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print("ready", flush=True)
while True:
    time.sleep(1000)
