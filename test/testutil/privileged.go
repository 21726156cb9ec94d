package testutil

import (
	"os"
	"testing"
)

// RequirePrivileged skips t when it cannot load BPF programs (not root, or
// SIGSCOPE_SKIP_PRIVILEGED=1 for a quick root-free run). When
// SIGSCOPE_REQUIRE_PRIVILEGED=1 it fails instead of skipping, so that CI can
// never pass by silently skipping the tests that matter.
func RequirePrivileged(t testing.TB) {
	t.Helper()
	reason := ""
	switch {
	case os.Geteuid() != 0:
		reason = "needs root (CAP_BPF and CAP_PERFMON) to load eBPF programs"
	case os.Getenv("SIGSCOPE_SKIP_PRIVILEGED") == "1":
		reason = "SIGSCOPE_SKIP_PRIVILEGED=1"
	default:
		return
	}
	if os.Getenv("SIGSCOPE_REQUIRE_PRIVILEGED") == "1" {
		t.Fatalf("privileged test cannot run (%s) but SIGSCOPE_REQUIRE_PRIVILEGED=1", reason)
	}
	t.Skipf("skipping privileged test: %s; run as root, set SIGSCOPE_REQUIRE_PRIVILEGED=1 to make this a failure", reason)
}
