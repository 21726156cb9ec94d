// Package critest runs the CRI runtimes sigscope's tests need, and plays
// kubelet on them.
//
// containerd's CRI: EnsureCRI starts a private containerd (docker.io's
// binary, its own root, state and socket, apart from dockerd's) with the
// CRI plugin on and a pause image imported from Docker.
//
// CRI-O: EnsureCRIO does the same with a private CRI-O (built by
// test/crio/build.sh from the Go module proxy; Debian's conmon and runc;
// images copied from Docker with skopeo); test/crio/down.sh stops it.
//
// Both are a [CRI], so that a test runs against either: RunPod and
// StartPod play kubelet (a pod sandbox on the host network and one
// container with the kubelet's labels, annotations and cgroupfs layout),
// ImportImage gives the runtime an image built by Docker.
//
// Tests only, privileged: it skips when not root and fails when
// SIGSCOPE_REQUIRE_PRIVILEGED=1 (test/testutil.RequirePrivileged). The
// images come from test/dockertest's Docker daemon, whose lock also
// serialises starting these runtimes across test binaries; the runtimes
// are left running for the next test binary.
package critest
