package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/test/dockertest"
	"github.com/sigscope/sigscope/test/testutil"
)

// Names on a node that has run for a while (issue 28): a runtime API that
// is slow for a moment under load must not cost the names of the containers
// started during the next half minute, and a name that could not be learnt
// while the container ran is asked for again until it is.

// namedContainer is a container the test started, as Docker names it.
type namedContainer struct{ name, id string }

// startNamed starts a busybox container whose PID 1 exits on SIGTERM.
func startNamed(t *testing.T, d *dockertest.Daemon, img, name string) namedContainer {
	t.Helper()
	return startScript(t, d, img, name, "trap 'exit 3' TERM; sleep 1000 & wait")
}

// startScript starts a busybox container running sh -c script.
func startScript(t *testing.T, d *dockertest.Daemon, img, name, script string) namedContainer {
	t.Helper()
	_, _ = d.DockerErr("rm", "-f", name)
	out, err := d.DockerErr("run", "-d", "--network", "none", "--name", name, img, "sh", "-c", script)
	if err != nil {
		t.Fatalf("docker run %s: %v\n%s", name, err, out)
	}
	t.Cleanup(func() { _, _ = d.DockerErr("rm", "-f", name) })
	return namedContainer{name: name, id: strings.TrimSpace(out)}
}

// stallAgent is an agent whose Docker API goes through a stallProxy, and
// which names containers from the API only (--runtime-files=false): what
// it does when the runtime's files cannot be read. TestNamesWhileAPIsStall
// has the files.
type stallAgent struct {
	img      string
	d        *dockertest.Daemon
	proxy    *testutil.StallProxy
	base     string
	agentErr *bytes.Buffer
	tag      string // makes this run's container names unique
}

func startStallAgent(t *testing.T) stallAgent {
	t.Helper()
	testutil.RequirePrivileged(t)
	st := stallAgent{img: busyboxImage(t), d: dockertest.EnsureDaemon(t), tag: fmt.Sprint(time.Now().UnixNano() % 1e6)}
	st.proxy = testutil.NewStallProxy(t, st.d.Socket)
	port, agentErr := startServe(t, "--docker-socket", st.proxy.Path, "--runtime-files=false")
	st.base, st.agentErr = fmt.Sprintf("http://127.0.0.1:%d", port), agentErr
	waitHTTP(t, st.base+"/readyz")
	return st
}

// stopNamed stops the containers with one docker stop, 5 s of grace.
func stopNamed(t *testing.T, d *dockertest.Daemon, ctrs ...namedContainer) {
	t.Helper()
	args := []string{"stop", "-t", "5"}
	for _, c := range ctrs {
		args = append(args, c.name)
	}
	if out, err := d.DockerErr(args...); err != nil {
		t.Fatalf("docker stop: %v\n%s", err, out)
	}
}

// checkNamed waits for each container's episode and checks its identity:
// the container's name and image, as Docker gave them, and no note that the
// name is missing.
func checkNamed(t *testing.T, base, img string, ctrs []namedContainer) {
	t.Helper()
	for _, c := range ctrs {
		ep := faultWaitEpisode(t, base, c.id)
		if ep.Container.Name != c.name || ep.Container.Image != img || ep.Container.Runtime != "docker" || ep.Outcome != timeline.OutcomeGraceful {
			t.Errorf("container %s (%.12s): episode names %q, image %q, runtime %q, outcome %s (want %q, %q, docker, graceful); identity note %q",
				c.name, c.id, ep.Container.Name, ep.Container.Image, ep.Container.Runtime, ep.Outcome, c.name, img, ep.Container.NameUnknown)
		}
		if ep.Container.NameUnknown != "" {
			t.Errorf("container %s: named, yet the episode says %q", c.name, ep.Container.NameUnknown)
		}
	}
}

