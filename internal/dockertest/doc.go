// Package dockertest gives sigscope's tests a real Docker Engine: it finds a
// daemon answering on /var/run/docker.sock, or installs Debian's docker.io
// and starts dockerd without a bridge or iptables rules; and it builds small
// images FROM scratch around Debian's busybox-static, because no registry is
// reachable from the machines the tests run on. Containers must therefore run
// with --network none.
//
// Tests only. It follows the project's privileged-test rule
// (internal/testutil.RequirePrivileged): it skips when not root and fails
// when SIGSCOPE_REQUIRE_PRIVILEGED=1. The daemon it starts is left running on
// purpose, so that the next test binary reuses it instead of paying for the
// start again.
package dockertest
