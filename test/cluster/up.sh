#!/usr/bin/env bash
# make cluster: a single-node Kubernetes on this machine, for the end-to-end
# tests and for trying the agent: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, a kubelet, and its own container
# runtime (CRI) with runc and Debian's CNI plugins: containerd, or CRI-O with
# RUNTIME=crio. Builds what is missing (build.sh, images.sh, and
# test/crio/build.sh for CRI-O), then starts what does not run yet: a second
# run reuses every daemon that runs and answers its health check. Writes
# .cluster/env (KUBECONFIG, PATH with kubectl, CRI_SOCKET, NODE_NAME,
# CLUSTER_RUNTIME).
# docs/cluster.md explains each choice; make cluster-down undoes it all.
set -euo pipefail
# shellcheck source=test/cluster/lib.sh
. "$(dirname "$0")/lib.sh"
need_root "make cluster"
check_owner

# Feature gates for the API server, the controller-manager, the scheduler and
# the kubelet: FEATURE_GATES (Name=true,Name=false,...) when set, even empty
# (none); versions.sh's DEFAULT_FEATURE_GATES otherwise. Checked here, before
# any build, for their form; a gate a component does not know stops that
# component at start, with the name in its log.
FEATURE_GATES=${FEATURE_GATES-$DEFAULT_FEATURE_GATES}
if [ -n "$FEATURE_GATES" ] && ! [[ $FEATURE_GATES =~ ^[A-Za-z0-9]+=(true|false)(,[A-Za-z0-9]+=(true|false))*$ ]]; then
	die "FEATURE_GATES=$FEATURE_GATES: want Name=true or Name=false, comma-separated (e.g. ContainerStopSignals=true)"
fi
# Running daemons keep the gates they were started with: a change needs a
# fresh start, never half the cluster on the old gates and half on the new.
if [ -f "$STATE/feature-gates" ] && [ "$(<"$STATE/feature-gates")" != "$FEATURE_GATES" ]; then
	for d in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
		if running "$d" "$BIN/$d" >/dev/null; then
			die "the cluster runs with feature gates '$(<"$STATE/feature-gates")', not '$FEATURE_GATES': make cluster-down first"
		fi
	done
fi
# The kubelet's container runtime: RUNTIME (make cluster RUNTIME=crio),
# containerd when unset. One at a time: the kubelet of a running cluster
# keeps its runtime (its pods live there), so another needs a fresh start.
RUNTIME=${RUNTIME:-containerd}
case $RUNTIME in
containerd) other_runtime=crio ;;
crio) other_runtime=containerd ;;
*) die "RUNTIME=$RUNTIME: want containerd (the default) or crio" ;;
esac
if running "$other_runtime" "$(daemon_bin "$other_runtime")" >/dev/null ||
	{ [ "$(cluster_runtime)" != "$RUNTIME" ] && running kubelet "$BIN/kubelet" >/dev/null; }; then
	die "the cluster runs on $other_runtime, not $RUNTIME: make cluster-down first (or make cluster RUNTIME=$other_runtime to keep it)"
