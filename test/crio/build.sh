#!/usr/bin/env bash
# Builds CRI-O (cmd/crio) and its namespace pinner (pinns, C) from the Go
# module proxy, and the pods' pause process, into the pinned builds' cache
# outside the tree (test/cache.sh: SIGSCOPE_CACHE/crio/bin,
# /var/cache/sigscope/crio/bin by default), which every clone on the machine
# shares; keyed by version, Go toolchain, C compiler, libseccomp and the
# commands of this script: a second run with the same recipe, from any
# clone, only checks the stamps. The cache's lock is held throughout (a
# second run at the same time waits, then finds them fresh); each binary is
# built into the cache's .tmp and renamed into place. Prints each build's
# time. The module and build caches are private (CACHE/go) and removed after
# the build, so the time printed is a cold build's, as in CI. conmon, runc
# and skopeo come from Debian (installed when missing).
# Usage: test/crio/build.sh   (prints the bin directory last)
set -euo pipefail

# A recent CRI-O release the module proxy serves (it refuses v1.33.0 and the
# module's version list).
CRIO_VERSION=${CRIO_VERSION:-v1.34.0}
# gpgme (containers_image_openpgp: the pure Go signature code instead), btrfs
# and devicemapper (their C headers are not installed) and ostree are left
# out; seccomp against Debian's libseccomp-dev, as CRI-O's own release.
CRIO_TAGS="containers_image_ostree_stub containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper seccomp"
# conmon: CRI-O's container monitor; skopeo: copies the tests' images into
# CRI-O's storage (no registry here); gcc and libc6-dev: pinns, static.
DEBIAN_PACKAGES="conmon runc skopeo libseccomp-dev gcc libc6-dev"

top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=test/cache.sh
. "$top/test/cache.sh"
CACHE=$(cache_dir crio)
BIN=$CACHE/bin
# One build at a time, whichever clone runs it (the lock goes at exit).
cache_lock "$CACHE"
mkdir -p "$BIN"

missing=()
for p in $DEBIAN_PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "crio: installing from Debian: ${missing[*]}" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 apt-get install -y -qq "${missing[@]}" >/dev/null
fi

go_env() {
	env GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOTOOLCHAIN=local GOFLAGS="-modcacherw" "$@"
}

# The module's source tree, downloaded by version. Not `go install
# ...@VERSION`: that asks the proxy for the module's version list (for
# deprecation notices), which the proxy refuses for cri-o (403).
source_tree() {
	local src
	src=$(cd /tmp && go_env go mod download -json "github.com/cri-o/cri-o@$CRIO_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[ -d "$src" ] || {
		echo "crio: go mod download gave no source tree" >&2
		exit 1
	}
	echo "$src"
}

# fresh PART RECIPE: whether BIN/PART was built from RECIPE.
fresh() { [ -x "$BIN/$1" ] && [ -f "$BIN/.$1.recipe" ] && [ "$(<"$BIN/.$1.recipe")" = "$2" ]; }
took() {
	printf 'crio: built %s %s in %dm%02ds\n' "$1" "$CRIO_VERSION" $(((SECONDS - $2) / 60)) $(((SECONDS - $2) % 60)) >&2
}
# install_part PART RECIPE: OUT/PART, just built, renamed into BIN (one
# filesystem: the old binary is replaced at once), then its stamp.
install_part() {
	rm -f "$BIN/.$1.recipe"
	mv -f "$OUT/$1" "$BIN/$1"
	echo "$2" >"$OUT/.$1.recipe"
	mv -f "$OUT/.$1.recipe" "$BIN/.$1.recipe"
}
OUT=$(mktemp -d "$CACHE/.tmp/build.XXXXXX")

# This script's part of each recipe: its commands.
script=$(cache_script_hash "$top/test/crio/build.sh")
crio_recipe="$CRIO_VERSION $(go version) $(dpkg-query -W -f='${Version}' libseccomp-dev) $CRIO_TAGS script $script"
pinns_recipe="$CRIO_VERSION $(gcc -dumpfullversion) static script $script"
built=0
if ! fresh crio "$crio_recipe"; then
	start=$SECONDS
	echo "crio: building crio $CRIO_VERSION (tags: $CRIO_TAGS)" >&2
	src=$(source_tree)
	# nice: the build yields to the tests and daemons on the machine.
	(cd "$src" && go_env CGO_ENABLED=1 nice -n 19 go build -mod=readonly -trimpath -tags "$CRIO_TAGS" \
		-ldflags "-s -w" -o "$OUT/crio" ./cmd/crio) >&2
	install_part crio "$crio_recipe"
	took crio "$start"
	built=1
fi
# pinns keeps a pod's namespaces (UTS, IPC, network) as bind mounts; CRI-O
# runs it for every sandbox. As pinns/Makefile builds it: C99, static.
if ! fresh pinns "$pinns_recipe"; then
	start=$SECONDS
	src=$(source_tree)
	gcc -std=c99 -Os -O3 -Wall -Werror -Wextra -static -s -o "$OUT/pinns" "$src"/pinns/src/*.c
	install_part pinns "$pinns_recipe"
	took pinns "$start"
	built=1
fi
# The sandbox ("pause") process of CRI-O's pods: the local cluster's
# (test/cluster/pause/pause.c, exits on SIGTERM like Kubernetes' own), so
# that CRI-O's stop of a sandbox does not wait out its timeout (CRI-O sends
# the pause process SIGTERM first; containerd SIGKILLs it at once).
pause_recipe="$(sha256sum "$top/test/cluster/pause/pause.c" | cut -c1-16) $(gcc -dumpfullversion) static script $script"
if ! fresh pause "$pause_recipe"; then
	gcc -static -Os -s -Wall -Werror -DVERSION='"sigscope-crio"' -o "$OUT/pause" "$top/test/cluster/pause/pause.c"
	install_part pause "$pause_recipe"
fi
rmdir "$OUT"
if [ "$built" = 1 ] && [ -d "$CACHE/go" ]; then
	printf 'crio: Go caches %s, removed\n' "$(du -sh "$CACHE/go" | cut -f1)" >&2
	go_env go clean -cache -modcache
	rm -rf "$CACHE/go"
fi
echo "$BIN"
