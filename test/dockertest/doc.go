// Package dockertest runs the Docker engines sigscope's tests need, and
// the images those run. Its sibling test/critest runs the CRI runtimes
// (containerd's CRI, CRI-O) and plays kubelet on them.
//
// The shared engine: EnsureDaemon finds a daemon answering on
// /var/run/docker.sock, or installs Debian's docker.io and starts dockerd
// without a bridge or iptables rules. Restart stops it (with a service
// manager's SIGTERM, or a crash's SIGKILL) and starts it again, for the
// fault tests.
//
// Engines of a test's own: StartPrivateDaemon starts a second dockerd (its
// own data and exec roots, socket, pid file and containerd) with extra
// flags such as --cgroup-parent, and stops it at cleanup; CopyImage gives it
// an image of the shared daemon's.
//
// A cgroup2-only engine: EnsureCgroup2Daemon starts (once, and leaves
// running) a dockerd on a cgroup2-only view of this hybrid machine: in a
// mount namespace of its own whose /sys/fs/cgroup is the unified
// hierarchy, with the runc of `make cluster` (1.2 or later, built by
// test/cluster/build.sh when missing) as its default runtime;
// StartPrivateCgroup2Daemon starts a private one. EngineWanted says which
// engines (SIGSCOPE_ENGINES) the tests parameterised over them run.
//
// Images: BuildBusyboxImage builds small images FROM scratch around
// Debian's busybox-static, because no registry is reachable from the
// machines the tests run on; containers must therefore run with
// --network none.
//
// Host language runtimes in images: HostRuntime names one installed from
// Debian's packages (NodeJS, Python3, Java17); EnsureHostRuntimes installs
// the missing ones, HostRuntimeArgs binds the host's /usr (and /usr/lib as
// /lib, /usr/lib64 as /lib64, and what a runtime reads under /etc)
// read-only into a container FROM scratch, and BuildAppImage puts the
// programs they run in /app.
//
// Tests only. It follows the project's privileged-test rule
// (test/testutil.RequirePrivileged): it skips when not root and fails
// when SIGSCOPE_REQUIRE_PRIVILEGED=1. The daemons it starts are left running
// on purpose, so that the next test binary reuses them instead of paying
// for the start again; Lock serialises starting them, and critest's, across
// test binaries that `go test ./...` runs in parallel. AptInstall and
// StartDaemonWait are the installing and starting critest shares.
package dockertest
