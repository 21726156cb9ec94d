#!/usr/bin/env bash
# The API server's relay for pods (apiserver-relay, docs/cluster.md), stopped
# and started again: with it stopped, the pods on the bridge (the agent's
# DaemonSet) cannot reach the API server, while kubectl and the kubelet,
# which use 127.0.0.1, still do. For the end-to-end tests of an API server
# outage (test/e2e/kube/outage_test.go).
#   test/cluster/relay.sh stop    stop it and close the connections it carries;
#                                 fails if the API server still answers there
#   test/cluster/relay.sh start   start it unless it runs, and wait until the
#                                 API server answers through it
set -euo pipefail
# shellcheck source=test/cluster/lib.sh
. "$(dirname "$0")/lib.sh"
[ -f "$STATE/env" ] || die "no cluster here: run make cluster first"
[ "$(id -u)" -eq 0 ] || die "relay.sh needs root: the relay is root's"
SOCAT=$(command -v socat) || die "socat is missing (apt-get install socat)"
through_relay() {
	curl -fsS --max-time 2 --cacert "$STATE/pki/ca.crt" --cert "$STATE/pki/admin.crt" --key "$STATE/pki/admin.key" \
		"https://$BRIDGE_IP:$APISERVER_PORT/readyz"
}

case "${1:-}" in
stop)
	relay_stop "$SOCAT"
	if through_relay >/dev/null 2>&1; then
		die "the API server still answers at $BRIDGE_IP:$APISERVER_PORT"
	fi
	;;
start)
	if pid=$(running apiserver-relay "$SOCAT"); then
		echo "apiserver-relay runs (pid $pid)"
	else
		relay_start "$SOCAT"
		echo "apiserver-relay started (pid $(<"$(pidfile apiserver-relay)"))"
	fi
	wait_for "the API server at $BRIDGE_IP:$APISERVER_PORT" 20 - through_relay
	;;
*)
	die "usage: $0 stop|start"
	;;
esac
