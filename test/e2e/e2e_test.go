package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/test/dockertest"
	"github.com/sigscope/sigscope/test/testutil"
)

// sigscope builds the command once per test binary.
func sigscope(t *testing.T) string { return testutil.Sigscope(t) }

var (
	imageOnce sync.Once
	image     string
)

func busyboxImage(t *testing.T) string {
	t.Helper()
	// Skip here, not inside the Once: a skip there would leave every later
	// test with no image and a failure instead of its own skip.
	testutil.RequirePrivileged(t)
	imageOnce.Do(func() { image = dockertest.BuildBusyboxImage(t, "sigscope-e2e:latest", "") })
	if image == "" {
		t.Fatal("no image")
	}
	return image
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	return hostEngine.docker(t, args...)
}

// runContainer starts a detached container (no network: the test daemon
// has no bridge) and removes it at cleanup. It returns the full ID.
func runContainer(t *testing.T, name string, args ...string) string {
	t.Helper()
	return hostEngine.runContainer(t, name, args...)
}

func exitCode(t *testing.T, name string) string { return hostEngine.exitCode(t, name) }

// episode is the part of `sigscope timeline -o json` the tests check.
type episode struct {
	Container struct {
		ID, Name, Image, Runtime, Pod, Namespace string
	} `json:"container"`
	Main struct {
		PID     uint32 `json:"pid"`
		NsPID   uint32 `json:"ns_pid"`
		Comm    string `json:"comm"`
		Runtime string `json:"runtime"` // the main process's language runtime (issue 20)
	} `json:"main"`
	MainIsInit bool   `json:"main_is_init"`
	Outcome    string `json:"outcome"`
	StopSignal string `json:"stop_signal"`
	StopSender *struct {
		PID       uint32 `json:"pid"`
		Comm      string `json:"comm"`
		Ancestors []struct {
			PID  uint32 `json:"pid"`
			Comm string `json:"comm"`
		} `json:"ancestors"`
	} `json:"stop_sender"`
	StopAt       string   `json:"stop_at"`
	KillAt       string   `json:"kill_at"`
	ExitAt       string   `json:"exit_at"`
	GracePeriod  *float64 `json:"grace_period_s"`
	StopTimeout  *float64 `json:"stop_timeout_s"` // the container's configured StopTimeout (issue 20)
	KillAfter    *float64 `json:"kill_after_s"`
	CascadeKills []struct {
		PID   uint32 `json:"pid"`
		NsPID uint32 `json:"ns_pid"`
	} `json:"cascade_kills"`
	ExitStatus  *int   `json:"exit_status"`
	StartUnseen bool   `json:"start_unseen"`
	TracedSince string `json:"traced_since"`
	Steps       []struct {
		Kind  string   `json:"kind"`
		Text  string   `json:"text"`
		Flags []string `json:"flags"`
	} `json:"steps"`
	Hint string `json:"hint"`

	raw []byte // the line as printed, for failure messages
}

// live is a running `sigscope timeline -o json`.
type live struct{ *testutil.Running }

func startTimeline(t *testing.T, args ...string) live {
	t.Helper()
	return hostEngine.startTimeline(t, args...)
}

// stop ends the live timeline (Ctrl-C) and returns the episodes it
// printed: once it has printed an episode of each container of ids (a
// stop's completes a settle time after its main process's exit, or later
// on a loaded machine), and a settle time after that for any other.
func (l live) stop(t *testing.T, ids ...string) []episode {
	t.Helper()
	for _, id := range ids {
		l.WaitLine(t, "an episode of "+id[:12], func(line []byte) bool {
			var ep episode
			return json.Unmarshal(line, &ep) == nil && ep.Container.ID == id
		})
	}
	time.Sleep(1500 * time.Millisecond) // past the settle time of the last episode
	var eps []episode
	for _, line := range l.Running.Stop(t) {
		var ep episode
		if err := json.Unmarshal(line, &ep); err != nil {
			t.Fatalf("episode line %q: %v", line, err)
		}
		ep.raw = line
		eps = append(eps, ep)
	}
	return eps
}