fi
feature_gate_flags=()
[ -z "$FEATURE_GATES" ] || feature_gate_flags=(--feature-gates "$FEATURE_GATES")
# kubelet_feature_gates: the KubeletConfiguration's featureGates map.
kubelet_feature_gates() {
	local g
	[ -n "$FEATURE_GATES" ] || return 0
	echo "featureGates:"
	for g in ${FEATURE_GATES//,/ }; do
		echo "  ${g%%=*}: ${g#*=}"
	done
}

bash "$here/build.sh"
if [ "$RUNTIME" = crio ]; then
	# crio, pinns (and the tests' pause, unused here) into the pinned
	# builds' cache (crio/bin), and Debian's conmon and skopeo; a few checks
	# when built. It prints the directory last, which must be the one
	# lib.sh expects.
	crio_bin=$(bash "$top/test/crio/build.sh" | tail -n 1)
	[ "$crio_bin" = "$CRIO_BIN" ] || die "test/crio/build.sh built into $crio_bin, not $CRIO_BIN"
fi
SIGSCOPE_IMAGE_OPTIONAL=1 bash "$here/images.sh" --no-import
_t0=$SECONDS # bring-up time, apart from the builds
mkdir -p "$VARLIB"
echo "$top" >"$VARLIB/owner"

PKI=$STATE/pki
HOST=$STATE/host # the machine's state before the first bring-up, for cluster-down
mkdir -p "$PKI" "$HOST" "$STATE/run" "$STATE/logs" "$STATE/bin" "$STATE/cni" "$VARLIB" "$RUNDIR"
chmod 0700 "$STATE" "$PKI"
echo "$FEATURE_GATES" >"$STATE/feature-gates"
echo "feature gates: ${FEATURE_GATES:-none}"
# images.sh (make cluster-images) and agent.sh read it, and cluster-down.
echo "$RUNTIME" >"$STATE/runtime"
echo "container runtime: $RUNTIME"
CRI_SOCKET=$(cri_socket "$RUNTIME")
if [ ! -f "$STATE/node-name" ]; then
	# The node is named after the machine, as kubeadm does.
	hostname -s | tr '[:upper:]_' '[:lower:]-' >"$STATE/node-name"
fi
NODE_NAME=$(<"$STATE/node-name")
kubectl() { "$BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig" "$@"; }
reused=()

stage "host: unreachable route for the service range $SERVICE_CIDR, bridge $CNI_BRIDGE ($BRIDGE_IP), saved sysctls"
# No kube-proxy runs: without this a ClusterIP (the kubernetes service's
# $SERVICE_IP too) follows the default route off the machine. With it a
# connect fails at once with "no route to host".
if [ -z "$(ip route show type unreachable "$SERVICE_CIDR")" ]; then
	ip route add unreachable "$SERVICE_CIDR"
fi
# The pods' bridge, made before the CNI plugin would (it takes an existing
# bridge with its gateway address as it is), so that the API server's
# forwarder below can listen on the gateway address before the first pod.
if ! ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
	ip link add "$CNI_BRIDGE" type bridge
fi
if [ -z "$(ip -4 addr show dev "$CNI_BRIDGE" to "$BRIDGE_IP/32")" ]; then
	ip addr add "$BRIDGE_IP/${POD_SUBNET#*/}" dev "$CNI_BRIDGE"
fi
ip link set "$CNI_BRIDGE" up
# The kubelet sets kernel tunables (vm.overcommit_memory, kernel.panic,
# kernel.panic_on_oops, ...) and the bridge plugin ip_forward: kept here once,
# cluster-down puts them back.
if [ ! -f "$HOST/sysctl" ]; then
	for k in vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops \
		kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward; do
		echo "$k=$(sysctl -n "$k")"
	done >"$HOST/sysctl"
fi
# Paths outside VARLIB/RUNDIR made on their own: the kubelet's device-plugin
# socket directory (not under its --root-dir), libcni's result cache,
# util-linux's /run/mount (the kubelet mounts volumes with mount(8)), and
# the blob cache of containers/image (skopeo's copies into CRI-O's storage).
# Removed by cluster-down when they did not exist before.
if [ ! -f "$HOST/absent" ]; then
	for p in /var/lib/kubelet /var/lib/cni /run/mount /var/lib/containers; do
		[ -e "$p" ] || echo "$p"
	done >"$HOST/absent"
fi

stage "certificates and kubeconfigs ($STATE)"
# One CA signs the API server's serving certificate (127.0.0.1 and the
# kubernetes service's names, so in-cluster clients pointed at 127.0.0.1
# verify it), the kubelet's, and each client's, whose subject is its identity
# (O = group, CN = user) for RBAC and the Node authorizer.
new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
# ca NAME CN
ca() {
	[ -f "$PKI/$1.crt" ] && return 0
	new_key "$PKI/$1.key"
	openssl req -x509 -new -key "$PKI/$1.key" -subj "/CN=$2" -days 3650 -out "$PKI/$1.crt" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
}
# [CA=NAME] cert NAME SUBJECT clientAuth|serverAuth [SANS]: signed by CA (ca).
cert() {
	local name=$1 subj=$2 usage=$3 san=${4:-} ca=${CA:-ca}
	[ -f "$PKI/$name.crt" ] && return 0
	new_key "$PKI/$name.key"
	openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr"
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" -days 3650 \
		-set_serial "0x$(openssl rand -hex 16)" -out "$PKI/$name.crt" 2>/dev/null -extfile <(
			echo "basicConstraints=CA:FALSE"
			echo "keyUsage=critical,digitalSignature,keyEncipherment"
			echo "extendedKeyUsage=$usage"
			[ -z "$san" ] || echo "subjectAltName=$san"
		)
	rm -f "$PKI/$name.csr"
}
ca ca sigscope-cluster-ca
# The aggregation layer's own CA: the API server proxies to extension API
# servers as front-proxy-client (without it the controller-manager and the
# scheduler log a missing requestheader CA bundle every few seconds).
ca front-proxy-ca sigscope-cluster-front-proxy-ca
CA=front-proxy-ca cert front-proxy-client "/CN=front-proxy-client" clientAuth
# A certificate from before the bridge address was in it is made again.
if [ -f "$PKI/apiserver.crt" ] && ! openssl x509 -in "$PKI/apiserver.crt" -noout -ext subjectAltName | grep -q "IP Address:$BRIDGE_IP\b"; then
	rm -f "$PKI/apiserver.crt"
