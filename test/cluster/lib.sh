# shellcheck shell=bash
# shellcheck disable=SC2034 # the scripts that source this file use these
# Shared by the scripts of the local cluster (make cluster): where things
# live, the Go environment of the builds, stage timing, process helpers.
# Sourced, never run.

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here=$top/test/cluster
# shellcheck source=test/cluster/versions.sh
. "$here/versions.sh"

# shellcheck source=test/cache.sh
. "$top/test/cache.sh"
# The parts' binaries (build.sh), kept across make cluster-down, in the
# pinned builds' cache outside the tree (test/cache.sh: SIGSCOPE_CACHE,
# /var/cache/sigscope by default), shared by every clone on the machine:
# CACHE/bin, each binary with its recipe stamp; CACHE/go holds the private
# Go module and build caches during a build (removed after it, so a cold
# build is cold and its size is known). Physical, not through a symbolic
# link: running() compares a daemon's /proc/PID/exe, which the kernel
# resolves, with $BIN/NAME.
CACHE=$(cache_dir cluster) || exit 1
BIN=$CACHE/bin
# The images (images.sh): built from this tree (sigscope's) and the host
# (busybox, node), so they stay in the tree, apart from other clones'.
IMAGES=$top/.cache/cluster/images
# This cluster's configuration, certificates, etcd data, logs and pid files;
# removed by make cluster-down. .cluster/env is what users source.
STATE=$top/.cluster
# The container runtime's and the kubelet's disk state (image layers, pod
# volumes, pod logs, IP allocations), and containerd's runtime state and
# socket: outside the tree (overlay mounts, tmpfs volumes), apart from the
# tests' containerd (/var/lib/sigscope-containerd, /run/sigscope-containerd)
# and Docker's. Removed by make cluster-down.
VARLIB=/var/lib/sigscope-cluster
RUNDIR=/run/sigscope-cluster
CONTAINERD_SOCKET=$RUNDIR/containerd.sock

# The container runtime under the kubelet: containerd (the default) or CRI-O
# (make cluster RUNTIME=crio), recorded in STATE/runtime by make cluster.
# CRI-O is test/crio/build.sh's (crio and pinns from the Go module proxy,
# kept in the same cache's crio/bin beside the tests' own CRI-O, which
# shares the binaries and nothing else), with Debian's conmon and the
# cluster's runc; its storage, run root and socket are the cluster's
# (VARLIB/crio, RUNDIR/crio), apart from the tests' CRI-O
# (/var/lib/sigscope-crio).
CRIO_BIN=$(cache_dir crio)/bin || exit 1
CRIO_SOCKET=$RUNDIR/crio.sock
# CRI-O's image store, as containers-storage references name it (skopeo):
# vfs, which needs nothing of the kernel beyond plain directories.
CRIO_STORE="[vfs@$VARLIB/crio/storage+$RUNDIR/crio/storage]"
# The kubelet's cgroup root: its pods live under /sigscope-cluster/kubepods in
# every hierarchy, never in the /kubepods that the tests' CRI containers use
# (a kubelet kills what it finds in its own tree and does not know).
CGROUP_ROOT=sigscope-cluster

# cluster_runtime: the runtime of the cluster in STATE (containerd or crio);
# containerd for a cluster made before there was a choice.
cluster_runtime() {
	if [ -f "$STATE/runtime" ]; then
		cat "$STATE/runtime"
	else
		echo containerd
	fi
}

# cri_socket RUNTIME: where RUNTIME serves CRI to the kubelet.
cri_socket() {
	case $1 in
	crio) echo "$CRIO_SOCKET" ;;
	*) echo "$CONTAINERD_SOCKET" ;;
	esac
}

# daemon_bin NAME: the binary daemon NAME runs from (its pid file counts
# only while the pid runs it): CRI-O's is test/crio/build.sh's, the others
# are BIN's.
daemon_bin() {
	case $1 in
	crio) echo "$CRIO_BIN/crio" ;;
	*) echo "$BIN/$1" ;;
	esac
}