func episodeOf(t *testing.T, eps []episode, id string) episode {
	t.Helper()
	var found []episode
	for _, ep := range eps {
		if ep.Container.ID == id {
			found = append(found, ep)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d episodes for container %s, want 1; all: %+v", len(found), id[:12], eps)
	}
	return found[0]
}

type auditLine struct {
	Container struct{ ID, Name string } `json:"container"`
	PID1      struct {
		PID     int      `json:"pid"`
		Cmdline []string `json:"cmdline"`
	} `json:"pid1"`
	StopSignal string `json:"stop_signal"`
	Catches    bool   `json:"catches"`
	Prediction string `json:"prediction"`
	Source     string `json:"source"`
	Hint       string `json:"hint"`
}

// auditOf runs `sigscope audit -o json [flags]` and returns the
// container's line.
func auditOf(t *testing.T, id string, flags ...string) auditLine {
	t.Helper()
	return hostEngine.auditOf(t, id, flags...)
}

func within(t *testing.T, what string, got *float64, lo, hi float64) {
	t.Helper()
	if got == nil || *got < lo || *got > hi {
		v := "absent"
		if got != nil {
			v = fmt.Sprint(*got)
		}
		t.Errorf("%s = %s, want between %v and %v", what, v, lo, hi)
	}
}

// A shell-form PID 1 has no SIGTERM handler: docker stop's SIGTERM is
// dropped by the kernel, the SIGKILL comes after the timeout, the cascade
// kills the children, exit 137. On every engine: the verdict is the
// kernel's, whatever the cgroup layout and the runc.
func TestDockerStopShellForm(t *testing.T) {
	forEngine(t, func(t *testing.T, e *engine) {
		img := e.image(t, busyboxImage(t))
		id := e.runContainer(t, "e2e-shell", img, "sh", "-c", "sleep 1000 & sleep 1000 & wait")
		a := e.auditOf(t, id)
		if a.Prediction != "ignored_by_init" || a.Catches || a.StopSignal != "SIGTERM" || !strings.Contains(a.Hint, "tini") {
			t.Errorf("audit before the stop: %+v", a)
		}
		l := e.startTimeline(t)
		e.docker(t, "stop", "-t", "2", "e2e-shell")
		if code := e.exitCode(t, "e2e-shell"); code != "137" {
			t.Errorf("docker reports exit %s, want 137", code)
		}
		ep := episodeOf(t, l.stop(t, id), id)
		if ep.Outcome != "ignored_by_init" || ep.StopSignal != "SIGTERM" || ep.Container.Name != "e2e-shell" || ep.Container.Runtime != "docker" {
			t.Errorf("episode: outcome %s signal %s container %+v", ep.Outcome, ep.StopSignal, ep.Container)
		}
		if ep.StopSender == nil || ep.StopSender.PID == 0 {
			t.Errorf("no stop sender: %+v", ep.StopSender)
		}
		within(t, "kill_after_s", ep.KillAfter, 1.8, 6)
		if ep.KillAt == "" || ep.ExitAt == "" {
			t.Errorf("kill_at %q exit_at %q", ep.KillAt, ep.ExitAt)
		}
		if len(ep.CascadeKills) != 2 {
			t.Errorf("cascade kills %+v, want the 2 sleeps", ep.CascadeKills)
		}
		if ep.ExitStatus == nil || *ep.ExitStatus != 137 {
			t.Errorf("exit status %v, want 137", ep.ExitStatus)
		}
		if !strings.Contains(ep.Hint, "exec") {
			t.Errorf("hint %q", ep.Hint)
		}
	})
}

// A PID 1 that traps SIGTERM and exits: graceful, no SIGKILL; on every
// engine.
func TestDockerStopGraceful(t *testing.T) {
	forEngine(t, func(t *testing.T, e *engine) {
		img := e.image(t, busyboxImage(t))
		id := e.runContainer(t, "e2e-trap", img, "sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait")
		if a := e.auditOf(t, id); a.Prediction != "graceful" || !a.Catches {
			t.Errorf("audit before the stop: %+v", a)
		}
		l := e.startTimeline(t)
		e.docker(t, "stop", "-t", "5", "e2e-trap")
		if code := e.exitCode(t, "e2e-trap"); code != "0" {
			t.Errorf("docker reports exit %s, want 0", code)
		}
		ep := episodeOf(t, l.stop(t, id), id)
		if ep.Outcome != "graceful" || ep.KillAt != "" || ep.StopSignal != "SIGTERM" {
			t.Errorf("episode: outcome %s kill_at %q signal %s", ep.Outcome, ep.KillAt, ep.StopSignal)
		}
		if ep.ExitStatus == nil || *ep.ExitStatus != 0 {
			t.Errorf("exit status %v, want 0", ep.ExitStatus)
		}
	})
}

// A handler slower than the timeout: it ran, PID 1 was still alive at the
// SIGKILL.
func TestDockerStopHandlerTimeout(t *testing.T) {
	img := busyboxImage(t)
	id := runContainer(t, "e2e-slow", img, "sh", "-c", "trap 'sleep 30; exit 0' TERM; sleep 1000 & wait")
	if a := auditOf(t, id); a.Prediction != "graceful" || !a.Catches {
		t.Errorf("audit (PID 1 catches TERM; how long its handler takes is not knowable): %+v", a)
	}
	l := startTimeline(t)
	docker(t, "stop", "-t", "1", "e2e-slow")
	ep := episodeOf(t, l.stop(t, id), id)
	if ep.Outcome != "handler_timeout" || ep.KillAt == "" {
		t.Errorf("episode: outcome %s kill_at %q", ep.Outcome, ep.KillAt)
	}
	within(t, "kill_after_s", ep.KillAfter, 0.8, 5)
	if ep.ExitStatus == nil || *ep.ExitStatus != 137 {
		t.Errorf("exit status %v, want 137", ep.ExitStatus)
	}
}

// docker kill and docker rm -f: SIGKILL with no stop signal before it.
// The container runs before the timeline starts and is killed 1 s after
// it: the SIGKILL and PID 1's exit are both seen, so the stop is killed
// even though tracing began moments before. unfinished with start_unseen
// is for a stop whose stop signal may have been sent before tracing began
// and was not seen (an agent restarted mid-stop), not for this (issue 20).
func TestDockerKill(t *testing.T) {
	img := busyboxImage(t)
	for _, c := range []struct{ name, how string }{{"e2e-kill", "kill"}, {"e2e-rmf", "rm"}} {
		t.Run(c.how, func(t *testing.T) {
			id := runContainer(t, c.name, img, "sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait")
			l := startTimeline(t)
			time.Sleep(time.Second)
			if c.how == "kill" {
				docker(t, "kill", c.name)
			} else {
				docker(t, "rm", "-f", c.name)
			}
			ep := episodeOf(t, l.stop(t, id), id)
			if ep.Outcome != "killed" || ep.StopAt != "" || ep.KillAt == "" || ep.StartUnseen {
				t.Errorf("episode: outcome %s stop_at %q kill_at %q start_unseen %v traced_since %q; %s",
					ep.Outcome, ep.StopAt, ep.KillAt, ep.StartUnseen, ep.TracedSince, ep.raw)
			}
			if ep.ExitStatus == nil || *ep.ExitStatus != 137 {
				t.Errorf("exit status %v, want 137", ep.ExitStatus)
			}
		})
	}
}

// `docker stop -t 3` on a container whose StopTimeout is Docker's default,
// 10 s: the SIGKILL comes 3 s after SIGTERM. The grace that was applied is
// the -t, which no runtime reports; the container's StopTimeout was not
// applied and must not be shown as the grace period: grace_period_s is
// absent, stop_timeout_s says 10, kill_after_s about 3, and the text says
// what the stop was given (issue 20).
func TestDockerStopShorterThanStopTimeout(t *testing.T) {
	img := busyboxImage(t)
	r := runStopResult(t, stopCase{
		name: "e2e-stop-t3", stream: "docker_stop_t3",
		args:       []string{img, "sh", "-c", "sleep 1000 & wait"},
		timeout:    "3",
		prediction: "ignored_by_init", signal: "SIGTERM",
		outcome: "ignored_by_init", exitStatus: 137, killed: true, cascade: 1,
		summary: []string{"the stop was given 3"},
	})
	if got := docker(t, "inspect", "-f", "{{.Config.StopTimeout}}", "e2e-stop-t3"); got != "<nil>" {
		t.Fatalf("the container's StopTimeout is %s, want Docker's default (unset: 10 s)", got)
	}
	ep := r.ep
	if ep.GracePeriod != nil {
		t.Errorf("grace_period_s %v: the stop was given 3 s (docker stop -t 3), not the container's StopTimeout", *ep.GracePeriod)
	}
	within(t, "stop_timeout_s", ep.StopTimeout, 10, 10)
	within(t, "kill_after_s", ep.KillAfter, 2.8, 7)
	if strings.Contains(outcomeLine(r.text), "grace period 10") {
		t.Errorf("the text calls the StopTimeout the grace period: %s", outcomeLine(r.text))
	}
}

// `docker stop` with no -t on a container with --stop-timeout 2: the
// SIGKILL came at the StopTimeout, which is then the grace that applied.
func TestDockerStopAtStopTimeout(t *testing.T) {
	img := busyboxImage(t)
	r := runStopResult(t, stopCase{
		name: "e2e-stop-timeout2", stream: "docker_stop_timeout2",
		args:       []string{"--stop-timeout", "2", img, "sh", "-c", "sleep 1000 & wait"},
		prediction: "ignored_by_init", signal: "SIGTERM",
		outcome: "ignored_by_init", exitStatus: 137, killed: true, cascade: 1,
	})
	within(t, "grace_period_s", r.ep.GracePeriod, 2, 2)
	within(t, "stop_timeout_s", r.ep.StopTimeout, 2, 2)
}

// A memory-limited container that allocates past its limit: the kernel's
// OOM killer picks its PID 1.
func TestDockerOOM(t *testing.T) {
	img := busyboxImage(t)
	l := startTimeline(t)
	// tail buffers /dev/zero (no newline) without bound.
	id := docker(t, "run", "-d", "--network", "none", "--name", "e2e-oom", "-m", "24m", "--memory-swap", "24m",
		img, "sh", "-c", "exec tail /dev/zero")
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", "e2e-oom").Run() })
	if !testutil.Poll(100*time.Millisecond, func() bool { return docker(t, "inspect", "-f", "{{.State.Running}}", "e2e-oom") != "true" }) {
		t.Fatal("the container did not run out of memory")
	}
	if oom := docker(t, "inspect", "-f", "{{.State.OOMKilled}}", "e2e-oom"); oom != "true" {
		t.Errorf("docker says OOMKilled=%s", oom)
	}
	ep := episodeOf(t, l.stop(t, id), id)
	if ep.Outcome != "oom_killed" {
		t.Errorf("episode: outcome %s, steps %+v", ep.Outcome, ep.Steps)
	}
	if ep.ExitStatus == nil || *ep.ExitStatus != 137 {
		t.Errorf("exit status %v, want 137", ep.ExitStatus)
	}
}

// A child OOM-killed in a container that goes on running is no stop: the
// timeline shows it as an OOM kill the container survived
// (oom_kill_survived, with the victim and the memory fix), and the later
// stop of the same container gets its own episode and verdict.
func TestDockerOOMChildSurvives(t *testing.T) {
	img := busyboxImage(t)
	l := startTimeline(t)
	// tail buffers /dev/zero without bound; once the OOM killer ends it, the
	// shell goes on to wait for a sleep, and exits 0 on SIGTERM.
	id := docker(t, "run", "-d", "--network", "none", "--name", "e2e-oom-child", "-m", "24m", "--memory-swap", "24m",
		img, "sh", "-c", "trap 'exit 0' TERM; tail /dev/zero; sleep 1000 & wait")
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", "e2e-oom-child").Run() })
	if !testutil.Poll(100*time.Millisecond, func() bool { return strings.Contains(docker(t, "top", "e2e-oom-child"), "sleep 1000") }) {
		t.Fatal("the child was not OOM-killed (no sleep after it)")
	}
	// Past the settle time: the OOM kill's record is out.
	ofContainer := func(oom bool) func([]byte) bool {
		return func(line []byte) bool {
			var ep episode
			return json.Unmarshal(line, &ep) == nil && ep.Container.ID == id && (ep.Outcome == "oom_kill_survived") == oom
		}
	}
	l.WaitLine(t, "the OOM kill's record", ofContainer(true))
	docker(t, "stop", "-t", "5", "e2e-oom-child")
	l.WaitLine(t, "the stop's episode", ofContainer(false))
	var oom, stop []episode
	for _, ep := range l.stop(t) {
		if ep.Container.ID != id {
			continue
		}
		if ep.Outcome == "oom_kill_survived" {
			oom = append(oom, ep)
		} else {
			stop = append(stop, ep)
		}
	}
	if len(oom) != 1 || len(stop) != 1 {
		t.Fatalf("%d OOM records and %d stops of the container, want 1 and 1", len(oom), len(stop))
	}
	o := oom[0]
	var victims struct {
		OOMVictims []struct{ Comm string } `json:"oom_victims"`
	}
	if err := json.Unmarshal(o.raw, &victims); err != nil {
		t.Fatal(err)
	}
	if o.ExitAt != "" || o.StopSignal != "" || len(victims.OOMVictims) != 1 || victims.OOMVictims[0].Comm != "tail" || !strings.Contains(o.Hint, "Raise the memory limit") {
		t.Errorf("OOM record: %s", o.raw)
	}
	if s := stop[0]; s.Outcome != "graceful" || s.StopSignal != "SIGTERM" {
		t.Errorf("the later stop: %s %s, want graceful on SIGTERM", s.Outcome, s.StopSignal)
	}
}

// A container carrying kubelet's labels shows its pod, namespace and grace
// period, and --pod selects it.
func TestKubernetesLabels(t *testing.T) {
	img := busyboxImage(t)
	id := runContainer(t, "k8s_app_web-1_shop_uid-1_0", "--stop-timeout", "2",
		"--label", "io.kubernetes.pod.name=web-1",
		"--label", "io.kubernetes.pod.namespace=shop",
		"--label", "io.kubernetes.pod.uid=uid-1",
		"--label", "io.kubernetes.container.name=app",
		"--label", "io.kubernetes.pod.terminationGracePeriod=2",
		img, "sh", "-c", "sleep 1000 & wait")
	if a := auditOf(t, id); a.Prediction != "ignored_by_init" || a.Catches {
		t.Errorf("audit before the stop: %+v", a)
	}
	l := startTimeline(t, "--pod", "shop/web-1")
	other := runContainer(t, "e2e-other", img, "sh", "-c", "sleep 1000 & wait")
	docker(t, "stop", "-t", "2", "k8s_app_web-1_shop_uid-1_0")
	docker(t, "kill", "e2e-other")
	eps := l.stop(t, id)
	ep := episodeOf(t, eps, id)
	if ep.Container.Pod != "web-1" || ep.Container.Namespace != "shop" || ep.Container.Name != "app" {
		t.Errorf("container %+v, want pod shop/web-1 container app", ep.Container)
	}
	within(t, "grace_period_s", ep.GracePeriod, 2, 2)
	for _, e := range eps {
		if e.Container.ID == other {
			t.Errorf("--pod shop/web-1 let through %s", e.Container.Name)
		}
	}
}

// A recording made with `sigscope trace -o json` replays offline into the
// same verdict, with the container named from the recording alone.
func TestRecordingReplays(t *testing.T) {
	img := busyboxImage(t)
	id := runContainer(t, "e2e-rec", img, "sh", "-c", "sleep 1000 & wait")
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	out, err := os.Create(rec)
	if err != nil {
		t.Fatal(err)
	}
	trace := exec.Command(sigscope(t), "trace", "-o", "json")
	trace.Stdout = out
	var stderr bytes.Buffer
	trace.Stderr = &stderr
	if err := trace.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = trace.Process.Kill(); _, _ = trace.Process.Wait() })
	testutil.WaitPrograms(t, trace.Process.Pid, 5)
	docker(t, "stop", "-t", "1", "e2e-rec")
	time.Sleep(200 * time.Millisecond)
	_ = trace.Process.Signal(syscall.SIGINT)
	if err := trace.Wait(); err != nil {
		t.Fatalf("trace: %v\n%s", err, stderr.String())
	}
	out.Close()

	// The daemon is no longer needed to name the container: stop it from
	// answering by replaying after the container is gone.
	docker(t, "rm", "-f", "e2e-rec")
	replay, err := exec.Command(sigscope(t), "timeline", "-f", rec, "-o", "json", "--container", "e2e-rec").Output()
	if err != nil {
		t.Fatalf("timeline -f: %v", err)
	}
	var eps []episode
	for _, line := range strings.Split(strings.TrimSpace(string(replay)), "\n") {
		var ep episode
		if err := json.Unmarshal([]byte(line), &ep); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		eps = append(eps, ep)
	}
	ep := episodeOf(t, eps, id)
	if ep.Outcome != "ignored_by_init" || ep.Container.Name != "e2e-rec" || ep.ExitStatus == nil || *ep.ExitStatus != 137 {
		t.Errorf("replayed episode: outcome %s container %+v exit %v", ep.Outcome, ep.Container, ep.ExitStatus)
	}
	within(t, "kill_after_s", ep.KillAfter, 0.8, 5)
}

