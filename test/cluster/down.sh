#!/usr/bin/env bash
# make cluster-down: stops everything make cluster started and removes its
# state: the pods (through the kubelet while it runs, so the CNI plugin
# releases their addresses; then whatever is left, by force), the daemons
# (containerd or CRI-O, whichever runs, and CRI-O's conmons),
# their mounts, network namespaces, bridge and cgroups, the kernel settings
# the kubelet changed, the unreachable route, .cluster/ and the runtime
# directories. The builds stay, in the pinned builds' cache outside the tree
# (test/cache.sh: /var/cache/sigscope unless SIGSCOPE_CACHE), and so do
# this tree's images (.cache/cluster/images).
# Safe to run again, or when nothing runs.
set -euo pipefail
# shellcheck source=test/cluster/lib.sh
. "$(dirname "$0")/lib.sh"
need_root "make cluster-down"
check_owner

HOST=$STATE/host
ctr_k8s() { "$BIN/ctr" --address "$CONTAINERD_SOCKET" -n k8s.io "$@"; }
kubectl() { "$BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig" --request-timeout 10s "$@"; }
# conmons: the pids of the conmon processes of the cluster's CRI-O (each
# container's monitor; its command line names the cluster's run directory),
# not those of the tests' CRI-O.
conmon_bin=$(readlink -f "$(command -v conmon)" 2>/dev/null) || true
conmons() {
	local exe pid
	[ -n "$conmon_bin" ] || return 0
	for exe in /proc/[0-9]*/exe; do
		[ "$(readlink "$exe" 2>/dev/null)" = "$conmon_bin" ] || continue
		pid=${exe#/proc/}
		pid=${pid%/exe}
		if [[ " $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" == *" $RUNDIR/"* ]]; then
			echo "$pid"
		fi
	done
	return 0
}
# no_containers: containerd has no task left, no conmon of CRI-O's runs
# (a container's ends with it), and the API server has no pod left (the
# kubelet lets a pod go only after it stopped its sandbox: CNI released,
# network namespace gone; a CRI-O sandbox without a pause process runs
# nothing to wait for).
no_containers() {
	if running containerd "$BIN/containerd" >/dev/null && [ -n "$(ctr_k8s tasks ls -q 2>/dev/null)" ]; then
		return 1
	fi
	[ -z "$(conmons)" ] && [ -z "$(kubectl get pods --all-namespaces -o name 2>/dev/null)" ]
}

stage "stop kube-controller-manager and kube-scheduler (nothing recreates pods from here)"
stop kube-controller-manager "$BIN/kube-controller-manager"
stop kube-scheduler "$BIN/kube-scheduler"

stage "delete the pods"
if running kubelet "$BIN/kubelet" >/dev/null && running kube-apiserver "$BIN/kube-apiserver" >/dev/null; then
	# The kubelet stops each container and sandbox through CRI: the CNI
	# plugin releases the address, the runtime removes the netns.
	kubectl delete pods --all --all-namespaces --grace-period=1 --wait=false 2>&1 | grep -v '^No resources found' || true
	for ((i = 0; i < 300; i++)); do
		no_containers && break
		sleep 0.2
	done
	no_containers || echo "containers still run after 60s: removing them by force"
fi
stop kubelet "$BIN/kubelet" 30
if running containerd "$BIN/containerd" >/dev/null; then
	for t in $(ctr_k8s tasks ls -q 2>/dev/null); do
		ctr_k8s tasks kill -s SIGKILL "$t" 2>/dev/null || true
		ctr_k8s tasks delete -f "$t" >/dev/null 2>&1 || true
	done
	for c in $(ctr_k8s containers ls -q 2>/dev/null); do
		ctr_k8s containers delete "$c" 2>/dev/null || true
	done
fi
stop containerd "$BIN/containerd" 30
# CRI-O leaves its containers running when it stops (conmon watches each):
# they go with the pods' cgroups below.
stop crio "$(daemon_bin crio)" 30
# Whatever still runs in the pods' cgroups (a container whose shim lost its
# containerd, CRI-O's containers and their conmons), then the shims and
# conmons outside them: all started by this cluster.
# (None when the bring-up stopped before the kubelet's stage made them.)
{ find "/sys/fs/cgroup/pids/$CGROUP_ROOT" -name cgroup.procs -exec cat {} + 2>/dev/null || true; } | while read -r pid; do
	echo "killing pod process $pid ($(cat "/proc/$pid/comm" 2>/dev/null))"
	kill -KILL "$pid" 2>/dev/null || true
done
for exe in /proc/[0-9]*/exe; do
	if [ "$(readlink "$exe" 2>/dev/null)" = "$BIN/containerd-shim-runc-v2" ]; then
		pid=${exe#/proc/}
		pid=${pid%/exe}
		echo "killing containerd-shim-runc-v2 $pid"
		kill -KILL "$pid" 2>/dev/null || true
	fi
done
for pid in $(conmons); do
	echo "killing conmon $pid"
	kill -KILL "$pid" 2>/dev/null || true
done

stage "stop kube-apiserver, its relay for pods, and etcd"
if SOCAT=$(command -v socat); then
	relay_stop "$SOCAT"
fi
stop kube-apiserver "$BIN/kube-apiserver" 30
stop etcd "$BIN/etcd" 30

stage "mounts, network namespaces, bridge, cgroups, state"
# Deepest first: overlay root filesystems, sandbox shm, network namespaces
# (nsfs, under containerd's state or, pinned by pinns, CRI-O's
# RUNDIR/crio/ns), the kubelet's volumes and its rshared self-bind of
# --root-dir. A namespace goes with its last mount, and its veth with it.
for _ in 1 2 3; do
	mapfile -t mounts < <(awk '{print $5}' /proc/self/mountinfo | while read -r m; do printf '%b\n' "$m"; done |
		grep -E "^($VARLIB|$RUNDIR)(/|\$)" | sort -r)
	[ ${#mounts[@]} -gt 0 ] || break
	for m in "${mounts[@]}"; do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
done
[ ${#mounts[@]} -eq 0 ] || echo "still mounted: ${mounts[*]}"
if ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
	ip link delete "$CNI_BRIDGE"
fi
rm -rf "$VARLIB" "$RUNDIR"
# The kubelet's tree in every hierarchy (kubepods, its QoS classes, pods).
shopt -s nullglob
for root in /sys/fs/cgroup/*/"$CGROUP_ROOT"; do
	find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null || true
	[ ! -d "$root" ] || echo "cgroup left (busy): $root"
done
if [ -f "$HOST/sysctl" ]; then
	while IFS='=' read -r k v; do
		[ "$(sysctl -n "$k")" = "$v" ] || sysctl -q -w "$k=$v"
	done <"$HOST/sysctl"
fi
if [ -f "$HOST/absent" ]; then
	while read -r p; do
		rm -rf "$p"
	done <"$HOST/absent"
fi
if [ -n "$(ip route show type unreachable "$SERVICE_CIDR")" ]; then
	ip route del unreachable "$SERVICE_CIDR"
fi
rm -rf "$STATE"
total "cluster down"