fi
cert apiserver "/CN=kube-apiserver" serverAuth \
	"IP:127.0.0.1,IP:$BRIDGE_IP,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
cert admin "/O=system:masters/CN=sigscope-cluster-admin" clientAuth
cert controller-manager "/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
cert kubelet-serving "/CN=system:node:$NODE_NAME" serverAuth "IP:127.0.0.1,DNS:localhost,DNS:$NODE_NAME"
if [ ! -f "$PKI/sa.key" ]; then
	# Service account tokens: signed by the API server, checked with sa.pub.
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key" 2>/dev/null
	openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"
fi
chmod 0600 "$PKI"/*.key
# kubeconfig NAME: STATE/NAME.kubeconfig, NAME's certificate embedded.
kubeconfig() {
	local f=$STATE/$1.kubeconfig
	[ -f "$f" ] && return 0
	cat >"$f" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sigscope
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $1
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$1.crt")
    client-key-data: $(base64 -w0 "$PKI/$1.key")
contexts:
- name: sigscope
  context:
    cluster: sigscope
    user: $1
current-context: sigscope
EOF
	chmod 0600 "$f"
}
for k in admin controller-manager scheduler kubelet; do kubeconfig "$k"; done

# up NAME HEALTH-TIMEOUT HEALTH-COMMAND -- ARGS...: NAME (daemon_bin) unless it
# runs; either way it must pass its health check.
up() {
	local name=$1 timeout=$2 health=() pid
	shift 2
	while [ "$1" != -- ]; do
		health+=("$1")
		shift
	done
	shift
	if pid=$(running "$name" "$(daemon_bin "$name")"); then
		echo "$name runs (pid $pid): reused"
		reused+=("$name")
	else
		start "$name" "$(daemon_bin "$name")" "$@"
		echo "$name started (pid $(<"$(pidfile "$name")"), log $(logfile "$name"))"
	fi
	wait_for "$name health" "$timeout" "$name" "${health[@]}"
}
curl_ok() { curl -fsS --max-time 2 "$@"; }
# write FILE < CONTENT: replaces FILE only when CONTENT differs, so a second
# make cluster does not make running daemons reload (containerd watches its
# CNI directory and reads a half-written file otherwise).
write() {
	local tmp
	tmp=$(mktemp "$1.XXXXXX")
	cat >"$tmp"
	if cmp -s "$tmp" "$1"; then
		rm -f "$tmp"
	else
		mv "$tmp" "$1"
	fi
}
https_ok() { curl_ok --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"; }

stage "etcd $ETCD_VERSION (http://127.0.0.1:$ETCD_CLIENT_PORT)"
# Plain HTTP on loopback: nothing but the API server reaches it.
up etcd 30 curl_ok "http://127.0.0.1:$ETCD_CLIENT_PORT/health" -- \
	--name default --data-dir "$STATE/etcd" \
	--listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
	--advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
	--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-cluster "default=http://127.0.0.1:$ETCD_PEER_PORT" \
	--log-level warn

stage "kube-apiserver $K8S_VERSION (https://127.0.0.1:$APISERVER_PORT)"
# A loopback advertise address is refused unless the endpoint reconciler is
# off (the kubernetes service then has no endpoints: in-cluster clients are
# given 127.0.0.1:6443 instead, see docs/cluster.md). The kubelet is reached
# at its InternalIP, 127.0.0.1, where it listens.
up kube-apiserver 90 https_ok "https://127.0.0.1:$APISERVER_PORT/readyz" -- \
	--etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" \
	--bind-address 127.0.0.1 --secure-port "$APISERVER_PORT" \
	--advertise-address 127.0.0.1 --endpoint-reconciler-type none \
	--service-cluster-ip-range "$SERVICE_CIDR" \
	--client-ca-file "$PKI/ca.crt" \
	--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
	--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
	--kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
	--kubelet-preferred-address-types InternalIP \
	--requestheader-client-ca-file "$PKI/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
	--requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
	--requestheader-extra-headers-prefix X-Remote-Extra- \
	--proxy-client-cert-file "$PKI/front-proxy-client.crt" --proxy-client-key-file "$PKI/front-proxy-client.key" \
	--service-account-issuer https://kubernetes.default.svc.cluster.local \
	--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
	--authorization-mode Node,RBAC \
	--enable-admission-plugins NodeRestriction \
	--allow-privileged=true "${feature_gate_flags[@]}"

stage "the API server for pods at https://$BRIDGE_IP:$APISERVER_PORT"
# In-cluster clients on the pod network (the agent's, with the chart's
# apiServerOverride) cannot reach 127.0.0.1 of the host, and a ClusterIP
# routes nowhere here (no kube-proxy): socat relays the bridge's gateway
# address to the API server, TLS end to end. The API server itself stays on
# loopback only.
SOCAT=$(command -v socat) || die "socat is missing (apt-get install socat)"
if pid=$(running apiserver-relay "$SOCAT"); then
	echo "apiserver-relay runs (pid $pid): reused"
	reused+=(apiserver-relay)
else
	relay_start "$SOCAT"
fi
wait_for "the API server at $BRIDGE_IP:$APISERVER_PORT" 20 - https_ok "https://$BRIDGE_IP:$APISERVER_PORT/readyz"

stage "kube-controller-manager and kube-scheduler"
# Single node: no leader election. The controller-manager creates each
# namespace's default ServiceAccount (pods are refused without it) and signs
# their tokens with the API server's key.
up kube-controller-manager 60 curl_ok -k "https://127.0.0.1:$CONTROLLER_MANAGER_PORT/healthz" -- \
	--kubeconfig "$STATE/controller-manager.kubeconfig" \
	--authentication-kubeconfig "$STATE/controller-manager.kubeconfig" \
	--authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
	--bind-address 127.0.0.1 --secure-port "$CONTROLLER_MANAGER_PORT" \
	--leader-elect=false --use-service-account-credentials \
	--service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
	--cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
	--flex-volume-plugin-dir "$VARLIB/kubelet-plugins" "${feature_gate_flags[@]}"
up kube-scheduler 60 curl_ok -k "https://127.0.0.1:$SCHEDULER_PORT/healthz" -- \
	--kubeconfig "$STATE/scheduler.kubeconfig" \
	--authentication-kubeconfig "$STATE/scheduler.kubeconfig" \
	--authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
	--bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --leader-elect=false "${feature_gate_flags[@]}"

if [ "$RUNTIME" = crio ]; then
	stage "CRI-O $("$CRIO_BIN/crio" --version | sed -n 's/^crio version //p'), conmon, runc $RUNC_VERSION, CNI ($CRIO_SOCKET)"
else
	stage "containerd $CONTAINERD_VERSION with CRI, runc $RUNC_VERSION, CNI ($CONTAINERD_SOCKET)"
fi
# The bridge's pods get an address and no default route (isDefaultGateway
# false, no ipam routes, no masquerade): they reach the bridge's subnet and
# nothing beyond. The pods of the tests use hostNetwork anyway. Either
# runtime reads it.
write "$STATE/cni/10-sigscope.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "sigscope-cluster",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_SUBNET"}]],
        "dataDir": "$VARLIB/cni/networks"
      }
    }
  ]
}
EOF
start_containerd() {
	# Its own root, state, socket and runc root, apart from Docker's containerd
	# and the tests' (/run/sigscope-containerd, whose runc root is containerd's
	# default /run/containerd/runc); network namespaces under its state, so
	# cluster-down finds them all there. restrict_oom_score_adj: root here has no
	# CAP_SYS_RESOURCE and may not lower oom_score_adj, which runc otherwise
	# tries for every sandbox. cgroupfs, as the kubelet (cgroup v1).
	write "$STATE/containerd.toml" <<EOF
# Written by test/cluster/up.sh, in containerd $CONTAINERD_VERSION's own format
# ("containerd config default" lists every key).
version = 4
root = "$VARLIB/containerd"
state = "$RUNDIR/containerd"
# Nothing from the host's /etc/containerd.
imports = []

[plugins."io.containerd.server.v1.grpc"]
  address = "$CONTAINERD_SOCKET"

[plugins."io.containerd.server.v1.ttrpc"]
  address = "$CONTAINERD_SOCKET.ttrpc"

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "sigscope.local/pause:$PAUSE_VERSION"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true

[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["/usr/lib/cni"]
  conf_dir = "$STATE/cni"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  BinaryName = "$BIN/runc"
  Root = "$RUNDIR/runc"
  SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"

[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.internal.v1.opt"]
  path = "$VARLIB/opt"
EOF
	# The v2 shim first on containerd's PATH (Debian's 1.6 one is in /usr/bin).
	PATH="$BIN:$PATH" up containerd 30 "$BIN/ctr" --address "$CONTAINERD_SOCKET" version -- \
		--config "$STATE/containerd.toml"
}

start_crio() {
	local conmon runc hugetlb
	conmon=$(command -v conmon) || die "conmon is missing (apt-get install conmon; test/crio/build.sh installs it)"
	command -v skopeo >/dev/null || die "skopeo is missing (apt-get install skopeo; test/crio/build.sh installs it)"
	mkdir -p "$STATE/crio.conf.d" "$VARLIB/crio" "$RUNDIR/crio"
	# CRI-O asks oomScoreAdj -998 for every pause process (and the kubelet
	# -997 for a Guaranteed pod's containers), and root here lacks
	# CAP_SYS_RESOURCE: runc could not lower its own score, and the
	# sandbox would fail to start. containerd's restrict_oom_score_adj has
	# no CRI-O equivalent (its rootless mode would drop the resource limits
	# too), so CRI-O's runtime is this wrapper of the cluster's runc: a
	# score below the one it runs at (CRI-O's and conmon's, inherited) is
	# raised to it in the bundle's config.json (create) or the process
	# file (exec), which is what restrict_oom_score_adj does; internal/
	# critest's CRI-O does the same.
	# And the kubelet gives every container hugepage limits (0 for each
	# size the kernel has), which CRI-O passes on whenever /proc/cgroups
	# lists hugetlb, mounted or not. Here it is in no cgroup v1 hierarchy
	# (only the empty cgroup2 has it), and runc then refuses the container
	# ("cannot set hugetlb limit: container could not join or create
	# cgroup"). Without such a hierarchy the wrapper drops the limits from
	# the spec; containerd's defaults leave them out too (its CRI plugin's
	# disable_hugetlb_controller and tolerate_missing_hugetlb_controller).
	# Nothing else of the spec changes.
	hugetlb=0
	if awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup" && $(i + 3) ~ /(^|,)hugetlb(,|$)/) found = 1; break } } END { exit !found }' /proc/self/mountinfo; then
		hugetlb=1
	fi
	runc=$STATE/crio-runc
	write "$runc" <<EOF
#!/bin/sh
# Written by test/cluster/up.sh: CRI-O's runtime, the cluster's runc with
# oomScoreAdj restricted to this process's own score and, when hugetlb has
# no cgroup v1 hierarchy (hugetlb=0), no hugepageLimits.
own=\$(cat /proc/self/oom_score_adj)
hugetlb=$hugetlb
fix() {
	[ -f "\$1" ] || return 0
	want=\$(sed -n 's/.*"oomScoreAdj":[[:space:]]*\(-\{0,1\}[0-9]\{1,\}\).*/\1/p' "\$1" | head -n 1)
	if [ -n "\$want" ] && [ "\$want" -lt "\$own" ]; then
		sed -i -E "s/(\"oomScoreAdj\":[[:space:]]*)-?[0-9]+/\1\$own/" "\$1"
	fi
	if [ "\$hugetlb" = 0 ] && grep -q '"hugepageLimits"' "\$1"; then
		# The array and the comma before it (or after it, when first).
		sed -z -i -E 's/,[[:space:]]*"hugepageLimits":[[:space:]]*\[[^]]*\]//; s/"hugepageLimits":[[:space:]]*\[[^]]*\][[:space:]]*,?//' "\$1"
	fi
}
prev=
for a in "\$@"; do
	case \$prev in
	--bundle | -b) fix "\$a/config.json" ;;
	--process | -p) fix "\$a" ;;
	esac
	case \$a in
	--bundle=*) fix "\${a#--bundle=}/config.json" ;;
	--process=*) fix "\${a#--process=}" ;;
	esac
	prev=\$a
