package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/test/critest"
	"github.com/sigscope/sigscope/test/testutil"
	"github.com/sigscope/sigscope/tracer/procsig"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// criRuntime is a CRI runtime the tests play kubelet against: the name
// sigscope gives it (Info.Runtime), the harness that starts it, and the
// prefix of its pod uids (so that two runtimes' pods never share a pod
// cgroup).
type criRuntime struct {
	name   string
	ensure func(testing.TB) *critest.CRI
	uid    string
}

// criRuntimes: containerd (docker.io's, CRI plugin on) and CRI-O (built
// from the module proxy, Debian's conmon and runc), both cgroupfs.
var criRuntimes = []criRuntime{
	{RuntimeContainerd, critest.EnsureCRI, "5e1c0a2b"},
	{RuntimeCRIO, critest.EnsureCRIO, "5e1c0c10"},
}

// forEachCRI runs test once per CRI runtime, as a subtest named after it.
func forEachCRI(t *testing.T, test func(t *testing.T, rt criRuntime, c *critest.CRI)) {
	for _, rt := range criRuntimes {
		t.Run(rt.name, func(t *testing.T) { test(t, rt, rt.ensure(t)) })
	}
}

// cgroupOf checks that pid's cgroup names the container as runtime rt
// names its cgroups (cgroupfs: containerd a bare id under the pod's,
// CRI-O crio-<id>) and that ParseCgroupPath reads it so.
func cgroupOf(t *testing.T, rt criRuntime, pid int, id string) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pid %d cgroup:\n%s", pid, data)
	want := "/" + id
	if rt.name == RuntimeCRIO {
		want = "/crio-" + id
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		_, path, _ := strings.Cut(line, ":")
		_, path, _ = strings.Cut(path, ":")
		if !strings.HasSuffix(path, want) {
			continue
		}
		if got, runtime, ok := ParseCgroupPath(path); !ok || got != id || runtime != rt.name {
			t.Errorf("ParseCgroupPath(%q) = %q, %q, %v", path, got, runtime, ok)
		}
		return
	}
	t.Errorf("no cgroup of pid %d ends in %s", pid, want)
}

// waitLearnt waits until the watching resolver r has learnt id (from its
// cgroup, and the runtime's answer) as a sandbox or not, of runtime, with
// main pid pid.
func waitLearnt(t *testing.T, r *Resolver, id, runtime string, sandbox bool, pid int) {
	t.Helper()
	waitMeta(t, r, id, func(info *identity.Info) bool {
		return info.Sandbox == sandbox && info.MainPID == pid && info.Runtime == runtime
	})
}

