#!/usr/bin/env bash
# Boots Debian's kernels under qemu (software emulation, no KVM needed) and
# runs the tracer's privileged tests inside each, as PID 1 of a busybox
# initramfs. Usage: test/kernels/run.sh [--fetch] [SERIES ...]   (default:
# 5.10 6.1 6.12; --fetch: only fetch the kernels into the cache)
#
# A series is matched against Debian's linux-image packages and the newest
# build is taken (e.g. 6.1 -> linux-image-6.1.0-NN-amd64): first in this
# machine's own package lists (bookworm), then in Debian 11's (bullseye, for
# 5.10), read through a separate sources list used only to download the
# package. Kernels are cached, by package name, in the pinned builds' cache
# outside the tree (test/cache.sh: SIGSCOPE_CACHE/kernels,
# /var/cache/sigscope/kernels by default), which every clone on the machine
# shares: all are fetched first, under the cache's lock (a second run waits,
# then finds them there), each into the cache's .tmp and renamed into place;
# the boots come after, without the lock. Exits non-zero if any kernel fails,
# or if any test on it fails or is skipped without leave
# (SIGSCOPE_REQUIRE_PRIVILEGED=1 inside).
# The only leave is a test of a kernel feature sigscope does not need and
# the kernel lacks (cgroup.kill before 5.14): its skip message says
# SIGSCOPE_KERNEL_LACKS and the summary lists it.
# SIGSCOPE_VM_TEST_RUN=REGEX runs only the matching tests (go test -run);
# SIGSCOPE_VM_PARALLEL=N boots N kernels at a time (default 2).
# SIGSCOPE_VM_LOGS=DIR keeps each kernel's full serial console log there.
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$PWD
# shellcheck source=test/cache.sh
. "$top/test/cache.sh"
fetch_only=
if [ "${1:-}" = --fetch ]; then
	fetch_only=1
	shift
