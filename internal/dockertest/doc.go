// Package dockertest gives sigscope's tests real container engines.
//
// Docker: EnsureDaemon finds a daemon answering on /var/run/docker.sock, or
// installs Debian's docker.io and starts dockerd without a bridge or
// iptables rules. BuildBusyboxImage builds small images FROM scratch around
// Debian's busybox-static, because no registry is reachable from the
// machines the tests run on; containers must therefore run with
// --network none.
//
// Language runtimes: HostRuntime names one installed from Debian's packages
// (NodeJS, Python3, Java17); EnsureHostRuntimes installs the missing ones,
// HostRuntimeArgs binds the host's /usr (and /usr/lib as /lib, /usr/lib64 as
// /lib64, and what a runtime reads under /etc) read-only into a container
// FROM scratch, and BuildAppImage puts the programs they run in /app.
//
// CRI: EnsureCRI starts a private containerd (docker.io's binary, its own
// root, state and socket, apart from dockerd's) with the CRI plugin on and a
// pause image imported from Docker; RunPod then plays kubelet: a pod
// sandbox on the host network and one container with the kubelet's labels,
// annotations and cgroupfs layout. EnsureCRIO does the same with a private
// CRI-O (built by test/crio/build.sh from the Go module proxy; Debian's
// conmon and runc; images copied from Docker with skopeo), behind the same
// helpers, so that a CRI test runs against either runtime.
//
// StartPrivateDaemon starts a second Docker daemon of the test's own (its
// own data and exec roots, socket, pid file and containerd) with extra
// flags such as --cgroup-parent, and stops it at cleanup; CopyImage gives
// it an image of the shared daemon's.
//
// EnsureCgroup2Daemon starts (once, and leaves running) a Docker daemon on
// a cgroup2-only view of this hybrid machine: in a mount namespace of its
// own whose /sys/fs/cgroup is the unified hierarchy, with the runc of
// `make cluster` (1.2 or later, built by test/cluster/build.sh when
// missing) as its default runtime. EngineWanted says which engines
// (SIGSCOPE_ENGINES) the tests parameterised over them run.
//
// Restart stops dockerd (with a service manager's SIGTERM, or a crash's
// SIGKILL) and starts it again, for the fault tests.
//
// Tests only. It follows the project's privileged-test rule
// (internal/testutil.RequirePrivileged): it skips when not root and fails
// when SIGSCOPE_REQUIRE_PRIVILEGED=1. The daemons it starts are left running
// on purpose, so that the next test binary reuses them instead of paying
// for the start again; a lock file serialises starting them across test
// binaries that `go test ./...` runs in parallel.
package dockertest