done
exec $BIN/runc "\$@"
EOF
	chmod 0755 "$runc"
	# The cluster's images are copied in unsigned (skopeo, no registry):
	# accept them, without the host's /etc/containers/policy.json.
	write "$STATE/crio-policy.json" <<<'{"default":[{"type":"insecureAcceptAnything"}]}'
	# Every path CRI-O would take under /var/lib/crio, /var/run/crio,
	# /var/log/crio or /etc is the cluster's: VARLIB/crio (storage, pod
	# logs, version), RUNDIR/crio (run root, exit files, attach sockets,
	# the pods' namespaces that pinns pins, runc's state), STATE (this
	# configuration, an empty drop-in directory, the CNI configuration).
	# vfs storage, cgroupfs (as the kubelet) with conmon in the pod's cgroup
	# (cgroupfs allows only that), as test/critest's CRI-O. NRI and
	# the metrics server off (NRI's socket would be shared with any other
	# runtime's). drop_infra_ctr at its default: a pod that shares no pid
	# namespace runs no pause process.
	write "$STATE/crio.conf" <<EOF
# Written by test/cluster/up.sh (RUNTIME=crio); "crio config" lists every key.
[crio]
root = "$VARLIB/crio/storage"
runroot = "$RUNDIR/crio/storage"
storage_driver = "vfs"
log_dir = "$VARLIB/crio/pods"
version_file = "$RUNDIR/crio/version"
version_file_persist = "$VARLIB/crio/version"
clean_shutdown_file = "$VARLIB/crio/clean.shutdown"

