#!/usr/bin/env bash
# The local cluster's images, built without a registry or Docker: each is one
# layer written with tar into a docker-archive tarball (manifest.json, config,
# layer) under .cache/cluster/images of this tree, then imported into the cluster's
# containerd (ctr -n k8s.io images import) when that runs.
#   sigscope.local/pause:PAUSE_VERSION  the sandbox image: pause/pause.c, static
#   sigscope.local/busybox:latest       Debian's busybox-static and its applets
#   sigscope.local/node:host            the host's node (Debian's nodejs) and the
#                                       shared libraries ldd names, when node is
#                                       installed
#   sigscope.local/sigscope:dev         bin/sigscope as deploy/Dockerfile builds it
#                                       (its go build line, ENTRYPOINT and EXPOSE
#                                       are read from the Dockerfile)
# Under CRI-O (make cluster RUNTIME=crio) each is copied into CRI-O's storage
# instead, with skopeo (docker-archive: to containers-storage:), under the same
# name. Layers are reproducible (sorted, mtime 0, uid 0), so an unchanged
# image keeps its ID and is not imported again.
# Usage: test/cluster/images.sh [--no-import | --import-only]
# SIGSCOPE_IMAGE_OPTIONAL=1 (make cluster): a tree that does not compile
# leaves the last sigscope image built (or none) with a warning.
set -euo pipefail
# shellcheck source=test/cluster/lib.sh
. "$(dirname "$0")/lib.sh"

PAUSE_IMAGE=sigscope.local/pause:$PAUSE_VERSION
BUSYBOX_IMAGE=sigscope.local/busybox:latest
SIGSCOPE_IMAGE=sigscope.local/sigscope:dev
NODE_IMAGE=sigscope.local/node:host
DEFAULT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# write_image OUT.tar REF ROOTFS CONFIG: CONFIG is the image config's
# "config" object (Entrypoint, Cmd, Env, ...) as JSON. Prints the image ID
# (the config's digest), which is what containerd reports for it.
write_image() {
	local out=$1 ref=$2 rootfs=$3 config=$4 work layer diff cfg id
	work=$(mktemp -d)
	layer=$work/layer.tar
	chmod 0755 "$rootfs" # mktemp -d made it 0700: the container's /
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -C "$rootfs" -cf "$layer" .
	diff=$(sha256sum "$layer" | cut -d' ' -f1)
	mkdir "$work/$diff"
	mv "$layer" "$work/$diff/layer.tar"
	cfg=$(printf '{"architecture":"amd64","os":"linux","created":"1970-01-01T00:00:00Z","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"test/cluster/images.sh"}]}' "$config" "$diff")
	id=$(printf '%s' "$cfg" | sha256sum | cut -d' ' -f1)
	printf '%s' "$cfg" >"$work/$id.json"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$id" "$ref" "$diff" >"$work/manifest.json"
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work" -cf "$out.tmp" manifest.json "$id.json" "$diff/layer.tar"
	mv "$out.tmp" "$out"
	rm -rf "$work"
	echo "sha256:$id" >"$out.id"
}

build_pause() {
	local root
	root=$(mktemp -d)
	install -m 0755 "$BIN/pause" "$root/pause"
	write_image "$IMAGES/pause.tar" "$PAUSE_IMAGE" "$root" '{"Entrypoint":["/pause"],"User":"65535:65535"}'
	rm -rf "$root"
}

build_busybox() {
	local root applet
	root=$(mktemp -d)
	# The static build: the image has no libc (ldd fails on a static binary).
	if [ ! -x /bin/busybox ] || ldd /bin/busybox >/dev/null 2>&1; then
		die "/bin/busybox is not Debian's busybox-static"
	fi
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,root,tmp,var/tmp}
	chmod 1777 "$root/tmp" "$root/var/tmp"
	install -m 0755 /bin/busybox "$root/bin/busybox"
	# Each applet where busybox says it belongs (bin/sh, usr/bin/env, ...).
	for applet in $(/bin/busybox --list-full); do
		[ -e "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
	write_image "$IMAGES/busybox.tar" "$BUSYBOX_IMAGE" "$root" "{\"Env\":[\"PATH=$DEFAULT_PATH\"],\"Cmd\":[\"sh\"]}"
	rm -rf "$root"
}

