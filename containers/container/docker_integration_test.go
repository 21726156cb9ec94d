package container

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/test/dockertest"
	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/procsig"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// processOf builds what a tracer event carries for a live host pid: its pid
// namespace inode and the ids (inodes) of its cgroup v2 and v1 memory
// directories, read independently of the resolver.
func processOf(t *testing.T, pid int) *sigvocab.Process {
	t.Helper()
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]"), 10, 32)
	if err != nil {
		t.Fatalf("ns link %q: %v", link, err)
	}
	p := &sigvocab.Process{PID: uint32(pid), TID: uint32(pid), PidNS: uint32(ns)}
	inode := func(dir string) uint64 {
		var st syscall.Stat_t
		if dir == "" || syscall.Stat(dir, &st) != nil {
			return 0
		}
		return st.Ino
	}
	v2, v1 := cgroupDirs(t, pid)
	p.CgroupID, p.CgroupV1ID = inode(v2), inode(v1)
	if p.CgroupID <= 1 && p.CgroupV1ID == 0 {
		t.Fatalf("pid %d has no cgroup id (v2 %q, v1 memory %q)", pid, v2, v1)
	}
	return p
}

// cgroupDirs returns pid's cgroup v2 and v1 memory directories from
// /proc/PID/cgroup, "" for a hierarchy the host does not have or where pid
// is at the root (which identifies nothing).
func cgroupDirs(t *testing.T, pid int) (v2, v1 string) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[2] == "/" {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			root := "/sys/fs/cgroup"
			if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.controllers"); err == nil {
				root = "/sys/fs/cgroup/unified"
			}
			v2 = filepath.Join(root, parts[2])
		case hasController(parts[1], "memory"):
			v1 = filepath.Join("/sys/fs/cgroup/memory", parts[2])
		}
	}
	return v2, v1
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) uint32 {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return uint32(cmd.Process.Pid)
}

// On each daemon (forDaemon): on the cgroup2-only one, a container is
// known by its v2 cgroup id alone.
func TestRealDockerLookup(t *testing.T) {
	forDaemon(t, func(t *testing.T, d testDaemon) {
		img := d.image(t)
		name := fmt.Sprintf("sigscope-lookup-%d", os.Getpid())
		id := d.RunContainer(t, "--name", name,
			"--label", "io.kubernetes.pod.name=web-0",
			"--label", "io.kubernetes.pod.namespace=shop",
			"--label", "io.kubernetes.pod.terminationGracePeriod=42",
			"--label", "note=raw \x1b[31m value",
			"--stop-signal", "SIGTERM", "--stop-timeout", "7",
			img, "sh", "-c", "sleep 1000")
		pid := d.PID(t, id)
		p := processOf(t, pid)
		t.Logf("container %s pid %d: pidns %d, cgroup v2 id %d, v1 memory id %d", id[:12], pid, p.PidNS, p.CgroupID, p.CgroupV1ID)

		r := NewResolver(Options{DockerSocket: d.Socket})
		defer r.Close()
		info := r.Lookup(p)
		if info == nil {
			t.Fatal("Lookup = nil")
		}
		check := func(what string, got, want any) {
			t.Helper()
			if got != want {
				t.Errorf("%s = %q, want %q", what, got, want)
			}
		}
		check("ID", info.ID, id)
		check("Runtime", info.Runtime, RuntimeDocker)
		check("Name", info.Name, name)
		check("Image", info.Image, img)
		check("StopSignal", info.StopSignal, sigvocab.SIGTERM)
		check("MainPID", info.MainPID, pid)
		check("Sandbox", info.Sandbox, false)
		check("StopTimeout", info.StopTimeout, 7)
		check("Pod", info.Pod, "web-0")
		check("Namespace", info.Namespace, "shop")
		check("GracePeriod", info.GracePeriod, 42)
		// The first answer may be the files' (read before the API is
		// asked), which keep only the kubelet's labels; the API's replaces
		// it, raw labels and all.
		testutil.WaitFor(t, "the Docker API's answer", func() bool { return !r.Lookup(p).FromFiles })
		check("raw label", r.Lookup(p).Labels["note"], "raw \x1b[31m value")
		// Docker's only: with the local cluster of `make cluster` up, its
		// pods' cgroups (kubepods) are seen too, and asked of CRI sockets that
		// this resolver was not given.
		if n := r.Errors()[SourceDocker]; n != 0 {
			t.Errorf("errors %v", r.Errors())
		}

		// A process of the container that is already gone resolves through its
		// cgroup id alone, in either hierarchy, on a resolver that never saw it.
		for _, q := range []*sigvocab.Process{
			{PID: deadPID(t), PidNS: p.PidNS, CgroupID: p.CgroupID},
			{PID: deadPID(t), PidNS: p.PidNS, CgroupV1ID: p.CgroupV1ID},
		} {
			if q.CgroupID <= 1 && q.CgroupV1ID == 0 || d.v2Only && q.CgroupV1ID != 0 {
				continue // no such hierarchy, or its cgroup is the daemon's, not the container's
			}
			fresh := NewResolver(Options{DockerSocket: d.Socket})
			if got := fresh.Lookup(q); got == nil || got.ID != id || got.Name != name {
				t.Errorf("gone process with cgroup ids v2=%d v1=%d: %+v", q.CgroupID, q.CgroupV1ID, got)
			}
			fresh.Close()
		}

		// The Docker API out of reach: the name comes from Docker's files,
		// and the API's failure is counted (asked in the background).
		down := NewResolver(Options{DockerSocket: filepath.Join(t.TempDir(), "docker.sock")})
		got := down.Lookup(p)
		if got == nil || got.ID != id || got.Runtime != RuntimeDocker || got.Name != name || !got.FromFiles || got.MainPID != pid {
			t.Errorf("without the API: %+v, want the files' identity", got)
		}
		testutil.WaitFor(t, "the Docker API's failure counted", func() bool { return down.Errors()[SourceDocker] > 0 })
		down.Close()
		// Neither its API nor its files: ID and runtime come from the
		// cgroup path.
		bare := NewResolver(Options{DockerSocket: filepath.Join(t.TempDir(), "docker.sock"), NoRuntimeFiles: true})
		got = bare.Lookup(p)
		if got == nil || got.ID != id || got.Runtime != RuntimeDocker || got.Name != "" {
			t.Errorf("without the API nor the files: %+v, want ID and runtime only", got)
		}
		if n := bare.Errors()[SourceDocker]; n == 0 {
			t.Errorf("Errors() = %v, want docker > 0", bare.Errors())
		}
		bare.Close()

		// The container is removed: the cached key still resolves, with its
		// metadata, for late events; a resolver that never saw it cannot.
		d.Docker(t, "rm", "-f", id)
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Fatalf("pid %d still exists after docker rm -f", pid)
		}
		if got := r.Lookup(p); got == nil || got.ID != id || got.Name != name || got.GracePeriod != 42 {
			t.Errorf("after removal, cached: %+v", got)
		}
		fresh := NewResolver(Options{DockerSocket: d.Socket})
		defer fresh.Close()
		if got := fresh.Lookup(p); got != nil {
			t.Errorf("after removal, fresh resolver: %+v, want nil", got)
		}
	})
}

