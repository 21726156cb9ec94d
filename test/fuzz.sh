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
# `go test ./PKG` replays it as a regular test from then on. The inputs found
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
start=$SECONDS
printf '%d fuzz targets, %s each\n' ${#targets[@]} "$fuzztime"
for t in "${targets[@]}"; do
	pkg=${t% *}
	name=${t#* }
	printf '==> %s (%s)\n' "$name" "$pkg"
	t0=$SECONDS
	rc=0
	"$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1 || rc=$?
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
printf '==> fuzz total: %dm%02ds, %d targets passed\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) ${#targets[@]}
