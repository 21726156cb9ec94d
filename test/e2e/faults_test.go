package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/test/dockertest"
	"github.com/sigscope/sigscope/test/testutil"
)

// Faults (issue 12): the tracer's ring made too small for a burst, Docker
// restarted under a running agent, and the agent SIGKILLed in the middle of
// a stop. Each test prints its figures on lines that start with "fault".

// faultGet fetches base+path and fails the test on a transport error or a
// status other than 200.
func faultGet(t *testing.T, base, path string) []byte {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", path, resp.Status, err, b)
	}
	return b
}

// faultEpisodes is the agent's /api/v1/episodes for one container.
func faultEpisodes(t *testing.T, base, id string) []timeline.Episode {
	t.Helper()
	var eps []timeline.Episode
	if err := json.Unmarshal(faultGet(t, base, "/api/v1/episodes?container="+url.QueryEscape(id)), &eps); err != nil {
		t.Fatalf("/api/v1/episodes: %v", err)
	}
	return eps
}

// faultWaitEpisode waits until the agent has an episode of the container
// (it completes a settle time after the main process's exit).
func faultWaitEpisode(t *testing.T, base, id string) timeline.Episode {
	t.Helper()
	var eps []timeline.Episode
	testutil.Poll(100*time.Millisecond, func() bool { eps = faultEpisodes(t, base, id); return len(eps) > 0 })
	if len(eps) != 1 {
		t.Fatalf("%d episodes of container %s, want 1: %+v", len(eps), id[:12], eps)
	}
	return eps[0]
}

// faultStorm sends n SIGUSR1 to a shell that ignores them, as fast as a
// shell's builtin kill goes (over 100k/s here, traced): a burst no small
// ring holds. It returns how long it took.
func faultStorm(t *testing.T, n int) time.Duration {
	t.Helper()
	start := time.Now()
	script := fmt.Sprintf(`trap '' USR1; i=0; while [ $i -lt %d ]; do kill -USR1 $$; i=$((i+1)); done`, n)
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("storm: %v\n%s", err, out)
	}
	return time.Since(start)
}

var faultTotals = regexp.MustCompile(`total seen=(\d+) emitted=(\d+) dropped=(\d+) read=(\d+)`)

// A one-page ring (--ring-size 4K, about 18 records) and a burst of 100k
// signals during a docker stop: the loss shows in trace's end-of-run
// totals, in serve's sigscope_events_dropped_total, and in the stop's
// episode (events_dropped in its JSON, MAY BE INCOMPLETE in its text).
func TestFaultRingTooSmall(t *testing.T) {
	img := busyboxImage(t)
	const burst = 100000
	port, agentErr := startServe(t, "--ring-size", "4K")
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, base+"/readyz")
	trace := startTrace(t, "--ring-size", "4K")
	id := runContainer(t, "fault-ring", img, "sh", "-c", "sleep 1000")
	pid := mainPID(t, "fault-ring")

	stop := exec.Command("docker", "stop", "-t", "3", "fault-ring")
	if err := stop.Start(); err != nil {
		t.Fatal(err)
	}
	// The burst falls between runc's SIGTERM, which PID 1 drops, and its
	// SIGKILL 3 s later: the episode is open all along.
	trace.WaitLine(t, "runc's SIGTERM", func(line []byte) bool {
		l := parseTraceLine(t, string(line))
		return l.Event == "generate" && l.Signal == "SIGTERM" && l.Target.PID == uint32(pid)
	})
	took := faultStorm(t, burst)
	if err := stop.Wait(); err != nil {
		t.Fatalf("docker stop: %v", err)
	}
	ep := faultWaitEpisode(t, base, id)
	trace.stop(t)
	totals := faultTotals.FindStringSubmatch(trace.Stderr())
	if totals == nil {
		t.Fatalf("no totals in trace's stderr:\n%s", trace.Stderr())
	}
	var seen, emitted, dropped, read uint64
	for i, p := range []*uint64{&seen, &emitted, &dropped, &read} {
		*p, _ = strconv.ParseUint(totals[i+1], 10, 64)
	}
	if dropped == 0 || seen != emitted+dropped || read != emitted {
		t.Errorf("trace totals seen=%d emitted=%d dropped=%d read=%d: want drops, seen = emitted + dropped, read = emitted", seen, emitted, dropped, read)
	}

	fams := mustScrape(t, base)
	agentDropped := sumMetric(fams, "sigscope_events_dropped_total", nil)
	if agentDropped == 0 {
		t.Errorf("sigscope_events_dropped_total is 0 after a %d-signal burst into a 4K ring\nagent: %s", burst, tail(agentErr.String()))
	}
	if ep.EventsDropped == 0 {
		t.Errorf("episode of the stop the burst overlapped: events_dropped 0; %s — %s", ep.Outcome, ep.Summary())
	}
	raw := faultGet(t, base, "/api/v1/episodes?container="+id)
	if !regexp.MustCompile(`"events_dropped":[1-9]`).Match(raw) {
		t.Errorf("the agent's episode JSON lacks events_dropped: %s", raw)
	}
	text, err := exec.Command(sigscope(t), "timeline", "--server", base, "--container", "fault-ring").Output()
	if err != nil || !bytes.Contains(text, []byte("MAY BE INCOMPLETE")) {
		t.Errorf("timeline --server (%v): no MAY BE INCOMPLETE in\n%s", err, text)
	}
	t.Logf("fault ring: ring=4096B burst=%d signals in %v (%.0f/s)", burst, took.Round(time.Millisecond), float64(burst)/took.Seconds())
	t.Logf("fault ring: trace seen=%d emitted=%d dropped=%d read=%d (%.1f%% dropped)", seen, emitted, dropped, read, 100*float64(dropped)/float64(max(seen, 1)))
	t.Logf("fault ring: serve sigscope_events_dropped_total=%.0f; episode %s events_dropped=%d outcome=%s", agentDropped, id[:12], ep.EventsDropped, ep.Outcome)
}