// The race CI lost: docker rm -f ends a container and removes its cgroups
// within milliseconds, before a reader has looked up the kill. A resolver
// that was running when the container started saw its cgroups appear and
// asked Docker about it then, so the dead container still resolves, name
// and all, although neither its processes, its cgroups nor Docker's record
// of it exist any more.
func TestRealDockerRemovedBeforeLookup(t *testing.T) {
	forDaemon(t, func(t *testing.T, d testDaemon) {
		img := d.image(t)
		r := NewResolver(Options{DockerSocket: d.Socket})
		defer r.Close()

		name := fmt.Sprintf("sigscope-removed-%d", os.Getpid())
		id := d.RunContainer(t, "--name", name, img, "sh", "-c", "sleep 1000")
		pid := d.PID(t, id)
		p := processOf(t, pid)
		v2, v1 := cgroupDirs(t, pid)
		// Wait for the background enrichment the watch started, main pid
		// included (the cgroup may appear before Docker has a pid to give).
		waitMeta(t, r, id, func(info *identity.Info) bool { return info.Name == name && info.MainPID == pid })

		d.Docker(t, "rm", "-f", id)
		if d.v2Only {
			v1 = "" // the daemon's, which stays
		}
		for _, dir := range []string{v2, v1} {
			if _, err := os.Stat(dir); dir != "" && err == nil {
				t.Fatalf("%s still exists after docker rm -f", dir)
			}
		}
		for _, q := range []*sigvocab.Process{
			{PID: uint32(pid), PidNS: p.PidNS, CgroupID: p.CgroupID},
			{PID: uint32(pid), PidNS: p.PidNS, CgroupV1ID: p.CgroupV1ID},
		} {
			if q.CgroupID <= 1 && q.CgroupV1ID == 0 || d.v2Only && q.CgroupV1ID != 0 {
				continue // no such hierarchy, or its cgroup is the daemon's, not the container's
			}
			if got := r.Lookup(q); got == nil || got.ID != id || got.Name != name || got.Image != img || got.MainPID != pid {
				t.Errorf("removed container, cgroup ids v2=%d v1=%d: %+v, want %s %s", q.CgroupID, q.CgroupV1ID, got, id[:12], name)
			}
		}
	})
}

