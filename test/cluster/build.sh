#!/usr/bin/env bash
# Builds the parts of the local cluster, each at the version versions.sh
# pins, from the Go module proxy and Debian packages, into the pinned
# builds' cache outside the tree (test/cache.sh: SIGSCOPE_CACHE/cluster/bin,
# /var/cache/sigscope/cluster/bin by default), which every clone on the
# machine shares. A part is built again only when its recipe changed
# (version, go.mod and go.sum, flags, Go toolchain, and the commands of this
# script: .PART.recipe beside it): the second run, from any clone, is a few
# checks. The cache's lock is held throughout (a second run at the same time
# waits, then finds the parts fresh); each part is built into the cache's
# .tmp and renamed into place, so nothing ever runs a half-written binary.
# The Go module and build caches are private (CACHE/go) and removed after
# the build. It runs under nice -n 19. Each part prints its build time.
# Usage: test/cluster/build.sh [PART ...]   (default: all; parts: kubelet
# kube-apiserver kube-controller-manager kube-scheduler kubectl etcd
# containerd runc pause)
set -euo pipefail
# shellcheck source=test/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(kubelet kube-apiserver kube-controller-manager kube-scheduler kubectl etcd containerd runc pause)
built=0
# Builds yield to everything else on the machine (children inherit it).
renice -n 19 $$ >/dev/null
# One build at a time in the cache, whichever clone runs it.
cache_lock "$CACHE"
mkdir -p "$BIN"
# This script's part of every recipe: its commands, and the Go environment
# they build in.
script=$(cache_script_hash "$here/build.sh" <(declare -f go_env))

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
# BIN/PART is missing or was built from another recipe. COMMAND writes its
# files into OUT (under the cache's .tmp), which are then renamed into BIN
# (one filesystem: each replaces the old one at once, a running daemon
# keeps its own), and the stamp last.
build_if_changed() {
	local part=$1 recipe="$2 script $script" stamp=$BIN/.$1.recipe f
	shift 2
	if [ -x "$BIN/$part" ] && [ -f "$stamp" ] && [ "$(<"$stamp")" = "$recipe" ]; then
		return 0
	fi
	stage "build $part"
	OUT=$(mktemp -d "$CACHE/.tmp/$part.XXXXXX")
	"$@"
	[ -x "$OUT/$part" ] || die "building $part left no $part"
	rm -f "$stamp"
	for f in "$OUT"/*; do
		mv -f "$f" "$BIN/"
	done
	echo "$recipe" >"$OUT/.recipe"
	mv -f "$OUT/.recipe" "$stamp"
	rmdir "$OUT"
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
		-ldflags "$(k8s_ldflags)" -o "$OUT/$cmd" "k8s.io/kubernetes/cmd/$cmd")
}

build_etcd() {
	(cd "$here/etcd" && go_env CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$OUT/etcd" .)
}

# containerd and ctr as its Makefile builds them (CGO on, version stamped);
# the shim static and without gRPC (SHIM_CGO_ENABLED=0, tag no_grpc). The
# v2 shim must be the first containerd-shim-runc-v2 on containerd's PATH:
# Debian's 1.6 shim (from docker.io) fails with "type with url ... not found".
build_containerd() {
	local pkg=github.com/containerd/containerd/v2
	local ld="-s -w -X $pkg/version.Version=$CONTAINERD_VERSION -X $pkg/version.Package=$pkg"
	go_env GOBIN="$OUT" go install -trimpath -tags urfave_cli_no_docs -ldflags "$ld" \
		"$pkg/cmd/containerd@$CONTAINERD_VERSION" "$pkg/cmd/ctr@$CONTAINERD_VERSION"
	go_env GOBIN="$OUT" CGO_ENABLED=0 go install -trimpath -tags urfave_cli_no_docs,no_grpc -ldflags "$ld" \
		"$pkg/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
}

# runc with seccomp (CGO, Debian's libseccomp): without it every pod fails
# "seccomp not supported". Debian's runc 1.1.5 fails under containerd 2.4.
build_runc() {
	go_env GOBIN="$OUT" CGO_ENABLED=1 go install -trimpath -tags seccomp,urfave_cli_no_docs -ldflags "-s -w" \
		"github.com/opencontainers/runc@$RUNC_VERSION"
}

build_pause() {
	gcc -static -Os -s -Wall -Werror -DVERSION="\"$PAUSE_VERSION\"" -o "$OUT/pause" "$here/pause/pause.c"
}

stage "Debian packages ($DEBIAN_PACKAGES)"
install_debian_packages
check_modules
stage_end

k8s_recipe="$K8S_VERSION $(sum "$here/k8s/go.mod" "$here/k8s/go.sum") $(go version) $(k8s_ldflags)"
for part in "${parts[@]}"; do
	case $part in
	kubelet | kube-apiserver | kube-controller-manager | kube-scheduler | kubectl)
		build_if_changed "$part" "$k8s_recipe" build_k8s "$part"
		;;
	etcd) build_if_changed etcd "$ETCD_VERSION $(sum "$here/etcd/go.mod" "$here/etcd/go.sum" "$here/etcd/main.go") $(go version)" build_etcd ;;
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
	printf 'built %d part(s); %s: %s, of which Go module cache %s, Go build cache %s\n' "$built" "$CACHE" \
		"$(du -sh "$CACHE" | cut -f1)" "$(du -sh "$CACHE/go/mod" | cut -f1)" "$(du -sh "$CACHE/go/build" | cut -f1)"
	# The caches serve no later build: a new version or Go toolchain
	# compiles everything again, and downloading the modules takes seconds.
	# CLUSTER_KEEP_GO_CACHES=1 keeps them (work on these scripts).
	if [ "${CLUSTER_KEEP_GO_CACHES:-}" != 1 ]; then
		go_env go clean -cache -modcache
		rm -rf "$CACHE/go"
		printf 'Go caches removed; %s: %s\n' "$CACHE" "$(du -sh "$CACHE" | cut -f1)"
	fi
fi
total "build (test/cluster/build.sh)"
