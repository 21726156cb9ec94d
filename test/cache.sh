# shellcheck shell=bash
# The cache of the pinned builds, outside any checkout, shared by every
# clone on the machine (CI's fresh clone of each run, a developer's
# worktrees): the local cluster's binaries (test/cluster/build.sh:
# cluster/bin), CRI-O's (test/crio/build.sh: crio/bin) and the kernels
# test/kernels/run.sh boots (kernels/). Its one place for the scripts;
# test/testutil.BuildCache is the Go tests' (same rule).
#   SIGSCOPE_CACHE  an absolute path; /var/cache/sigscope when unset
# Each part is a directory with a lock (PART/.lock, flock) that its
# builder holds while it checks and builds: a second run waits, then finds
# the part fresh. A build writes into PART/.tmp and renames each finished
# file into place (one filesystem: atomic), so no one ever runs a
# half-written binary. make cluster-down leaves it all; rm -rf it to
# rebuild from nothing. A checkout's old .cache/cluster/bin, .cache/crio
# and .cache/kernels are no longer read (rm -rf them).
# Sourced, never run.

# cache_dir PART: the physical path (no symbolic link: running() in
# test/cluster/lib.sh compares it with the /proc/PID/exe the kernel
# resolves) of the cache's PART, made when missing.
cache_dir() {
	local root=${SIGSCOPE_CACHE:-/var/cache/sigscope}
	case $root in
	/*) ;;
	*)
		echo "SIGSCOPE_CACHE=$root: want an absolute path" >&2
		return 1
		;;
	esac
	if ! mkdir -p "$root/$1" 2>/dev/null; then
		echo "cannot make $root/$1 (the pinned builds' cache): run as root, or set SIGSCOPE_CACHE to a directory of yours" >&2
		return 1
	fi
	(cd "$root/$1" && pwd -P)
}

# cache_lock DIR: takes DIR/.lock (flock, exclusive) for this shell, until
# cache_unlock or its exit, waiting for another run's build when one holds
# it (and saying so); then empties DIR/.tmp, where a build that was killed
# may have left its files (no one else builds while the lock is held).
cache_lock() {
	local dir=$1 t=$SECONDS
	exec {CACHE_LOCK_FD}>>"$dir/.lock"
	if ! flock -n "$CACHE_LOCK_FD"; then
		printf 'cache: %s is locked by another run (pid %s): waiting\n' "$dir" "$(cache_lock_holder "$dir")" >&2
		flock "$CACHE_LOCK_FD"
		printf 'cache: %s: lock taken after %ds\n' "$dir" $((SECONDS - t)) >&2
	fi
	echo "$$" >"$dir/.lock.pid"
	rm -rf "$dir/.tmp"
	mkdir -p "$dir/.tmp"
}

cache_lock_holder() { cat "$1/.lock.pid" 2>/dev/null || echo "?"; }

# cache_unlock: lets cache_lock's lock go before this shell exits.
cache_unlock() {
	[ -n "${CACHE_LOCK_FD:-}" ] || return 0
	exec {CACHE_LOCK_FD}>&-
	CACHE_LOCK_FD=
}

# cache_script_hash FILE...: 16 hex digits of the files' lines that are not
# comments (a comment's edit rebuilds nothing): a build script's part of a
# recipe, so that a change of its commands builds again.
cache_script_hash() {
	grep -hv '^[[:space:]]*#' "$@" | sha256sum | cut -c1-16
}