[crio.api]
listen = "$CRIO_SOCKET"
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
container_exits_dir = "$RUNDIR/crio/exits"
container_attach_socket_dir = "$RUNDIR/crio/attach"
namespaces_dir = "$RUNDIR/crio/ns"
pinns_path = "$CRIO_BIN/pinns"
hooks_dir = []
irqbalance_config_restore_file = "disable"

[crio.runtime.runtimes.runc]
runtime_path = "$runc"
runtime_type = "oci"
runtime_root = "$RUNDIR/crio/runc"
monitor_path = "$conmon"
# conmon_cgroup's successor.
monitor_cgroup = "pod"

[crio.image]
pause_image = "sigscope.local/pause:$PAUSE_VERSION"
# The image's own entrypoint (/pause), as containerd runs it.
pause_command = ""
signature_policy = "$STATE/crio-policy.json"

[crio.network]
network_dir = "$STATE/cni"
plugin_dirs = ["/usr/lib/cni"]

[crio.metrics]
enable_metrics = false

[crio.nri]
enable_nri = false
EOF
	# --config-dir: the empty one, not /etc/crio/crio.conf.d. The health
	# check is CRI-O's own HTTP API on the same socket.
	up crio 60 curl_ok --unix-socket "$CRIO_SOCKET" http://crio/info -- \
		--config "$STATE/crio.conf" --config-dir "$STATE/crio.conf.d"
}