// The Docker API stalls for 3 s (longer than the agent's 2 s API timeout)
// while containers start, then answers again at once. The containers
// started during the stall, and those started in the 30 s after it, are
// named in their stop's episodes: the agent asks again once Docker
// answers, instead of holding the endpoint down for 30 s and keeping the
// bare identity it had.
func TestNamesThroughRuntimeStall(t *testing.T) {
	st := startStallAgent(t)
	img, d, proxy, base, agentErr, tag := st.img, st.d, st.proxy, st.base, st.agentErr, st.tag

	proxy.Stall(3 * time.Second)
	var ctrs []namedContainer
	for i := range 3 {
		ctrs = append(ctrs, startNamed(t, d, img, fmt.Sprintf("stall-%s-during-%d", tag, i)))
	}
	// Past the stall, well within the 30 s a failed endpoint used to be
	// left alone.
	for time.Now().Before(proxy.Until()) {
		time.Sleep(100 * time.Millisecond)
	}
	for i := range 3 {
		ctrs = append(ctrs, startNamed(t, d, img, fmt.Sprintf("stall-%s-after-%d", tag, i)))
	}
	held := proxy.HeldRequests()
	if held == 0 {
		t.Fatal("the stall held no request of the agent: the test did not test anything")
	}
	time.Sleep(3 * time.Second)
	stopNamed(t, d, ctrs...)
	checkNamed(t, base, img, ctrs)
	t.Logf("names: %d containers, %d agent requests held by the 3 s stall", len(ctrs), held)

	// A container started and stopped within one long stall cannot be
	// named: its episode says so, and why.
	proxy.Stall(15 * time.Second)
	c := startNamed(t, d, img, fmt.Sprintf("stall-%s-unnamed", tag))
	time.Sleep(time.Second)
	stopNamed(t, d, c)
	ep := faultWaitEpisode(t, base, c.id)
	if time.Now().After(proxy.Until()) {
		t.Fatal("the episode completed after the stall: the test did not test a name that could not be learnt")
	}
	var text strings.Builder
	if err := ep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if ep.Container.Name != "" || ep.Container.ID != c.id || !strings.Contains(ep.Container.NameUnknown, proxy.Path+" did not answer within 2s") ||
		!strings.Contains(text.String(), "(name unknown: ") {
		t.Errorf("a container stopped while Docker did not answer: name %q, id %.12s, name_unknown %q; want no name, its ID, and why; text:\n%s",
			ep.Container.Name, ep.Container.ID, ep.Container.NameUnknown, text.String())
	}
	t.Logf("names: the container stopped within the stall says: %s", ep.Container.NameUnknown)
	for time.Now().Before(proxy.Until()) {
		time.Sleep(100 * time.Millisecond)
	}

	// A one-second job run and ended within a 3 s stall (as TestManyContainers'
	// `sleep 1; exit N` containers are, on a loaded machine): its episode
	// completes before Docker answers, waits for the name, and has it.
	proxy.Stall(3 * time.Second)
	job := startScript(t, d, img, fmt.Sprintf("stall-%s-job", tag), "sleep 1; exit 4")
	ep = faultWaitEpisode(t, base, job.id)
	if ep.Container.Name != job.name || ep.Outcome != timeline.OutcomeExited || ep.Container.NameUnknown != "" {
		t.Errorf("a one-second job within a stall: name %q (name_unknown %q), outcome %s; want %q, exited",
			ep.Container.Name, ep.Container.NameUnknown, ep.Outcome, job.name)
	}
	if t.Failed() {
		t.Logf("agent:\n%s", tail(agentErr.String()))
	}
}

// reuseCgroup makes a cgroup named name in the v1 memory hierarchy and in
// cgroup2 (this host's hybrid layout: /sys/fs/cgroup/unified), moves pid
// into both, and returns a function that removes them once pid is gone.
func reuseCgroup(t *testing.T, name string, pid int) func() {
	t.Helper()
	var dirs []string
	for _, root := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
			continue
		}
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatalf("moving %d into %s: %v", pid, dir, err)
		}
	}
	if len(dirs) == 0 {
		t.Fatal("no v1 memory or cgroup2 hierarchy under /sys/fs/cgroup")
	}
	rm := func() {
		for _, dir := range dirs {
			var err error
			if !testutil.Poll(20*time.Millisecond, func() bool { err = os.Remove(dir); return err == nil || os.IsNotExist(err) }) {
				t.Errorf("removing %s: %v", dir, err)
			}
		}
	}
	t.Cleanup(rm)
	return rm
}

