#!/usr/bin/env bash
# Runs the Go fuzz targets (func FuzzXxx(f *testing.F) in *_test.go), one at
# a time, each for FUZZTIME (default 15s). Usage:
#
#   test/fuzz.sh                      every target in the repository
#   test/fuzz.sh FuzzDecode ...       only the targets named
#   FUZZTIME=2m test/fuzz.sh          longer (any go test -fuzztime: 30s, 10000x)
#
# Needs no root: -run '^$' keeps the packages' other tests out. Stops at the
# first target that fails, exiting non-zero, and prints where Go wrote the
# failing input (PKG/testdata/fuzz/FuzzXxx/HASH): commit that file, and
# `go test ./PKG` replays it as a regular test from then on. A run whose only
# failure is Go's own "context deadline exceeded" at the end of -fuzztime
# (golang/go#75804, a coordinator race fixed in Go 1.27) wrote no input: it
# is said, its corpus is replayed (which must pass), and the summary names it. The inputs found
# interesting along the way stay in Go's cache (go env GOCACHE), not here.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
fuzztime=${FUZZTIME:-15s}

# PKG NAME pairs, in file order.
targets=()
while IFS= read -r file; do
	pkg=./$(dirname "$file")
	while IFS= read -r name; do
		targets+=("$pkg $name")
	done < <(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file")
done < <(grep -rl '^func Fuzz' --include='*_test.go' --exclude-dir=.cache --exclude-dir=.cluster --exclude-dir=.git . | sed 's|^\./||' | sort)

if [ $# -gt 0 ]; then
	wanted=()
	for t in "${targets[@]}"; do
		for n in "$@"; do
			if [ "${t#* }" = "$n" ]; then wanted+=("$t"); fi
		done
	done
	if [ ${#wanted[@]} -ne $# ]; then
		echo "fuzz.sh: no such target; there are: $(printf '%s ' "${targets[@]#* }")" >&2
		exit 2
	fi
	targets=("${wanted[@]}")
fi
if [ ${#targets[@]} -eq 0 ]; then
	echo "fuzz.sh: no fuzz targets found" >&2
	exit 2
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# coordinator_race reports whether a fuzz run's only failure is the
# coordinator's own deadline at the end of -fuzztime: the one FAIL line of
# the target followed by "context deadline exceeded", no input written, no
# panic, no other error.
coordinator_race() {
	grep -q '^    context deadline exceeded$' "$1" &&
		! grep -q 'Failing input written\|failure while testing seed corpus\|^panic\|_test.go:[0-9]*:' "$1" &&
		[ "$(grep -c '^--- FAIL' "$1")" -eq 1 ]
}
races=()
start=$SECONDS
printf '%d fuzz targets, %s each\n' ${#targets[@]} "$fuzztime"
for t in "${targets[@]}"; do
	pkg=${t% *}
	name=${t#* }
	printf '==> %s (%s)\n' "$name" "$pkg"
	t0=$SECONDS
	rc=0
	"$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ] && coordinator_race "$log"; then
		# Go's fuzzing coordinator (go1.26 and older) can report the end of
		# a -fuzztime window as a failure of its own, "context deadline
		# exceeded", with no input written (golang/go#75804, fixed in Go
		# 1.27): it then found nothing. Said, counted, and the target's
		# corpus replayed deterministically, which must pass.
		printf '%s: Go'\''s fuzz coordinator reported "context deadline exceeded" at the end of -fuzztime with no failing input (golang/go#75804); replaying the corpus\n' "$name"
		rc=0
		"$GO" test -count=1 -run "^${name}\$" "$pkg" >"$log" 2>&1 || rc=$?
		races+=("$name")
	fi
	if [ "$rc" -ne 0 ]; then
		cat "$log"
		printf '<== %s: FAILED after %ds (exit %d)\n' "$name" $((SECONDS - t0)) "$rc"
		# A new crash: "Failing input written to testdata/fuzz/NAME/HASH".
		# A committed input that fails again: "failure while testing seed
		# corpus entry: NAME/HASH".
		input=$(sed -n 's/.*Failing input written to \(testdata\/fuzz\/[^ ]*\).*/\1/p' "$log" | head -n 1)
		if [ -z "$input" ]; then
			seed=$(sed -n 's/.*failure while testing seed corpus entry: \([^ ]*\).*/\1/p' "$log" | head -n 1)
			if [ -n "$seed" ] && [ -f "$pkg/testdata/fuzz/$seed" ]; then input=testdata/fuzz/$seed; fi
		fi
		if [ -n "$input" ]; then
			printf 'failing input: %s/%s\n' "${pkg#./}" "$input"
			printf 'replay it:     %s test -run '\''^%s$/%s$'\'' %s\n' "$GO" "$name" "${input##*/}" "$pkg"
		fi
		printf '==> fuzz total: %dm%02ds\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60))
		exit 1
	fi
	execs=$(grep -o 'execs: [0-9]*' "$log" | tail -n 1 || true)
	printf '<== %s: %ds%s\n' "$name" $((SECONDS - t0)) "${execs:+, $execs}"
done
printf '==> fuzz total: %dm%02ds, %d targets passed' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) ${#targets[@]}
if [ ${#races[@]} -gt 0 ]; then
	printf '; %d ended by golang/go#75804 and replayed clean: %s' ${#races[@]} "${races[*]}"
fi
printf '\n'