if [ "$RUNTIME" = crio ]; then
	start_crio
else
	start_containerd
fi
bash "$here/images.sh" --import-only

stage "kubelet $K8S_VERSION (node $NODE_NAME, 127.0.0.1:$KUBELET_PORT)"
write "$STATE/kubelet.yaml" <<EOF
# Written by test/cluster/up.sh; docs/cluster.md says why each line is here.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://$CRI_SOCKET
# cgroup v1 (hybrid) on these machines: 1.37 refuses it unless told not to.
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
podLogsDir: $VARLIB/pod-logs
volumePluginDir: $VARLIB/kubelet-plugins
# No cluster DNS runs: pods use the host's resolver, as the node does.
clusterDomain: cluster.local
# A developer machine's disk fills for other reasons: never evict the test
# pods nor garbage-collect the imported images (they cannot be pulled again).
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# No kube-proxy runs, so nothing needs the kubelet's iptables chains
# (KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY, and KUBE-FIREWALL, which drops
# packets to 127.0.0.0/8 from other sources for everyone on the machine).
makeIPTablesUtilChains: false
# make cluster's feature gates (FEATURE_GATES, versions.sh), as the control plane's.
$(kubelet_feature_gates)
EOF
# The kubelet wants its cgroup root in every v1 hierarchy before it starts
# (its pods then go to /sigscope-cluster/kubepods/...).
awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup") print $5; break } }' /proc/self/mountinfo |
	while read -r hierarchy; do mkdir -p "$hierarchy/$CGROUP_ROOT"; done