// listedContainer returns what r's ListRunning says of the pod's
// container; the pod's sandbox must not be listed.
func listedContainer(t *testing.T, r *Resolver, ids critest.PodIDs) identity.Running {
	t.Helper()
	runs, err := r.ListRunning(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var found *identity.Running
	for i, run := range runs {
		if run.Info.ID == ids.Sandbox || run.Info.Sandbox {
			t.Errorf("ListRunning lists a sandbox: %+v", run.Info)
		}
		if run.Info.ID == ids.Container {
			found = &runs[i]
		}
	}
	if found == nil {
		t.Fatalf("ListRunning has no %s", ids.Container[:12])
	}
	return *found
}

// TestRealCRI plays kubelet against each real CRI runtime: a pod with the
// kubelet's labels and grace-period annotation, in the kubelet's cgroupfs
// layout, looked up from its PID 1 and listed through the CRI API.
func TestRealCRI(t *testing.T) { forEachCRI(t, testRealCRI) }

func testRealCRI(t *testing.T, rt criRuntime, c *critest.CRI) {
	img := c.ImportImage(t, "sigscope-cri-app:latest", "")
	uid := fmt.Sprintf("%s-0000-4000-8000-%012d", rt.uid, os.Getpid())
	id := c.RunPod(t, critest.Pod{
		Name: "app-0", Namespace: "prod", UID: uid, Container: "app",
		Image: img, Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"},
		GracePeriod: 45,
	})

	r := NewResolver(Options{DockerSocket: filepath.Join(t.TempDir(), "no-docker.sock"), CRISockets: []string{c.Socket}})
	defer r.Close()
	runs, err := r.ListRunning(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var run *identity.Running
	for i := range runs {
		if runs[i].Info.ID == id {
			run = &runs[i]
		}
	}
	if run == nil || run.PID <= 0 {
		t.Fatalf("ListRunning has no %s with a pid: %+v", id, runs)
	}
	cgroupOf(t, rt, run.PID, id)
	if run.Info.Runtime != rt.name || run.Info.Pod != "app-0" || run.Info.Namespace != "prod" ||
		run.Info.PodUID != uid || run.Info.Name != "app" || run.Info.GracePeriod != 45 || run.Info.Image != img {
		t.Errorf("ListRunning Info %+v", run.Info)
	}
	// The script traps TERM before it starts its background sleep: once
	// the child exists, the trap is in place (the pod runs as soon as its
	// shell does).
	testutil.WaitChildren(t, run.PID, 1)
	caught, _, _, _, err := procsig.PID1Signals("", run.PID)
	if err != nil || !caught.Has(sigvocab.SIGTERM) {
		t.Errorf("PID1Signals: caught %s, err %v; want SIGTERM caught", caught, err)
	}

	// Lookup from the process, on a resolver that has not listed anything.
	fresh := NewResolver(Options{DockerSocket: filepath.Join(t.TempDir(), "no-docker.sock"), CRISockets: []string{c.Socket}})
	defer fresh.Close()
	proc := processOf(t, run.PID)
	info := fresh.Lookup(proc)
	if info == nil || info.ID != id || info.Runtime != rt.name || info.Pod != "app-0" ||
		info.Namespace != "prod" || info.Name != "app" {
		t.Errorf("Lookup = %+v", info)
	}
	// The first answer may be the runtime's files' (containerd's carry no
	// grace period); the API's replaces it.
	testutil.WaitFor(t, "the CRI API's answer", func() bool { return !fresh.Lookup(proc).FromFiles })
	if info := fresh.Lookup(proc); info.GracePeriod != 45 || info.Name != "app" || info.Pod != "app-0" {
		t.Errorf("Lookup after the API answered = %+v", info)
	}
	// Only CRI counts: the watch also sees the Docker containers other
	// tests run on this host, and this resolver has no Docker socket.
	if n := fresh.Errors(); n[SourceCRI] != 0 {
		t.Errorf("errors %v", n)
	}
}

// TestRealCRISandbox plays kubelet against each real CRI runtime with a
// resolver already watching, as the agent would be: the pod's sandbox
// (pause process) resolves as a sandbox of the pod, and the containers'
// main pids are known without any lookup, although both cgroups appeared
// before the runtime could say anything about them (a sandbox is
// registered once it runs, a container has no pid until it starts). The
// pod shares its pid namespace (CRI's default), so CRI-O runs a pause
// process too.
func TestRealCRISandbox(t *testing.T) { forEachCRI(t, testRealCRISandbox) }

func testRealCRISandbox(t *testing.T, rt criRuntime, c *critest.CRI) {
	img := c.ImportImage(t, "sigscope-cri-app:latest", "")
	noDocker := filepath.Join(t.TempDir(), "no-docker.sock")
	watching := NewResolver(Options{DockerSocket: noDocker, CRISockets: []string{c.Socket}})
	defer watching.Close()

	uid := fmt.Sprintf("%s-0000-4000-8001-%012d", rt.uid, os.Getpid())
	ids := c.StartPod(t, critest.Pod{
		Name: "sb-0", Namespace: "stage", UID: uid, Container: "app",
		Image: img, Command: []string{"sh", "-c", "sleep 1000"},
	})
	pausePID, appPID := c.SandboxPID(t, ids.Sandbox), c.ContainerPID(t, ids.Container)
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pausePID))
	t.Logf("sandbox %s pause pid %d (%q); container %s pid %d", ids.Sandbox[:12], pausePID, cmdline, ids.Container[:12], appPID)
	cgroupOf(t, rt, pausePID, ids.Sandbox)
	cgroupOf(t, rt, appPID, ids.Container)

	// Before any lookup: what the watch's enrichment and its rechecks
	// learnt.
	for _, w := range []struct {
		id      string
		sandbox bool
		pid     int
	}{{ids.Sandbox, true, pausePID}, {ids.Container, false, appPID}} {
		waitLearnt(t, watching, w.id, rt.name, w.sandbox, w.pid)
	}

	fresh := NewResolver(Options{DockerSocket: noDocker, CRISockets: []string{c.Socket}})
	defer fresh.Close()
	for _, r := range []*Resolver{watching, fresh} {
		sb := r.Lookup(processOf(t, pausePID))
		if sb == nil || !sb.Sandbox || sb.ID != ids.Sandbox || sb.Runtime != rt.name || sb.Pod != "sb-0" ||
			sb.Namespace != "stage" || sb.PodUID != uid || sb.MainPID != pausePID {
			t.Errorf("pause process: Lookup = %+v", sb)
		}
		app := r.Lookup(processOf(t, appPID))
		if app == nil || app.Sandbox || app.ID != ids.Container || app.Runtime != rt.name || app.Name != "app" ||
			app.Pod != "sb-0" || app.MainPID != appPID {
			t.Errorf("app process: Lookup = %+v", app)
		}
		if n := r.Errors(); n[SourceCRI] != 0 {
			t.Errorf("errors %v", n)
		}
	}

	if run := listedContainer(t, fresh, ids); run.PID != appPID || run.Info.MainPID != appPID {
		t.Errorf("ListRunning: %+v pid %d, want %d", run.Info, run.PID, appPID)
	}
}

// TestRealCRIOwnPIDNamespace plays kubelet for a pod without
// shareProcessNamespace, the kubelet's default: the container's main
// process is the init of a pid namespace of its own. CRI-O then runs no
// pause process at all (drop_infra_ctr, its default): the sandbox is only
// namespaces, its status has no pid and it has no cgroup. The container
// must resolve all the same, the sandbox must never be listed as a
// container, and asking about it must cost no error.
func TestRealCRIOwnPIDNamespace(t *testing.T) { forEachCRI(t, testRealCRIOwnPIDNamespace) }