func TestRealDockerListRunningAndPID1Signals(t *testing.T) {
	d := dockertest.EnsureDaemon(t)
	img := dockertest.BuildBusyboxImage(t, "sigscope-container-test:latest", "")
	trapName := fmt.Sprintf("sigscope-trap-%d", os.Getpid())
	plainName := fmt.Sprintf("sigscope-plain-%d", os.Getpid())
	// Ready once the trap is set: the shell writes a file after `trap`.
	trapID := d.RunContainer(t, "--name", trapName, "--stop-signal", "SIGTERM", img,
		"sh", "-c", "trap 'exit 0' TERM; touch /tmp/ready; sleep 1000 & wait")
	plainID := d.RunContainer(t, "--name", plainName, "--stop-timeout", "3", img, "sh", "-c", "sleep 1000")
	waitReady(t, d, trapID)

	r := NewResolver(Options{DockerSocket: d.Socket})
	defer r.Close()
	runs, err := r.ListRunning(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byID := make(map[string]identity.Running)
	for _, run := range runs {
		byID[run.Info.ID] = run
	}
	for _, c := range []struct {
		id, name    string
		stopTimeout int
		caught      bool
		argv0       string
	}{
		{trapID, trapName, dockerDefaultStopTimeout, true, "sh"},
		// busybox sh execs a lone command: PID 1 is sleep itself.
		{plainID, plainName, 3, false, "sleep"},
	} {
		run, ok := byID[c.id]
		if !ok {
			t.Fatalf("ListRunning has no %s (%d containers)", c.name, len(runs))
		}
		if want := d.PID(t, c.id); run.PID != want {
			t.Errorf("%s: PID %d, docker says %d", c.name, run.PID, want)
		}
		if run.Info.Name != c.name || run.Info.Runtime != RuntimeDocker || run.Info.StopTimeout != c.stopTimeout {
			t.Errorf("%s: Info %+v", c.name, run.Info)
		}
		caught, ignored, blocked, cmdline, err := procsig.PID1Signals("", run.PID)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: PID 1 %v caught=%s ignored=%s blocked=%s", c.name, cmdline, caught, ignored, blocked)
		if caught.Has(sigvocab.SIGTERM) != c.caught {
			t.Errorf("%s: SIGTERM caught = %v, want %v (SigCgt %s)", c.name, caught.Has(sigvocab.SIGTERM), c.caught, caught)
		}
		if ignored.Has(sigvocab.SIGTERM) {
			t.Errorf("%s: SIGTERM ignored", c.name)
		}
		if len(cmdline) == 0 || filepath.Base(cmdline[0]) != c.argv0 {
			t.Errorf("%s: cmdline %q, want argv[0] %q", c.name, cmdline, c.argv0)
		}
	}
}

// waitReady waits for the container to create /tmp/ready.
func waitReady(t *testing.T, d *dockertest.Daemon, id string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		if _, err := d.DockerErr("exec", id, "test", "-e", "/tmp/ready"); err == nil {
			return
		}
		exec.Command("sleep", "0.05").Run()
	}
	t.Fatalf("container %s never became ready", id[:12])
}

// testDaemon is a Docker daemon the integration tests run on.
type testDaemon struct {
	*dockertest.Daemon
	// v2Only: its containers' cgroups are in the unified hierarchy only;
	// their v1 cgroups are the daemon's.
	v2Only bool
}

// image is the tests' busybox image, in d.
func (d testDaemon) image(t *testing.T) string {
	t.Helper()
	img := dockertest.BuildBusyboxImage(t, "sigscope-container-test:latest", "")
	if d.v2Only {
		d.CopyImage(t, dockertest.EnsureDaemon(t), img)
	}
	return img
}

// forDaemon runs f on the host's Docker ("host": runc 1.1 on the v1/v2
// hybrid) and on the cgroup2-only one ("cgroup2": runc 1.2+, see
// dockertest.EnsureCgroup2Daemon), the resolver on the host's view; as
// SIGSCOPE_ENGINES chooses (dockertest.EngineWanted). A test that calls it
// belongs in the Makefile's CGROUP2_TESTS.
func forDaemon(t *testing.T, f func(t *testing.T, d testDaemon)) {
	if dockertest.EngineWanted("host") {
		t.Run("host", func(t *testing.T) { f(t, testDaemon{Daemon: dockertest.EnsureDaemon(t)}) })
	}
	if dockertest.EngineWanted("cgroup2") {
		t.Run("cgroup2", func(t *testing.T) { f(t, testDaemon{Daemon: dockertest.EnsureCgroup2Daemon(t), v2Only: true}) })
	}
}