// Kernel ids reused on purpose (issue 28): each round, a pid namespace made
// by unshare in a cgroup of its own (with mount, UTS, IPC and network
// namespaces, as a container has) is stopped (its init drops the SIGTERM,
// then is SIGKILLed), its cgroup removed, and a Docker container started at
// once, which gets the freed pid namespace inode more often than not. The
// containers are stopped together once the rounds are over. For the rounds
// of a 3 s stretch in the middle the Docker API stalls past the agent's
// timeout, as a daemon under load does. Every
// namespace's episode names no container; every container's names the
// right one in full (ID, name, image, runtime, pid namespace) with its
// outcome. The test fails unless some inode was in fact reused.
func TestIdentityThroughReuse(t *testing.T) {
	st := startStallAgent(t)
	img, d, proxy, base, agentErr, tag := st.img, st.d, st.proxy, st.base, st.agentErr, st.tag

	type nsRecord struct {
		pid   int
		pidns uint32
	}
	var nss []nsRecord
	var ctrs []namedContainer
	ctrNS := map[string]uint32{}
	const rounds = 12
	for i := range rounds {
		if i == 4 {
			proxy.Stall(3 * time.Second)
		}
		ns := testutil.StartNSInitIn(t, []string{"-m", "-u", "-i", "-n"}, "echo ready; read x")
		rec := nsRecord{ns.PID, ns.PidNS(t)}
		rmCgroup := reuseCgroup(t, fmt.Sprintf("sigscope-reuse-%s-%d", tag, i), ns.PID)
		testutil.Run(t, "kill", "-TERM", strconv.Itoa(ns.PID))
		time.Sleep(50 * time.Millisecond)
		testutil.Run(t, "kill", "-KILL", strconv.Itoa(ns.PID))
		if !testutil.Poll(10*time.Millisecond, func() bool {
			_, err := os.Stat(fmt.Sprintf("/proc/%d", ns.PID))
			return os.IsNotExist(err)
		}) {
			t.Fatalf("namespace init %d still there %v after SIGKILL", ns.PID, testutil.Bound)
		}
		_ = ns.Cmd.Wait()
		rmCgroup()
		nss = append(nss, rec)

		c := startNamed(t, d, img, fmt.Sprintf("reuse-%s-%d", tag, i))
		pid, err := d.DockerErr("inspect", "-f", "{{.State.Pid}}", c.name)
		if err != nil {
			t.Fatalf("docker inspect: %v\n%s", err, pid)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(fmt.Sprintf("/proc/%s/ns/pid", strings.TrimSpace(pid)), &st); err != nil {
			t.Fatal(err)
		}
		ctrNS[c.id] = uint32(st.Ino)
		ctrs = append(ctrs, c)
	}
	held := proxy.HeldRequests()
	for time.Now().Before(proxy.Until()) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	stopNamed(t, d, ctrs...)

	seen := map[uint32]bool{}
	reused := 0
	for i, c := range ctrs {
		seen[nss[i].pidns] = true
		if seen[ctrNS[c.id]] {
			reused++
		}
	}
	if reused == 0 {
		t.Fatalf("no container got a pid namespace inode a namespace of the test had had: the test did not test reuse")
	}

	checkNamed(t, base, img, ctrs)
	for _, c := range ctrs {
		if ep := faultWaitEpisode(t, base, c.id); ep.Container.PidNS != ctrNS[c.id] {
			t.Errorf("container %s: episode's pid namespace %d, want %d", c.name, ep.Container.PidNS, ctrNS[c.id])
		}
	}
	var eps []timeline.Episode
	if err := json.Unmarshal(faultGet(t, base, "/api/v1/episodes"), &eps); err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss {
		var got []timeline.Episode
		for _, ep := range eps {
			if ep.Container.PidNS == ns.pidns && ep.Main.PID == uint32(ns.pid) {
				got = append(got, ep)
			}
		}
		if len(got) != 1 || got[0].Container.ID != "" || got[0].Outcome != timeline.OutcomeIgnoredByInit {
			for _, ep := range got {
				t.Logf("episode: container %.12s %q, %s", ep.Container.ID, ep.Container.Name, ep.Outcome)
			}
			t.Errorf("namespace %d (init %d): %d episodes, want 1 naming no container, ignored_by_init", ns.pidns, ns.pid, len(got))
		}
	}
	t.Logf("reuse: %d rounds, %d containers got an inode a namespace of the test had had, %d agent requests held by the stall",
		rounds, reused, held)
	if t.Failed() {
		t.Logf("agent:\n%s", tail(agentErr.String()))
	}
}
