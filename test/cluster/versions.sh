# shellcheck shell=bash
# shellcheck disable=SC2034 # the scripts that source this file use these
# The pinned versions of the local cluster (make cluster): the one place to
# change them. test/cluster/gen.sh writes the wrapper modules (k8s/go.mod,
# etcd/go.mod) from these, and build.sh refuses to build when they disagree.
# All Go parts come from the Go module proxy; the rest are Debian packages
# (bookworm), whose versions apt decides.

# Kubernetes server binaries and kubectl (k8s.io/kubernetes). Its staging
# modules (k8s.io/api, k8s.io/client-go, ...) are published as v0.MINOR.PATCH.
K8S_VERSION=v1.37.2
# containerd with its CRI plugin, its runc v2 shim and ctr.
CONTAINERD_VERSION=v2.4.2
# runc, built with CGO and -tags seccomp against Debian's libseccomp-dev.
RUNC_VERSION=v1.5.2
# etcd server (go.etcd.io/etcd/server/v3), through a tiny main.
ETCD_VERSION=v3.6.6
# The tag of the locally built sandbox ("pause") image.
PAUSE_VERSION=3.10

# Debian packages: CNI plugins (bridge, host-local, loopback), the static
# busybox of the test image, libseccomp for runc, a C toolchain with a static
# libc for runc and pause, openssl for the certificates, Node.js for the
# image of test/e2e/kube's Node.js pod (images.sh copies the host's node).
DEBIAN_PACKAGES="containernetworking-plugins busybox-static libseccomp-dev gcc libc6-dev openssl iproute2 curl socat nodejs"

# Feature gates of the API server, the controller-manager, the scheduler and
# the kubelet, as Kubernetes' --feature-gates takes them (Name=true,...):
# make cluster's default, which FEATURE_GATES replaces (FEATURE_GATES= make
# cluster: none). ContainerStopSignals (alpha in 1.37, off by Kubernetes'
# default) lets a container's lifecycle.stopSignal reach the runtime through
# CRI; test/e2e/kube's stop-signal tests need it, and it changes nothing for a pod
# that sets none. A gate that becomes GA in a new K8S_VERSION goes from here.
DEFAULT_FEATURE_GATES="ContainerStopSignals=true"