# The host's Node.js in an image of its own: /usr/bin/node (the binary the
# host's node resolves to) with each shared library ldd names, at the path
# ldd gives (the loader's own default paths: the image has no ld.so.cache),
# /tmp and /etc/passwd. Nothing else of the host: the e2e tests run it as a
# pod's PID 1 (`node -e ...`). Built again only when node or one of its
# libraries changed (their paths, sizes and times: .cache/cluster/images/
# node.tar.recipe). Without node on the host there is no such image, and
# the tests that need it say so.
build_node() {
	local node root f recipe files=()
	if ! node=$(command -v node); then
		rm -f "$IMAGES/node.tar" "$IMAGES/node.tar.id" "$IMAGES/node.tar.recipe"
		echo "no node on this machine (apt-get install nodejs): no $NODE_IMAGE"
		return 0
	fi
	node=$(readlink -f "$node")
	# "libx.so => /path (0x...)" and "/lib64/ld-linux-x86-64.so.2 (0x...)".
	mapfile -t files < <(ldd "$node" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
	[ ${#files[@]} -gt 0 ] || die "ldd $node names no shared library"
	recipe=$(stat -L -c '%n %s %Y' "$node" "${files[@]}")
	if [ -f "$IMAGES/node.tar" ] && [ -f "$IMAGES/node.tar.id" ] && [ "$(cat "$IMAGES/node.tar.recipe" 2>/dev/null)" = "$recipe" ]; then
		return 0
	fi
	root=$(mktemp -d)
	mkdir -p "$root"/{usr/bin,etc,tmp}
	chmod 1777 "$root/tmp"
	install -m 0755 "$node" "$root/usr/bin/node"
	for f in "${files[@]}"; do
		mkdir -p "$root$(dirname "$f")"
		cp -L "$f" "$root$f"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
	write_image "$IMAGES/node.tar" "$NODE_IMAGE" "$root" "{\"Env\":[\"PATH=$DEFAULT_PATH\"],\"Cmd\":[\"node\"]}"
	echo "$recipe" >"$IMAGES/node.tar.recipe"
	rm -rf "$root"
}

# deploy/Dockerfile's build: its `RUN CGO_ENABLED=0 go build ... -o /out/sigscope
# ./cmd/sigscope` line run here (with the developer's Go caches), the binary
# at /sigscope as its COPY puts it, its ENTRYPOINT and EXPOSE in the config.
build_sigscope() {
	local dockerfile=$top/deploy/Dockerfile root build entrypoint ports exposed="" p
	# shellcheck disable=SC2016 # "$out" is expanded by the eval below
	build=$(sed -n 's|^RUN \(CGO_ENABLED=0 go build .* -o \)/out/sigscope \(\./cmd/sigscope\)$|\1"$out" \2|p' "$dockerfile")
	entrypoint=$(sed -n 's/^ENTRYPOINT \(\[.*\]\)$/\1/p' "$dockerfile")
	ports=$(sed -n 's/^EXPOSE //p' "$dockerfile")
	if [ -z "$build" ] || [ -z "$entrypoint" ] || ! grep -qx 'COPY --from=build /out/sigscope /sigscope' "$dockerfile"; then
		die "deploy/Dockerfile no longer has the go build, COPY and ENTRYPOINT lines images.sh reads"
	fi
	root=$(mktemp -d)
	# shellcheck disable=SC2034 # out is used by the Dockerfile's command
	local out=$root/sigscope
	# Called as a condition (errexit is off): failures return by hand.
	if ! (cd "$top" && eval "$build"); then
		rm -rf "$root"
		return 1
	fi
	for p in $ports; do
		case $p in */*) ;; *) p=$p/tcp ;; esac
		exposed+="${exposed:+,}\"$p\":{}"
	done
	write_image "$IMAGES/sigscope.tar" "$SIGSCOPE_IMAGE" "$root" \
		"{\"Env\":[\"PATH=$DEFAULT_PATH\"],\"Entrypoint\":$entrypoint,\"ExposedPorts\":{$exposed}}"
	rm -rf "$root"
}

# ctr warns on every call that cgroup v1 is deprecated: said once in docs/cluster.md.
# The OpenTelemetry Collector of the OTLP tests (test/otelcol, its own Go
# module; the agent's OTLP logs go to it as a Deployment: test/e2e/kube/otlp_test.go).
# Built only on request (images.sh --otelcol): from an empty Go build cache it
# takes two to three minutes.
OTELCOL_IMAGE=sigscope.local/otelcol:dev

build_otelcol() {
	local root
	root=$(mktemp -d)
	if ! (cd "$top/test/otelcol" && CGO_ENABLED=0 go build -trimpath -o "$root/otelcol" .); then
		rm -rf "$root"
		return 1
	fi
	write_image "$IMAGES/otelcol.tar" "$OTELCOL_IMAGE" "$root" '{"Entrypoint":["/otelcol"],"User":"65534:65534"}'
	rm -rf "$root"
}

ctr_k8s() { "$BIN/ctr" --address "$CONTAINERD_SOCKET" -n k8s.io "$@" 2> >(grep -v 'DEPRECATION: The support for cgroup v1' >&2); }

# The runtime of the cluster in STATE (make cluster writes it) and whether it
# runs: where import_image puts the images.
RUNTIME=$(cluster_runtime)
runtime_up() {
	if [ "$RUNTIME" = crio ]; then
		running crio "$(daemon_bin crio)" >/dev/null && curl -fsS --max-time 2 --unix-socket "$CRIO_SOCKET" http://crio/info >/dev/null 2>&1
	else
		"$BIN/ctr" --address "$CONTAINERD_SOCKET" version >/dev/null 2>&1
	fi
}
runtime_label() { if [ "$RUNTIME" = crio ]; then echo CRI-O; else echo containerd; fi; }

# import_image NAME REF: imports IMAGES/NAME.tar into the cluster's runtime
# unless it has REF with that image ID already.
import_image() {
	if [ "$RUNTIME" = crio ]; then
		copy_to_crio "$@"
	else
		import_to_containerd "$@"
	fi
}

# copy_to_crio NAME REF: skopeo copies IMAGES/NAME.tar into CRI-O's storage as
# REF (containers-storage with CRI-O's driver, root and run root; its locks
# let skopeo write while CRI-O runs, and CRI-O sees the image at its next
# look). An image's ID there is its config's digest, as in the tarball: the
# config skopeo reads back from REF tells whether it is the same image.
copy_to_crio() {
	local name=$1 ref=$2 want have=""
	want=$(<"$IMAGES/$name.tar.id")
	if have=$(skopeo inspect --raw --config "containers-storage:$CRIO_STORE$ref" 2>/dev/null | sha256sum); then
		have=sha256:${have%% *}
	fi
	if [ "$have" = "$want" ]; then
		echo "$ref: present (${want:7:12})"
		return 0
	fi
	skopeo --policy "$STATE/crio-policy.json" copy --quiet "docker-archive:$IMAGES/$name.tar" "containers-storage:$CRIO_STORE$ref"
	echo "$ref: copied (${want:7:12})"
}

import_to_containerd() {
	local name=$1 ref=$2 want have
	want=$(<"$IMAGES/$name.tar.id")
	have=$(ctr_k8s images ls "name==$ref" 2>/dev/null | awk 'NR > 1 {print $3}')
	if [ -n "$have" ] && [ "$(ctr_k8s content get "$have" 2>/dev/null | sed -n 's/.*"config":{[^}]*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p')" = "$want" ]; then
		echo "$ref: present (${want:7:12})"
		return 0
	fi
	ctr_k8s images import --local "$IMAGES/$name.tar" >/dev/null
	echo "$ref: imported (${want:7:12})"
}

mode=${1:-}
case $mode in "" | --no-import | --import-only | --otelcol) ;; *) die "usage: images.sh [--no-import | --import-only | --otelcol]" ;; esac
mkdir -p "$IMAGES"
if [ "$mode" = --otelcol ]; then
	stage "images: build $OTELCOL_IMAGE and import it"
	build_otelcol || die "building $OTELCOL_IMAGE failed"
	runtime_up || die "the cluster's $(runtime_label) is not running: make cluster first"
	import_image otelcol "$OTELCOL_IMAGE"
	stage_end
	exit 0
fi
if [ "$mode" != --import-only ]; then
	stage "images: build pause, busybox, node, sigscope tarballs"
	[ -x "$BIN/pause" ] || bash "$here/build.sh" pause
	build_pause
	build_busybox
	build_node
	if ! build_sigscope; then
		# make cluster goes on without it (or with the last one built): the
		# cluster is also for work on a tree that does not compile right now.
		[ "${SIGSCOPE_IMAGE_OPTIONAL:-}" = 1 ] || die "building $SIGSCOPE_IMAGE failed"
		echo "warning: building $SIGSCOPE_IMAGE failed: $([ -f "$IMAGES/sigscope.tar" ] && echo "the last one built stays" || echo "the cluster has none")" >&2
	fi
	for i in pause busybox node sigscope; do
		[ -f "$IMAGES/$i.tar" ] || continue
		printf '  %-8s %s  %s\n' "$i" "$(cut -c8-19 "$IMAGES/$i.tar.id")" "$(du -h "$IMAGES/$i.tar" | cut -f1)"
	done
	stage_end
fi

if [ "$mode" != --no-import ]; then
	if runtime_up; then
		stage "images: import into the cluster's $(runtime_label)"
		import_image pause "$PAUSE_IMAGE"
		import_image busybox "$BUSYBOX_IMAGE"
		[ ! -f "$IMAGES/node.tar" ] || import_image node "$NODE_IMAGE"
		[ ! -f "$IMAGES/sigscope.tar" ] || import_image sigscope "$SIGSCOPE_IMAGE"
		stage_end
	else
		echo "the cluster's $(runtime_label) is not running: make cluster imports the images"
	fi
fi