fi
series=("$@")
[ ${#series[@]} -gt 0 ] || series=(5.10 6.1 6.12)
cache=$(cache_dir kernels)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

need() {
	local missing=()
	command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
	command -v cpio >/dev/null || missing+=(cpio)
	# The initramfs has no libc: /bin/busybox must be the static build
	# (ldd fails on a static binary).
	if [ ! -x /bin/busybox ] || ldd /bin/busybox >/dev/null 2>&1; then
		missing+=(busybox-static)
	fi
	if [ ${#missing[@]} -gt 0 ]; then
		echo "installing ${missing[*]}"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
	fi
}

# Debian 11 (bullseye) has the 5.10 LTS kernel. Its package list is kept
# apart from the system's (its own sources list and state directory in the
# cache, kernels/apt-bullseye), so nothing is ever installed from it: it
# only serves `apt-get download`. The mirror is the one this machine's
# sources use.
old_apt=$cache/apt-bullseye
old_apt_opts=(-o "Dir::Etc::SourceList=$old_apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o "Dir::State::Lists=$old_apt/lists" -o "Dir::Cache=$old_apt/cache")
old_apt_ready=
old_apt_update() {
	[ -z "$old_apt_ready" ] || return 0
	old_apt_ready=1
	mkdir -p "$old_apt/lists/partial" "$old_apt/cache/archives/partial"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bullseye main" \
		>"$old_apt/sources.list"
	apt-get "${old_apt_opts[@]}" update -qq >/dev/null 2>&1 || echo "apt-get update (bullseye) failed" >&2
}

# newest Debian kernel image package for a series, e.g. 5.10, 6.1 or 6.12,
# prefixed with "old " when it comes from the bullseye list
package_for() {
	local v=${1//./\\.} pkg
	local re="^linux-image-${v}[.-][0-9][^ ]*-amd64(-unsigned)?\$"
	pick() { awk '{print $1}' | grep -v -e dbg -e cloud -e rt- | sort -V | tail -n 1; }
	pkg=$(apt-cache search --names-only "$re" 2>/dev/null | pick)
	if [ -n "$pkg" ]; then
		echo "$pkg"
		return
	fi
	old_apt_update
	pkg=$(apt-cache "${old_apt_opts[@]}" search --names-only "$re" 2>/dev/null | pick)
	[ -z "$pkg" ] || echo "old $pkg"
}

fetch_kernel() {
	local opts=() pkg=$1
	if [ "$pkg" = old ]; then
		opts=("${old_apt_opts[@]}")
		pkg=$2
	fi
	local dir=$cache/$pkg tmp
	if [ ! -f "$dir/vmlinuz" ]; then
		echo "fetching $pkg into $dir" >&2
		tmp=$(mktemp -d "$cache/.tmp/$pkg.XXXXXX")
		# apt downloads as _apt where it may (else it warns and does it as root).
		chown _apt "$tmp" 2>/dev/null || true
		(cd "$tmp" && apt-get "${opts[@]}" download -qq "$pkg" >/dev/null)
		dpkg-deb --fsys-tarfile "$tmp"/*.deb | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*'
		mkdir -p "$dir"
		mv "$tmp"/boot/vmlinuz-* "$dir/vmlinuz"
		rm -rf "$tmp"
	fi
	echo "$dir/vmlinuz"
}

build_initramfs() {
	local root=$work/root
	mkdir -p "$root"/{bin,sbin,usr/bin,proc,sys,dev,tmp,root,etc}
	cp /bin/busybox "$root/bin/busybox"
	for applet in $(/bin/busybox --list); do
		[ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
	done
	install -m 0755 test/kernels/init.sh "$root/init"
	echo "building the privileged test binary (static)"
	mkdir -p "$root/tracer"
	CGO_ENABLED=0 go test -c -o "$root/tracer/tracer.test" ./tracer
	cp -r tracer/testdata "$root/tracer/" # recorded records the unit tests replay
	printf '%s\n' "${SIGSCOPE_VM_TEST_RUN:-.}" >"$root/test-run"
	(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$work/initramfs.gz"
}

# The kernels first, under the cache's lock; then the boots without it.
[ -n "$fetch_only" ] || need
apt-get update -qq >/dev/null 2>&1 || true
cache_lock "$cache"
pkgs=() kernels=()
for s in "${series[@]}"; do
	pkg=$(package_for "$s")
	kernel=
	# shellcheck disable=SC2086 # "old NAME" splits in two on purpose
	[ -z "$pkg" ] || kernel=$(fetch_kernel $pkg)
	pkgs+=("${pkg#old }")
	kernels+=("$kernel")
done
cache_unlock
if [ -n "$fetch_only" ]; then
	for i in "${!series[@]}"; do
		printf '%-6s %s\n' "${series[$i]}" "${kernels[$i]:-no Debian kernel package}"
	done
	exit 0
fi
build_initramfs

# Two kernels boot side by side unless SIGSCOPE_VM_PARALLEL says: a
# VM keeps about one core busy (the verifier, which qemu's emulation runs
# on one thread). Measured here on 2 cores: 2.5 min a kernel alone; two
# side by side 2.6 and 3 min (the matrix in 5.5 min, not 8); all three at
# once 4.6 to 5.2 min each, no sooner, and a test's 5 ms timing missed.
# Two side by side once failed TestHelperReadsMatchDirect on 6.1, whose
# harness stopped its tracers before the init's last signal (it waited for
# an event the kernel makes before it, fixed since): two it is. Their
# results are read, and printed, in the series' order.
boot() {
	local s=$1 kernel=$2 log=$work/$1.log start
	start=$(date +%s)
	timeout 900 qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2 -m 1G \
		-nographic -no-reboot -kernel "$kernel" -initrd "$work/initramfs.gz" \
		-append 'console=ttyS0 panic=-1 quiet' </dev/null >"$log" 2>&1 || true
	echo $(( $(date +%s) - start )) >"$work/$s.secs"
}
parallel=${SIGSCOPE_VM_PARALLEL:-2}
running=0
for i in "${!series[@]}"; do
	[ -n "${pkgs[$i]}" ] || continue
	if [ "$running" -ge "$parallel" ]; then
		wait -n || true
		running=$((running - 1))
	fi
	echo "== ${series[$i]}: booting ${pkgs[$i]}"
	boot "${series[$i]}" "${kernels[$i]}" &
	running=$((running + 1))
done
wait

status=0
summary=() failures=()
total_pass=0 total_fail=0 total_skip=0
for i in "${!series[@]}"; do
	s=${series[$i]} pkg=${pkgs[$i]}
	if [ -z "$pkg" ]; then
		echo "no Debian kernel package for series $s" >&2
		summary+=("$(printf '%-10s %-34s %s' "$s" "-" "NO PACKAGE")")
		status=1
		continue
	fi
	log=$work/$s.log
	secs=$(cat "$work/$s.secs" 2>/dev/null || echo "?")
	tr -d '\r' <"$log" >"$log.txt"
	if [ -n "${SIGSCOPE_VM_LOGS:-}" ]; then
		mkdir -p "$SIGSCOPE_VM_LOGS" && cp "$log.txt" "$SIGSCOPE_VM_LOGS/$s.log"
	fi
	grep -aE '(--- (PASS|FAIL|SKIP)|^    |^PASS$|^FAIL$|SIGSCOPE_)' "$log.txt" | sed "s/^/  [$s] /" || true
	# The firmware's escape codes can share a line with the first marker.
	kver=$(grep -ao 'SIGSCOPE_KERNEL [^ ]*' "$log.txt" | head -n 1 | cut -d' ' -f2 || true)
	rc=$(grep -ao 'SIGSCOPE_RC [0-9]*' "$log.txt" | head -n 1 | cut -d' ' -f2 || true)
	pass=$(grep -c -- '--- PASS' "$log.txt" || true)
	fail=$(grep -c -- '--- FAIL' "$log.txt" || true)
	skip=$(grep -c -- '--- SKIP' "$log.txt" || true)
	lacks=$(grep -ao 'SIGSCOPE_KERNEL_LACKS [^(]*([^)]*)' "$log.txt" | sed 's/SIGSCOPE_KERNEL_LACKS //' | sort -u | paste -sd ';' - || true)
	nlacks=$(grep -c 'SIGSCOPE_KERNEL_LACKS' "$log.txt" || true)
	exitprog=$(grep -o 'attached handle_exit_v[12]' "$log.txt" | head -n 1 | sed 's/attached //' || true)
	object=$(grep -o 'loaded object sigscope[a-z_]*' "$log.txt" | head -n 1 | sed 's/loaded object //' || true)
	total_pass=$((total_pass + pass)) total_fail=$((total_fail + fail)) total_skip=$((total_skip + skip))
	[ -n "$rc" ] || total_fail=$((total_fail + 1)) # a kernel that gave no result counts as a failure
	verdict=pass
	if [ -z "$rc" ]; then
		verdict="NO RESULT (boot or timeout; log follows)"
		tail -n 40 "$log.txt" | sed "s/^/  [$s] /"
	elif [ "$rc" != 0 ] || [ "$fail" != 0 ] || [ "$skip" -gt "$nlacks" ]; then
		verdict="FAIL (rc $rc)"
	fi
	[ "$verdict" = pass ] || status=1
	# CI shows only the output's tail: name what failed there, with the test's own lines.
	if [ "$fail" != 0 ]; then
		failed=$(grep -ao -- '--- FAIL: [^ ]*' "$log.txt" | sed 's/--- FAIL: //' | sort -u | paste -sd ' ' -)
		verdict="$verdict; failed: $failed"
		failures+=("$s:")
		while IFS= read -r line; do failures+=("$line"); done < <(grep -a -B25 -A2 -- "--- FAIL" "$log.txt" | tail -n 80)
	fi
	[ -z "$lacks" ] || verdict="$verdict; skipped, the kernel lacks: $lacks"
	summary+=("$(printf '%-6s %-26s passed %-3s failed %-3s skipped %-3s object %-15s exit %-14s boot+tests %4ss  %s' \
		"$s" "${kver:-?}" "$pass" "$fail" "$skip" "${object:-?}" "${exitprog:-?}" "$secs" "$verdict")")
done

echo
echo "kernel matrix (tests counted with subtests):"
printf '  %s\n' "${summary[@]}"
if [ ${#failures[@]} -gt 0 ]; then
	echo "failures:"
	printf '  %s\n' "${failures[@]}"
fi
echo "kernels: $total_pass passed, $total_fail failed, $total_skip skipped"
exit $status