// `trace --container NAME` shows that container's events and no other's,
// each with its container object.
func TestTraceContainerFilter(t *testing.T) {
	img := busyboxImage(t)
	id := runContainer(t, "e2e-f1", img, "sh", "-c", "sleep 1000 & wait")
	runContainer(t, "e2e-f2", img, "sh", "-c", "sleep 1000 & wait")
	trace := exec.Command(sigscope(t), "trace", "-o", "json", "--container", "e2e-f1", "--signals", "TERM,KILL")
	var out, stderr bytes.Buffer
	trace.Stdout, trace.Stderr = &out, &stderr
	if err := trace.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = trace.Process.Kill(); _, _ = trace.Process.Wait() })
	testutil.WaitPrograms(t, trace.Process.Pid, 5)
	docker(t, "kill", "e2e-f2")
	docker(t, "kill", "e2e-f1")
	time.Sleep(300 * time.Millisecond)
	_ = trace.Process.Signal(syscall.SIGINT)
	if err := trace.Wait(); err != nil {
		t.Fatalf("trace: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	kills := 0
	for _, line := range lines {
		var rec struct {
			Event     string                              `json:"event"`
			Signal    string                              `json:"signal"`
			Container *struct{ ID, Name, Runtime string } `json:"container"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if rec.Container == nil || rec.Container.ID != id || rec.Container.Name != "e2e-f1" || rec.Container.Runtime != "docker" {
			t.Errorf("--container e2e-f1 let through %s", line)
		}
		if rec.Event == "generate" && rec.Signal == "SIGKILL" {
			kills++
		}
	}
	if kills < 2 { // docker kill's SIGKILL to PID 1, and the cascade to sleep
		t.Errorf("%d SIGKILLs for e2e-f1, want docker kill's and the cascade's:\n%s", kills, out.String())
	}
}

// A signal from one container to another (a sidecar sharing the pid
// namespace) names both: container (the target's) and sender_container.
func TestSenderContainer(t *testing.T) {
	img := busyboxImage(t)
	b := runContainer(t, "e2e-target", img, "sh", "-c", "sleep 1000 & wait")
	trace := testutil.StartSigscope(t, "trace", "-o", "json", "--container", "e2e-sidecar", "--signals", "TERM")
	a := runContainer(t, "e2e-sidecar", "--pid", "container:e2e-target", img, "sh", "-c", "kill -TERM 1; sleep 1000")
	trace.WaitLine(t, "the sidecar's SIGTERM", func(line []byte) bool {
		l := parseTraceLine(t, string(line))
		return l.Event == "generate" && l.Signal == "SIGTERM"
	})
	lines := trace.Stop(t)
	found := false
	for _, line := range lines {
		var rec struct {
			Result          string               `json:"result"`
			Flags           []string             `json:"flags"`
			Container       *struct{ ID string } `json:"container"`
			SenderContainer *struct{ ID string } `json:"sender_container"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if rec.Container != nil && rec.Container.ID == b && rec.SenderContainer != nil && rec.SenderContainer.ID == a {
			found = true
			if rec.Result != "ignored" || len(rec.Flags) == 0 || rec.Flags[0] != "pid1_ignored" {
				t.Errorf("sidecar's SIGTERM to the target's PID 1: %s", line)
			}
		}
	}
	if !found {
		t.Errorf("no event with container e2e-target and sender_container e2e-sidecar:\n%s", bytes.Join(lines, []byte("\n")))
	}
}