// faultServe starts `sigscope serve` on addr with args and waits until it
// answers ready; it returns how long that took from the start.
func faultServe(t *testing.T, addr string, args ...string) (*testutil.Running, time.Duration) {
	t.Helper()
	start := time.Now()
	r := testutil.StartSigscope(t, append([]string{"serve", "--web.listen-address", addr}, args...)...)
	waitHTTP(t, "http://"+addr+"/readyz")
	return r, time.Since(start)
}

// The agent SIGKILLed 1 s into a docker stop of a shell-form container and
// started again at once: it comes back ready, audits every running
// container at once (the audit interval is an hour, so it is the start-up
// audit), and does not report the stop it half saw as killed or exited. It
// sees only runc's SIGKILL at the end of the 4 s timeout and the exit; the
// truth, ignored_by_init, was decided by the SIGTERM it missed.
func TestFaultAgentKilledMidStop(t *testing.T) {
	img := busyboxImage(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	base := "http://" + addr
	first, _ := faultServe(t, addr, "--audit-interval", "1h")
	id := runContainer(t, "fault-midstop", img, "sh", "-c", "sleep 1000")
	bystander := runContainer(t, "fault-bystander", img, "sleep", "1000")

	stop := exec.Command("docker", "stop", "-t", "4", "fault-midstop")
	if err := stop.Start(); err != nil {
		t.Fatal(err)
	}
	stopAt := time.Now()
	time.Sleep(time.Second)
	if err := first.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Cmd.Wait()
	_, ready := faultServe(t, addr, "--audit-interval", "1h")
	restarted := time.Since(stopAt)

	// The start-up audit: both containers ran when it began.
	var audited time.Duration
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		fams := mustScrape(t, base)
		okBy := hasMetric(fams, "sigscope_container_pid1_handles_stop_signal", map[string]string{"container": "fault-bystander"})
		if okBy {
			audited = time.Since(start)
			if !hasMetric(fams, "sigscope_container_pid1_handles_stop_signal", map[string]string{"container": "fault-midstop"}) {
				t.Logf("fault agent-kill: the stopping container had ended before the start-up audit")
			}
			break
		}
		if time.Since(start) > testutil.Bound {
			t.Fatalf("%v after /readyz the audit metric lists no fault-bystander (%s): no start-up audit", testutil.Bound, bystander[:12])
		}
	}
	if err := stop.Wait(); err != nil {
		t.Fatalf("docker stop: %v", err)
	}
	if code := exitCode(t, "fault-midstop"); code != "137" {
		t.Errorf("docker reports exit %s, want 137 (SIGKILL after the timeout)", code)
	}
	time.Sleep(1500 * time.Millisecond) // past the episode's settle time
	eps := faultEpisodes(t, base, id)
	for _, ep := range eps {
		if ep.Outcome != timeline.OutcomeUnfinished || !ep.StartUnseen {
			t.Errorf("the stop the agent half saw: outcome %s start_unseen %v, want unfinished (or no episode): %s", ep.Outcome, ep.StartUnseen, ep.Summary())
		}
	}
	verdict := "absent"
	if len(eps) == 1 {
		verdict = fmt.Sprintf("%s start_unseen=%v: %s", eps[0].Outcome, eps[0].StartUnseen, eps[0].Summary())
	}
	t.Logf("fault agent-kill: SIGKILL 1s into a 4s docker stop; new agent ready %v after its start (%v into the stop); start-up audit in the metric %v after ready",
		ready.Round(time.Millisecond), restarted.Round(time.Millisecond), audited.Round(time.Millisecond))
	t.Logf("fault agent-kill: the half-seen stop's episode: %s", verdict)
}

