#!/usr/bin/env bash
# Stops the tests' CRI-O (test/critest.EnsureCRIO leaves it running for
# the next test binary), by its pid file and only while that pid is still
# test/crio/build.sh's crio (in the pinned builds' cache, test/cache.sh; or
# a checkout's .cache/crio/bin, where it was built before). Its storage
# stays (the images). Containers keep running under conmon when CRI-O stops
# (it finds them again at its next start): the tests remove their pods at
# cleanup.
set -euo pipefail
# shellcheck source=test/cache.sh
. "$(dirname "$0")/../cache.sh"
state=/run/sigscope-crio
pidfile=$state/crio.pid
[ -f "$pidfile" ] || exit 0
pid=$(<"$pidfile")
crio=$(cache_dir crio)/bin/crio
case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in
"$crio" | "$crio (deleted)" | */.cache/crio/bin/crio | *"/.cache/crio/bin/crio (deleted)") ;;
*)
	rm -f "$pidfile"
	exit 0
	;;
esac
kill -TERM "$pid"
for _ in $(seq 100); do
	[ -e "/proc/$pid" ] || break
	sleep 0.1
done
if [ -e "/proc/$pid" ]; then
	echo "crio ($pid) still runs after 10s: SIGKILL"
	kill -KILL "$pid"
fi
rm -f "$pidfile"
echo "stopped crio ($pid)"
