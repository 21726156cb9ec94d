#!/bin/sh
# Regenerates episodes/timeline/testdata/streams/*.jsonl: runs the stop scenarios
# that go through runStop (the inits of test/e2e/inits_test.go, the language
# runtimes of test/e2e/runtimes_test.go, the docker stop -t / StopTimeout stops
# of test/e2e/e2e_test.go) against the real kernel and Docker (root
# needed) and writes each stop's kernel stream, as `sigscope trace -o json
# --signals default` printed it, trimmed to the container's pid namespace
# and container ID. The tests' own verdicts do not stop the recording: a
# scenario the timeline engine still gets wrong is recorded all the same.
#
#   test/e2e/testdata/record.sh            # every scenario
#   test/e2e/testdata/record.sh Catatonit  # those whose test name matches
#   test/e2e/testdata/record.sh NodeJS     # the name follows TestInit, TestRuntime, ...
set -eu
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
SIGSCOPE_RECORD_STREAMS="$root/episodes/timeline/testdata/streams" \
	go test -p 1 -count=1 -v -run "^(TestInit|TestRuntime|TestDockerStop(ShorterThan|At)StopTimeout)${1:-}" ./test/e2e || true
ls -l "$root/episodes/timeline/testdata/streams"