func testRealCRIOwnPIDNamespace(t *testing.T, rt criRuntime, c *critest.CRI) {
	img := c.ImportImage(t, "sigscope-cri-app:latest", "")
	noDocker := filepath.Join(t.TempDir(), "no-docker.sock")
	watching := NewResolver(Options{DockerSocket: noDocker, CRISockets: []string{c.Socket}})
	defer watching.Close()

	uid := fmt.Sprintf("%s-0000-4000-8002-%012d", rt.uid, os.Getpid())
	ids := c.StartPod(t, critest.Pod{
		Name: "own-0", Namespace: "batch", UID: uid, Container: "job", OwnPIDNamespace: true,
		Image: img, Command: []string{"sh", "-c", "sleep 1000"}, GracePeriod: 20,
	})
	pausePID, appPID := c.SandboxPIDIfAny(t, ids.Sandbox), c.ContainerPID(t, ids.Container)
	t.Logf("sandbox %s pid %d; container %s pid %d", ids.Sandbox[:12], pausePID, ids.Container[:12], appPID)
	if rt.name == RuntimeCRIO && pausePID != 0 {
		t.Fatalf("CRI-O ran a pause process (%d) for a pod that shares no pid namespace: this test is about a sandbox without one", pausePID)
	}
	cgroupOf(t, rt, appPID, ids.Container)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", appPID))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(status), "\nNSpid:\t"+fmt.Sprint(appPID)+"\t1\n") {
		t.Fatalf("the container's main process is not its namespace's init:\n%s", status)
	}

	// The watch learns the container from its cgroup.
	waitLearnt(t, watching, ids.Container, rt.name, false, appPID)

	fresh := NewResolver(Options{DockerSocket: noDocker, CRISockets: []string{c.Socket}})
	defer fresh.Close()
	if run := listedContainer(t, fresh, ids); run.PID != appPID || run.Info.Pod != "own-0" || run.Info.Namespace != "batch" ||
		run.Info.Name != "job" || run.Info.GracePeriod != 20 || run.Info.Runtime != rt.name {
		t.Errorf("ListRunning: %+v pid %d, want pid %d", run.Info, run.PID, appPID)
	}
	for _, r := range []*Resolver{watching, fresh} {
		app := r.Lookup(processOf(t, appPID))
		if app == nil || app.Sandbox || app.ID != ids.Container || app.Runtime != rt.name || app.Pod != "own-0" ||
			app.Namespace != "batch" || app.PodUID != uid || app.Name != "job" || app.MainPID != appPID {
			t.Errorf("app process: Lookup = %+v", app)
		}
		if pausePID > 0 {
			sb := r.Lookup(processOf(t, pausePID))
			if sb == nil || !sb.Sandbox || sb.ID != ids.Sandbox || sb.Pod != "own-0" || sb.MainPID != pausePID {
				t.Errorf("pause process: Lookup = %+v", sb)
			}
		}
		if n := r.Errors(); n[SourceCRI] != 0 {
			t.Errorf("errors %v", n)
		}
	}
}

// TestRealCRIImageStopSignal runs an image whose STOPSIGNAL is SIGINT: the
// runtime stops the container with SIGINT, and the Info says so (the
// audit's prediction and the timeline's stop signal read it). CRI-O 1.34
// leaves ContainerStatus.stop_signal unset and keeps the signal in the
// OCI spec's org.opencontainers.image.stopSignal annotation, which its
// verbose status carries. containerd 1.6 reports it in neither (checked by
// running this against it), so only CRI-O runs this.
func TestRealCRIImageStopSignal(t *testing.T) {
	forEachCRI(t, func(t *testing.T, rt criRuntime, c *critest.CRI) {
		if rt.name != RuntimeCRIO {
			t.Skipf("%s 1.6 reports an image's stop signal neither as stop_signal nor in the spec's annotations", rt.name)
		}
		img := c.ImportImage(t, "sigscope-cri-stopsignal:latest", "STOPSIGNAL SIGINT")
		uid := fmt.Sprintf("%s-0000-4000-8003-%012d", rt.uid, os.Getpid())
		ids := c.StartPod(t, critest.Pod{Name: "int-0", Namespace: "prod", UID: uid, Container: "app",
			Image: img, Command: []string{"sh", "-c", "sleep 1000"}, OwnPIDNamespace: true})
		pid := c.ContainerPID(t, ids.Container)
		r := NewResolver(Options{DockerSocket: filepath.Join(t.TempDir(), "no-docker.sock"), CRISockets: []string{c.Socket}})
		defer r.Close()
		if run := listedContainer(t, r, ids); run.Info.StopSignal != sigvocab.SIGINT {
			t.Errorf("ListRunning: stop signal %v, want SIGINT", run.Info.StopSignal)
		}
		if info := r.Lookup(processOf(t, pid)); info == nil || info.StopSignal != sigvocab.SIGINT {
			t.Errorf("Lookup = %+v, want stop signal SIGINT", info)
		}
	})
}