# Addresses. Nothing here routes off the machine: the API server and the
# kubelet listen on 127.0.0.1, the pod subnet lives on a bridge whose pods get
# no default route, and the service range is made unreachable (no kube-proxy
# runs, so a ClusterIP would otherwise follow the default route out).
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
POD_SUBNET=10.244.0.0/24
CNI_BRIDGE=sigscope-cni0
# The host's address on the bridge (the bridge plugin's gateway, the subnet's
# first): pods reach the API server there, through a forwarder to
# 127.0.0.1:$APISERVER_PORT; the API server reaches pods on the subnet (its
# pod proxy refuses loopback addresses, so a hostNetwork pod here cannot be
# proxied to).
BRIDGE_IP=10.244.0.1
ETCD_CLIENT_PORT=2379
ETCD_PEER_PORT=2380
APISERVER_PORT=6443
CONTROLLER_MANAGER_PORT=10257
SCHEDULER_PORT=10259
KUBELET_PORT=10250
KUBELET_HEALTHZ_PORT=10248

# The Go environment of the parts' builds: private module and build caches
# (CACHE/go, used under build.sh's lock of CACHE), the local toolchain only
# (no toolchain download), writable module cache files (so rm -rf works).
go_env() {
	env GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOTOOLCHAIN=local \
		GOFLAGS="${GOFLAGS:-} -modcacherw" "$@"
}

# Stages print their name, then how long they took; total() the whole run.
_t0=$SECONDS
stage_name=""
stage_start=$SECONDS
stage() {
	stage_end
	stage_name="$*"
	stage_start=$SECONDS
	printf '==> %s\n' "$*"
}
stage_end() {
	if [ -n "$stage_name" ]; then
		printf '<== %s: %ds\n' "$stage_name" $((SECONDS - stage_start))
	fi
	stage_name=""
}
total() {
	stage_end
	printf '==> %s: %dm%02ds\n' "$1" $(((SECONDS - _t0) / 60)) $(((SECONDS - _t0) % 60))
}

# One cluster per machine (fixed ports, fixed paths outside the tree):
# VARLIB/owner names the tree whose cluster this is, and the other trees'
# make cluster and cluster-down refuse to touch it.
# A cluster whose tree is gone, or none of whose daemons runs any more (a
# session ended without make cluster-down), is stale: its state is taken
# over, and the usual restart of each daemon cleans up after it.
check_owner() {
	local owner
	[ -f "$VARLIB/owner" ] || return 0
	owner=$(<"$VARLIB/owner")
	[ "$owner" != "$top" ] || return 0
	if [ -d "$owner" ] && pgrep -f "$VARLIB|/run/sigscope-cluster/" >/dev/null; then
		die "this machine's cluster belongs to $owner: run make cluster-down there (or remove $VARLIB/owner if that tree is gone)"
	fi
	printf 'cluster: taking over the stale state of %s (its daemons are gone)\n' "$owner" >&2
	rm -f "$VARLIB/owner"
}

die() {
	printf 'cluster: %s\n' "$*" >&2
	exit 1
}

need_root() {
	[ "$(id -u)" -eq 0 ] || die "$1 needs root (it starts a kubelet, its container runtime and runc)"
}

# Debian packages, installed when missing.
install_debian_packages() {
	local missing=() p
	for p in $DEBIAN_PACKAGES; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "installing from Debian: ${missing[*]}"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 apt-get install -y -qq "${missing[@]}" >/dev/null
	fi
}

# Processes. Each daemon has STATE/run/NAME.pid and STATE/logs/NAME.log; a pid
# counts only while /proc/PID/exe is still the binary it was started from, so
# a recycled pid is never taken for (or stopped as) a daemon.
pidfile() { echo "$STATE/run/$1.pid"; }
logfile() { echo "$STATE/logs/$1.log"; }

