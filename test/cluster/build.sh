#!/usr/bin/env bash
# Builds the parts of the local cluster into .cache/cluster/bin, each at the
# version versions.sh pins, from the Go module proxy (private module and build
# caches under .cache/cluster/go, removed after the build) and Debian
# packages. A part is built again only when its recipe (version, go.sum,
# flags, toolchain) changed: the second run is a few checks. It runs under
# nice -n 19. Each part prints its build time.
# Usage: test/cluster/build.sh [PART ...]   (default: all; parts: kubelet
# kube-apiserver kube-controller-manager kube-scheduler kubectl etcd
# containerd runc pause)
set -euo pipefail
# shellcheck source=test/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(kubelet kube-apiserver kube-controller-manager kube-scheduler kubectl etcd containerd runc pause)
mkdir -p "$BIN"
built=0
# Builds yield to everything else on the machine (children inherit it).
renice -n 19 $$ >/dev/null

# The wrapper modules must say what versions.sh says (gen.sh writes them).
check_modules() {
	if ! grep -Eq "^[[:space:]]*(require )?k8s\.io/kubernetes $K8S_VERSION( |\$)" "$here/k8s/go.mod" ||
		! grep -Eq "^[[:space:]]*k8s\.io/api => k8s\.io/api v0\.${K8S_VERSION#v1.}\$" "$here/k8s/go.mod" ||
		! grep -Eq "^[[:space:]]*(require )?go\.etcd\.io/etcd/server/v3 $ETCD_VERSION( |\$)" "$here/etcd/go.mod"; then
		die "test/cluster/{k8s,etcd}/go.mod do not match versions.sh: run test/cluster/gen.sh and commit"
	fi
}

sum() { sha256sum "$@" | cut -c1-16 | tr '\n' ' '; }

# build_if_changed PART RECIPE COMMAND...: runs COMMAND (nice) when
# BIN/PART is missing or was built from another recipe.
build_if_changed() {
	local part=$1 recipe=$2 stamp=$BIN/.$1.recipe
	shift 2
	if [ -x "$BIN/$part" ] && [ -f "$stamp" ] && [ "$(<"$stamp")" = "$recipe" ]; then
		return 0
	fi
	stage "build $part"
	rm -f "$stamp"
	"$@"
	echo "$recipe" >"$stamp"
	built=$((built + 1))
	stage_end
}

# Kubernetes as its release build does it (hack/lib/golang.sh, version.sh):
# static, tags selinux and notest, the version stamped into both version
# packages (otherwise it reads v0.0.0-master).
k8s_ldflags() {
	local minor=${K8S_VERSION#v1.} f=""
	minor=${minor%%.*}
	for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
		f+="-X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean "
	done
	echo "-s -w $f"
}
build_k8s() {
	local cmd=$1
	(cd "$here/k8s" && go_env CGO_ENABLED=0 go build -mod=readonly -trimpath -tags selinux,notest \
		-ldflags "$(k8s_ldflags)" -o "$BIN/$cmd" "k8s.io/kubernetes/cmd/$cmd")
}

build_etcd() {
	(cd "$here/etcd" && go_env CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$BIN/etcd" .)
}

# containerd and ctr as its Makefile builds them (CGO on, version stamped);
# the shim static and without gRPC (SHIM_CGO_ENABLED=0, tag no_grpc). The
# v2 shim must be the first containerd-shim-runc-v2 on containerd's PATH:
# Debian's 1.6 shim (from docker.io) fails with "type with url ... not found".
build_containerd() {
	local pkg=github.com/containerd/containerd/v2
	local ld="-s -w -X $pkg/version.Version=$CONTAINERD_VERSION -X $pkg/version.Package=$pkg"
	go_env GOBIN="$BIN" go install -trimpath -tags urfave_cli_no_docs -ldflags "$ld" \
		"$pkg/cmd/containerd@$CONTAINERD_VERSION" "$pkg/cmd/ctr@$CONTAINERD_VERSION"
	go_env GOBIN="$BIN" CGO_ENABLED=0 go install -trimpath -tags urfave_cli_no_docs,no_grpc -ldflags "$ld" \
		"$pkg/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
}

# runc with seccomp (CGO, Debian's libseccomp): without it every pod fails
# "seccomp not supported". Debian's runc 1.1.5 fails under containerd 2.4.
build_runc() {
	go_env GOBIN="$BIN" CGO_ENABLED=1 go install -trimpath -tags seccomp,urfave_cli_no_docs -ldflags "-s -w" \
		"github.com/opencontainers/runc@$RUNC_VERSION"
}

build_pause() {
	gcc -static -Os -s -Wall -Werror -DVERSION="\"$PAUSE_VERSION\"" -o "$BIN/pause" "$here/pause/pause.c"
}

stage "Debian packages ($DEBIAN_PACKAGES)"
install_debian_packages
check_modules
stage_end

k8s_recipe="$K8S_VERSION $(sum "$here/k8s/go.sum") $(go version) $(k8s_ldflags)"
for part in "${parts[@]}"; do
	case $part in
	kubelet | kube-apiserver | kube-controller-manager | kube-scheduler | kubectl)
		build_if_changed "$part" "$k8s_recipe" build_k8s "$part"
		;;
	etcd) build_if_changed etcd "$ETCD_VERSION $(sum "$here/etcd/go.sum" "$here/etcd/main.go") $(go version)" build_etcd ;;
	containerd)
		# One recipe for the three binaries; the stamp is containerd's.
		build_if_changed containerd "$CONTAINERD_VERSION $(go version) shim-static-no_grpc" build_containerd
		;;
	runc) build_if_changed runc "$RUNC_VERSION $(go version) $(dpkg-query -W -f='${Version}' libseccomp-dev)" build_runc ;;
	pause) build_if_changed pause "$PAUSE_VERSION $(sum "$here/pause/pause.c") $(gcc -dumpfullversion)" build_pause ;;
	*) die "unknown part $part" ;;
	esac
done
if [ "$built" -gt 0 ]; then
	printf 'built %d part(s); .cache/cluster: %s, of which Go module cache %s, Go build cache %s\n' "$built" \
		"$(du -sh "$CACHE" | cut -f1)" "$(du -sh "$CACHE/go/mod" | cut -f1)" "$(du -sh "$CACHE/go/build" | cut -f1)"
	# The caches serve no later build: a new version or Go toolchain
	# compiles everything again, and downloading the modules takes seconds.
	# CLUSTER_KEEP_GO_CACHES=1 keeps them (work on these scripts).
	if [ "${CLUSTER_KEEP_GO_CACHES:-}" != 1 ]; then
		go_env go clean -cache -modcache
		rm -rf "$CACHE/go"
		printf 'Go caches removed; .cache/cluster: %s\n' "$(du -sh "$CACHE" | cut -f1)"
	fi
fi
total "build (test/cluster/build.sh)"