// Docker stopped and started again under a running agent: stopped as a
// service manager does (SIGTERM: dockerd stops its containers first, since
// live-restore is off, and removes its socket), and crashed (SIGKILL: the
// containers live on without it, its socket refuses connections, and the
// restarted dockerd stops them). The container living across the restart
// gets its true episode (ignored_by_init, named) either way. While Docker
// is down the agent stays ready and records (a pid namespace stopped then
// gets its episode); an audit asked of it then cannot reach Docker and says
// so (503), counted as an enrichment error when the socket was there to
// fail. A container run and stopped right after the restart gets a right,
// named episode: the agent's periodic audit is an hour away, so nothing but
// the new daemon's socket tells the resolver Docker is back.
func TestFaultDockerRestart(t *testing.T) {
	img := busyboxImage(t)
	d := dockertest.EnsureDaemon(t)
	for _, c := range []struct {
		name string
		sig  syscall.Signal
	}{{"stop", syscall.SIGTERM}, {"crash", syscall.SIGKILL}} {
		t.Run(c.name, func(t *testing.T) { faultDockerRestart(t, d, img, c.name, c.sig) })
	}
}

func faultDockerRestart(t *testing.T, d *dockertest.Daemon, img, how string, sig syscall.Signal) {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	base := "http://" + addr
	agent, _ := faultServe(t, addr, "--audit-interval", "1h")
	across := runContainer(t, "fault-across", "--stop-timeout", "2", img, "sh", "-c", "sleep 1000")

	var nsEpisode timeline.Episode
	var downErrors float64
	var auditStatus string
	outage := d.Restart(t, sig, func() {
		waitHTTP(t, base+"/readyz")
		// The agent answers with an audit up to 1 s old: ask until it
		// runs one now.
		testutil.Poll(100*time.Millisecond, func() bool {
			resp, err := http.Get(base + "/api/v1/audit")
			if err != nil {
				t.Fatalf("/api/v1/audit while Docker is down: %v", err)
			}
			resp.Body.Close()
			auditStatus = resp.Status
			return resp.StatusCode != http.StatusOK
		})
		// A stop while Docker is down: an unshare'd pid namespace whose
		// init drops SIGTERM and is then SIGKILLed.
		ns := testutil.StartNSInit(t, "echo ready; read x")
		pidns := ns.PidNS(t)
		testutil.Run(t, "kill", "-TERM", strconv.Itoa(ns.PID))
		testutil.Run(t, "kill", "-KILL", strconv.Itoa(ns.PID))
		if !testutil.Poll(100*time.Millisecond, func() bool {
			var eps []timeline.Episode
			if err := json.Unmarshal(faultGet(t, base, "/api/v1/episodes"), &eps); err != nil {
				t.Fatal(err)
			}
			for _, ep := range eps {
				if ep.Container.PidNS == pidns {
					nsEpisode = ep
				}
			}
			return nsEpisode.Outcome != ""
		}) {
			t.Fatalf("no episode of pid namespace %d while Docker was down", pidns)
		}
		downErrors = sumMetric(mustScrape(t, base), "sigscope_enrichment_errors_total", map[string]string{"source": "docker"})
	})
	if err := agent.Cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the agent did not live through Docker's restart: %v", err)
	}
	after := runContainer(t, "fault-after", img, "sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait")
	docker(t, "stop", "-t", "5", "fault-after")

	if nsEpisode.Outcome != timeline.OutcomeIgnoredByInit {
		t.Errorf("the pid namespace stopped while Docker was down: %s — %s", nsEpisode.Outcome, nsEpisode.Summary())
	}
	if auditStatus != "503 Service Unavailable" {
		t.Errorf("/api/v1/audit while Docker was down: %s, want 503", auditStatus)
	}
	if sig == syscall.SIGKILL && downErrors == 0 {
		t.Errorf("no enrichment error counted while a crashed dockerd left its socket refusing connections")
	}
	ep := faultWaitEpisode(t, base, across)
	if ep.Outcome != timeline.OutcomeIgnoredByInit || ep.Container.Name != "fault-across" || ep.ExitStatus != 137 || ep.StartUnseen {
		t.Errorf("the container that lived across the restart: %s %q exit %d — %s", ep.Outcome, ep.Container.Name, ep.ExitStatus, ep.Summary())
	}
	epAfter := faultWaitEpisode(t, base, after)
	if epAfter.Outcome != timeline.OutcomeGraceful || epAfter.Container.Name != "fault-after" || epAfter.Container.Image != img {
		t.Errorf("the container run after the restart: %s %q image %q — %s", epAfter.Outcome, epAfter.Container.Name, epAfter.Container.Image, epAfter.Summary())
	}
	fams := mustScrape(t, base)
	errs := sumMetric(fams, "sigscope_enrichment_errors_total", map[string]string{"source": "docker"})
	if dropped := sumMetric(fams, "sigscope_events_dropped_total", nil); dropped != 0 {
		t.Errorf("events dropped: %v", dropped)
	}
	t.Logf("fault docker-%s: dockerd gone %v after %v, answered again %v after its start (the across container: --stop-timeout 2)",
		how, outage.Stopped.Round(time.Millisecond), sig, outage.Started.Round(time.Millisecond))
	t.Logf("fault docker-%s: /api/v1/audit while down %s; enrichment errors (docker) %.0f while down, %.0f in all; across: %s %s; while down: %s; after: %s %s",
		how, auditStatus, downErrors, errs, ep.Outcome, ep.Container.Name, nsEpisode.Outcome, epAfter.Outcome, epAfter.Container.Name)
}