# running NAME BINARY: prints the pid when NAME runs from BINARY.
running() {
	local f pid
	f=$(pidfile "$1")
	[ -f "$f" ] || return 1
	pid=$(<"$f")
	[ -n "$pid" ] || return 1
	# " (deleted)": the binary was rebuilt under the running daemon.
	case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in
	"$2" | "$2 (deleted)") echo "$pid" ;;
	*) return 1 ;;
	esac
}

# start NAME BINARY ARGS...: a daemon in its own session (make's Ctrl-C and
# the end of the calling shell do not reach it), output to its log.
start() {
	local name=$1 bin=$2
	shift 2
	mkdir -p "$STATE/run" "$STATE/logs"
	printf -- '--- %s: %s %s\n' "$(date -u +%FT%TZ)" "$bin" "$*" >>"$(logfile "$name")"
	# Not a process group leader here, so setsid makes the new session
	# in place and $! is the daemon itself.
	setsid "$bin" "$@" </dev/null >>"$(logfile "$name")" 2>&1 &
	local pid=$! i
	echo "$pid" >"$(pidfile "$name")"
	# Until setsid has exec'd it, /proc/PID/exe is the shell's or setsid's,
	# and running() would take the daemon for gone (wait_for then reported
	# "exited" for a daemon that was starting): wait for the exec, or for
	# the process to end.
	for ((i = 0; i < 50; i++)); do
		case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in
		"$bin" | "") break ;;
		esac
		sleep 0.1
	done
}

# stop NAME BINARY [SECONDS]: SIGTERM, then SIGKILL after SECONDS (10).
stop() {
	local name=$1 bin=$2 wait=${3:-10} pid i
	if pid=$(running "$name" "$bin"); then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < wait * 10; i++)); do
			[ -e "/proc/$pid" ] || break
			sleep 0.1
		done
		if [ -e "/proc/$pid" ]; then
			echo "$name ($pid) still runs after ${wait}s: SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			sleep 0.2
		fi
		echo "stopped $name ($pid)"
	fi
	rm -f "$(pidfile "$name")"
}

# wait_for WHAT SECONDS NAME COMMAND...: polls COMMAND until it succeeds; on
# timeout, or when daemon NAME (if not "-") exits, shows NAME's log and fails.
wait_for() {
	local what=$1 timeout=$2 name=$3 bin="" i
	shift 3
	[ "$name" = - ] || bin=$(daemon_bin "$name")
	for ((i = 0; i < timeout * 5; i++)); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		if [ -n "$bin" ] && ! running "$name" "$bin" >/dev/null; then
			tail -n 30 "$(logfile "$name")" >&2 || true
			die "$name exited while waiting for $what (log: $(logfile "$name"))"
		fi
		sleep 0.2
	done
	[ "$name" = - ] || tail -n 30 "$(logfile "$name")" >&2 || true
	die "timed out after ${timeout}s waiting for $what"
}

# The API server's relay for pods (apiserver-relay): socat listens on the
# bridge's gateway and forwards each connection to the API server on
# 127.0.0.1, TLS end to end, in a child it forks per connection.
# relay_start SOCAT starts it; up.sh, and relay.sh for the tests.
relay_start() {
	start apiserver-relay "$1" "TCP-LISTEN:$APISERVER_PORT,bind=$BRIDGE_IP,reuseaddr,fork" "TCP:127.0.0.1:$APISERVER_PORT"
}

# relay_stop SOCAT: the relay and the children that carry its open
# connections, which stopping the listener alone would leave working (an
# HTTP/2 client such as client-go keeps one connection). They are one
# process group: start makes the daemon the leader of its own session.
relay_stop() {
	local pid i
	if pid=$(running apiserver-relay "$1"); then
		kill -TERM -- "-$pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			kill -0 -- "-$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL -- "-$pid" 2>/dev/null || true
		echo "stopped apiserver-relay ($pid) and its connections"
	fi
	rm -f "$(pidfile apiserver-relay)"
}