up kubelet 60 curl_ok "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" -- \
	--config "$STATE/kubelet.yaml" --kubeconfig "$STATE/kubelet.kubeconfig" \
	--hostname-override "$NODE_NAME" --node-ip 127.0.0.1 --root-dir "$VARLIB/kubelet"

stage "node $NODE_NAME Ready, default ServiceAccount"
node_ready() {
	[ "$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_for "node $NODE_NAME Ready" 120 kubelet node_ready
# The kubelet refuses a loopback node IP ("nodeIP can't be loopback
# address") and then sets no address at all, so the API server could not
# reach it for logs, exec or port-forward. Without --node-ip it would take
# the machine's external address, where it does not listen. Set here
# instead: the kubelet keeps addresses it fails to compute.
if [ -z "$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')" ]; then
	kubectl patch node "$NODE_NAME" --subresource=status --type=merge \
		-p "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"127.0.0.1\"},{\"type\":\"Hostname\",\"address\":\"$NODE_NAME\"}]}}" >/dev/null
fi
wait_for "ServiceAccount default/default" 60 kube-controller-manager kubectl -n default get serviceaccount default

ln -sf "$BIN/kubectl" "$STATE/bin/kubectl"
cat >"$STATE/env" <<EOF
# The local cluster (make cluster); removed by make cluster-down. Source it:
#   . .cluster/env
export KUBECONFIG=$STATE/admin.kubeconfig
export PATH="$STATE/bin:\$PATH"
export CRI_SOCKET=$CRI_SOCKET
export CLUSTER_RUNTIME=$RUNTIME
export NODE_NAME=$NODE_NAME
export CLUSTER_FEATURE_GATES="$FEATURE_GATES"
EOF
stage_end
kubectl get node -o wide
[ ${#reused[@]} -eq 0 ] || echo "reused: ${reused[*]}"
echo "cluster up: . .cluster/env; kubectl get pods -A"
total "bring-up (test/cluster/up.sh, builds excluded)"
