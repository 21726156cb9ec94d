#!/usr/bin/env bash
# make cluster-agent: the node agent on the cluster of make cluster, from the
# chart (deploy/chart/sigscope) with test/cluster/agent-values.yaml and the
# image built from this tree (images.sh imports it when it changed), and
# agent-values-crio.yaml on a cluster whose kubelet runs on CRI-O; waits
# until the DaemonSet's pods are Ready.
#   test/cluster/agent.sh [install]   install or update, and wait
#   test/cluster/agent.sh delete      remove it (namespace, ClusterRoles)
# SIGSCOPE_AGENT_NAMESPACE (default sigscope) is the namespace and the
# release's full name (the ClusterRoles are named after it);
# SIGSCOPE_AGENT_SET adds helm --set values, comma-separated (the tests).
# The node journal of each namespace's agent is $VARLIB/journal-$NS, removed
# with it (and by make cluster-down), so that a test's agent never reads
# back the episodes of an earlier run.
set -euo pipefail
# shellcheck source=test/cluster/lib.sh
. "$(dirname "$0")/lib.sh"
NS=${SIGSCOPE_AGENT_NAMESPACE:-sigscope}
[ -f "$STATE/env" ] || die "no cluster here: run make cluster first"
kubectl() { "$BIN/kubectl" --kubeconfig "$STATE/admin.kubeconfig" "$@"; }

if [ "${1:-install}" = delete ]; then
	stage "delete the agent ($NS)"
	# The DaemonSet's pods first, waited for (foreground: the DaemonSet
	# goes once they have), then the namespace, not waited for: its
	# controller takes some 5 s more to finish an empty namespace, which an
	# install into the same namespace waits for instead.
	kubectl -n "$NS" delete daemonset "$NS" --ignore-not-found --cascade=foreground --wait=true --timeout=60s
	kubectl delete namespace "$NS" --ignore-not-found --wait=false
	rm -rf "$VARLIB/journal-$NS"
	for r in "$NS" "$NS-reader"; do
		kubectl delete clusterrolebinding "$r" --ignore-not-found
		kubectl delete clusterrole "$r" --ignore-not-found
	done
	total "agent deleted"
	exit 0
fi

need_root "make cluster-agent (it imports the image into the cluster's container runtime)"
stage "image sigscope.local/sigscope:dev from this tree"
bash "$here/images.sh"

stage "render the chart ($NS)"
manifest=$(mktemp)
trap 'rm -f "$manifest"' EXIT
# The image's ID in the pod template: a rebuilt image keeps its tag, and
# this rolls the pods onto it.
values=(-f "$here/agent-values.yaml")
[ "$(cluster_runtime)" != crio ] || values+=(-f "$here/agent-values-crio.yaml")
set_args=(--set "fullnameOverride=$NS" --set "journal.hostDir=$VARLIB/journal-$NS" --set "podAnnotations.sigscope\.dev/image-id=$(<"$IMAGES/sigscope.tar.id")")
[ -z "${SIGSCOPE_AGENT_SET:-}" ] || set_args+=(--set "$SIGSCOPE_AGENT_SET")
GO=${GO:-go} sh "$top/deploy/render.sh" - --namespace "$NS" "${values[@]}" "${set_args[@]}" >"$manifest"

stage "apply, and wait for the DaemonSet's pods to be Ready"
# A namespace an earlier delete left terminating is waited for.
if [ "$(kubectl get namespace "$NS" -o 'jsonpath={.status.phase}' 2>/dev/null)" = Terminating ]; then
	kubectl wait --for=delete "namespace/$NS" --timeout=90s
fi
kubectl get namespace "$NS" >/dev/null 2>&1 || kubectl create namespace "$NS"
kubectl apply -f "$manifest"
if ! kubectl -n "$NS" rollout status "daemonset/$NS" --timeout=90s; then
	kubectl -n "$NS" describe daemonset,pods >&2 || true
	kubectl -n "$NS" logs "daemonset/$NS" --tail=50 >&2 || true
	die "the agent's DaemonSet did not become ready"
fi
kubectl -n "$NS" wait --for=condition=Ready pod -l app.kubernetes.io/name=sigscope --timeout=60s
kubectl -n "$NS" get pods -o wide
total "make cluster-agent"
