package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	dto "github.com/prometheus/client_model/go"
	"github.com/sigscope/sigscope/test/testutil"
)

// Every feature run with exactly the capabilities the chart grants (setpriv
// reduces the bounding, inheritable and ambient sets to them, with
// no_new_privs, uid 0 and a read-only root filesystem, as the DaemonSet's
// securityContext says): trace sees runc's SIGTERM dropped by a shell PID 1,
// timeline names the stopped container and its outcome, audit predicts a
// shell and catatonit (whose signalfd is read from /proc/PID/fd), and serve
// answers /metrics, /api/v1/episodes and /api/v1/audit with no enrichment
// error. Then each capability is dropped in turn: some feature must fail or
// degrade, and say which capability it lacks.
func TestLeastPrivilege(t *testing.T) {
	img := initsImage(t)
	caps := privChartCaps(t)
	t.Logf("priv: chart capabilities %s", strings.Join(caps, ","))
	chart := privWrapper(t, caps)

	shell := runContainer(t, "e2e-priv-shell", img, "sh", "-c", "sleep 1000 & wait")
	cat := runContainer(t, "e2e-priv-cat", img, "/usr/bin/catatonit", "--", "sleep", "1000")
	testutil.WaitChildren(t, mainPID(t, "e2e-priv-cat"), 1) // its signalfd is set up before its child starts
	// A signal to this one's PID 1 makes the agent look up a container
	// process, whose /proc/PID/ns/pid only CAP_SYS_PTRACE opens.
	runContainer(t, "e2e-priv-ign", img, "sh", "-c", "trap '' USR1; sleep 1000 & wait")
	ignPID := mainPID(t, "e2e-priv-ign")
	shellPID := mainPID(t, "e2e-priv-shell")

	port, agentErr, agentPID := startServeUnder(t, chart)
	agent := fmt.Sprintf("http://127.0.0.1:%d", port)
	tr := testutil.StartSigscopeUnder(t, chart, "trace", "-o", "json", "--signals", "TERM,KILL")
	tl := live{testutil.StartSigscopeUnder(t, chart, "timeline", "-o", "json")}
	privCheckProcess(t, "serve", agentPID, caps)
	privCheckProcess(t, "trace", tr.Cmd.Process.Pid, caps)
	privCheckProcess(t, "timeline", tl.Cmd.Process.Pid, caps)
	waitHTTP(t, agent+"/readyz")

	// audit, from the kernel's task state and /proc/PID/fd.
	res, stderr, err := privRun(t, chart, "audit", "-o", "json")
	if err != nil || strings.Contains(stderr, "level=") {
		t.Fatalf("audit with the chart's capabilities: %v\n%s", err, stderr)
	}
	audits := privAudits(t, res)
	if a := audits[shell]; a.Prediction != "ignored_by_init" || a.Source != "kernel" {
		t.Errorf("audit of the shell-form container: %+v", a)
	}
	if a := audits[cat]; a.Prediction != "graceful" || !a.Signalfd || a.Source != "kernel" {
		t.Errorf("audit of catatonit (a signalfd in /proc/PID/fd): %+v", a)
	}

	docker(t, "stop", "-t", "1", "e2e-priv-shell")
	testutil.Run(t, "kill", "-USR1", strconv.Itoa(ignPID))

	// trace: runc's SIGTERM, dropped by the shell PID 1.
	found := false
	for _, line := range tr.Stop(t) {
		l := parseTraceLine(t, string(line))
		if l.Event == "generate" && l.Signal == "SIGTERM" && l.Target.PID == uint32(shellPID) {
			found = true
			if l.Result != "ignored" || l.Fate != "pid1_ignored" || l.Container == nil || l.Container.ID != shell {
				t.Errorf("trace: the stop's SIGTERM: %s", line)
			}
		}
	}
	if !found {
		t.Errorf("trace saw no SIGTERM to the shell PID 1 (%d)", shellPID)
	}

	// timeline: the container named, the right outcome.
	ep := episodeOf(t, tl.stop(t, shell), shell)
	if ep.Outcome != "ignored_by_init" || ep.Container.Name != "e2e-priv-shell" || ep.Container.Runtime != "docker" {
		t.Errorf("timeline: outcome %s container %+v", ep.Outcome, ep.Container)
	}

	// serve: the episode, the audit and the metrics, with no enrichment
	// error although it looked up container processes.
	var eps []episode
	privPoll(t, "the stop in /api/v1/episodes", func() bool {
		eps = nil
		return privGetJSON(agent+"/api/v1/episodes?container=e2e-priv-shell", &eps) == nil && len(eps) > 0
	})
	if len(eps) != 1 || eps[0].Container.ID != shell || eps[0].Container.Name != "e2e-priv-shell" || eps[0].Outcome != "ignored_by_init" {
		t.Errorf("/api/v1/episodes: %+v", eps)
	}
	var apiAudit []privAudit
	if err := privGetJSON(agent+"/api/v1/audit", &apiAudit); err != nil {
		t.Fatal(err)
	}
	var apiCat *privAudit
	for i := range apiAudit {
		if apiAudit[i].Container.ID == cat {
			apiCat = &apiAudit[i]
		}
	}
	if apiCat == nil || apiCat.Prediction != "graceful" || !apiCat.Signalfd || apiCat.Source != "kernel" {
		t.Errorf("/api/v1/audit of catatonit: %+v", apiCat)
	}
	m := privAfterSignal(t, agent)
	if v := sumMetric(m, "sigscope_container_stops_total", map[string]string{"outcome": "ignored_by_init"}); v < 1 {
		t.Errorf("sigscope_container_stops_total{outcome=ignored_by_init} = %v", v)
	}
	if errs := sumMetric(m, "sigscope_enrichment_errors_total", nil); errs != 0 {
		t.Errorf("%v enrichment errors with the chart's capabilities:\n%s", errs, tail(agentErr.String()))
	}
	if s := agentErr.String(); strings.Contains(s, "level=WARN") || strings.Contains(s, "level=ERROR") {
		t.Errorf("serve complained with the chart's capabilities:\n%s", tail(s))
	}
	t.Logf("priv: with %s: trace, timeline, audit and serve work; enrichment errors 0", strings.Join(caps, ","))

	// Each capability in turn: which feature needs it, and whether it says so.
	for _, drop := range caps {
		t.Run("without_"+drop, func(t *testing.T) {
			rest := slices.DeleteFunc(slices.Clone(caps), func(c string) bool { return c == drop })
			w := privWrapper(t, rest)
			name := "CAP_" + strings.ToUpper(drop)
			var needs []string
			// named checks that a feature's complaint names the capability.
			named := func(feature, complaint string) {
				i := strings.Index(complaint, name)
				if i < 0 {
					needs = append(needs, feature)
					t.Errorf("without %s, %s fails without naming it:\n%s", name, feature, complaint)
					return
				}
				// The line that names it, for the log.
				line := complaint[strings.LastIndex(complaint[:i], "\n")+1:]
				line, _, _ = strings.Cut(line, "\n")
				needs = append(needs, fmt.Sprintf("%s: %.300s", feature, line))
			}
			for _, cmd := range [][]string{
				{"trace", "--duration", "1s", "--signals", "TERM"},
				{"timeline", "--duration", "1s"},
			} {
				if _, stderr, err := privRun(t, w, cmd...); err != nil {
					named(cmd[0], stderr)
				}
			}
			out, stderr, err := privRun(t, w, "audit", "-o", "json")
			if err != nil {
				named("audit", stderr)
			} else {
				if strings.Contains(stderr, "level=WARN") {
					named("audit (falls back to /proc)", stderr)
				}
				for id, a := range privAudits(t, out) {
					if a.Error != "" {
						named("audit of "+a.Container.Name, a.Error)
					} else if full := audits[id]; full.Container.ID == id && a.Prediction != full.Prediction {
						t.Errorf("without %s the audit of %s predicts %s (%s with the chart's capabilities) and says nothing", name, a.Container.Name, a.Prediction, full.Prediction)
					}
				}
			}
			if serveErr := privServe(t, w, rest, ignPID); serveErr != "" {
				named("serve", serveErr)
			}
			t.Logf("priv: without %s:\n\t%s", name, strings.Join(needs, "\n\t"))
			if len(needs) == 0 {
				t.Errorf("no feature needs %s: the chart should not grant it", name)
			}
		})
	}
}

// privChartCaps reads the agent container's securityContext from the
// rendered chart (deploy/manifests/sigscope.yaml, which deploy's tests keep
// equal to the chart's templates), checks the settings the wrapper
// reproduces, and returns the capabilities added back, as setpriv names them
// ("bpf").
func privChartCaps(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../deploy/manifests/sigscope.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if !strings.Contains(doc, "\nkind: DaemonSet\n") {
			continue
		}
		var ds appsv1.DaemonSet
		if err := yaml.Unmarshal([]byte(doc), &ds); err != nil {
			t.Fatal(err)
		}
		var c *corev1.Container
		for i := range ds.Spec.Template.Spec.Containers {
			if ds.Spec.Template.Spec.Containers[i].Name == "sigscope" {
				c = &ds.Spec.Template.Spec.Containers[i]
			}
		}
		if c == nil || c.SecurityContext == nil || c.SecurityContext.Capabilities == nil {
			t.Fatal("the DaemonSet has no sigscope container with capabilities")
		}
		sc := c.SecurityContext
		is := func(p *bool, want bool) bool { return p != nil && *p == want }
		if sc.RunAsUser == nil || *sc.RunAsUser != 0 || !is(sc.AllowPrivilegeEscalation, false) ||
			!is(sc.ReadOnlyRootFilesystem, true) || !is(sc.Privileged, false) ||
			!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Fatalf("the chart's securityContext is not the one this test reproduces (uid 0, no privilege escalation, read-only root, drop ALL): %+v", sc)
		}
		var caps []string
		for _, c := range sc.Capabilities.Add {
			caps = append(caps, strings.ToLower(strings.TrimPrefix(string(c), "CAP_")))
		}
		return caps
	}
	t.Fatal("no DaemonSet in deploy/manifests/sigscope.yaml")
	return nil
}

// privWrapper is a command that execs its arguments as the chart's
// container would run them, with caps only: a private mount namespace with
// the root filesystem, /sys and the cgroup hierarchies read-only, then
// setpriv with uid and gid 0, no supplementary groups, the bounding,
// inheritable and ambient sets reduced to caps (uid 0 then gets exactly
// them as effective and permitted), and no_new_privs.
func privWrapper(t *testing.T, caps []string) []string {
	t.Helper()
	set := "-all"
	for _, c := range caps {
		set += ",+" + c
	}
	readOnly := `mount -o remount,bind,ro / || exit 1
for m in /sys /sys/fs/cgroup /sys/fs/cgroup/*; do
	if mountpoint -q "$m"; then mount -o remount,bind,ro "$m" || exit 1; fi
done
exec "$@"`
	return []string{"unshare", "--mount", "--propagation", "private", "sh", "-c", readOnly, "sh",
		"setpriv", "--reuid=0", "--regid=0", "--clear-groups",
		"--inh-caps=" + set, "--ambient-caps=" + set, "--bounding-set=" + set, "--no-new-privs"}
}

// privCheckProcess checks from /proc/PID that a running sigscope really has
// only caps, no_new_privs, uid 0 and a read-only root.
func privCheckProcess(t *testing.T, what string, pid int, caps []string) {
	t.Helper()
	out, err := exec.Command("setpriv", "--list-caps").Output()
	if err != nil {
		t.Fatal(err)
	}
	// setpriv lists the capabilities in the kernel's order: line n is n.
	var want uint64
	known := strings.Fields(string(out))
	for _, c := range caps {
		n := slices.Index(known, c)
		if n < 0 {
			t.Fatalf("setpriv does not know capability %q", c)
		}
		want |= 1 << n
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	for _, k := range []string{"CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"} {
		if got, err := strconv.ParseUint(fields[k], 16, 64); err != nil || got != want {
			t.Errorf("%s (pid %d): %s %s, want %016x", what, pid, k, fields[k], want)
		}
	}
	if fields["NoNewPrivs"] != "1" || !strings.HasPrefix(fields["Uid"], "0\t") {
		t.Errorf("%s (pid %d): NoNewPrivs %s Uid %s, want 1 and 0", what, pid, fields["NoNewPrivs"], fields["Uid"])
	}
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		// ID parent dev root mountpoint options ...
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" && !slices.Contains(strings.Split(f[5], ","), "ro") {
			t.Errorf("%s (pid %d): the root filesystem is not read-only: %s", what, pid, line)
		}
	}
	t.Logf("priv: %s pid %d CapEff %s CapBnd %s NoNewPrivs %s", what, pid, fields["CapEff"], fields["CapBnd"], fields["NoNewPrivs"])
}

// privRun runs sigscope ARGS through wrapper to completion.
func privRun(t *testing.T, wrapper []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	argv := append(append(wrapper[:len(wrapper):len(wrapper)], sigscope(t)), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// privAudits are `sigscope audit -o json` lines by container ID.
func privAudits(t *testing.T, out string) map[string]privAudit {
	t.Helper()
	m := map[string]privAudit{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var a privAudit
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		m[a.Container.ID] = a
	}
	return m
}

// privAudit is auditLine with the fields this test reads besides.
type privAudit struct {
	auditLine
	Signalfd bool   `json:"signalfd"`
	Error    string `json:"error"`
}

// privServe starts serve through wrapper. When it cannot run, it returns
// what it said. When it runs, it signals the container process pid (a
// lookup that reads /proc/PID/ns/pid) and returns what it logged if that
// made enrichment errors.
func privServe(t *testing.T, wrapper, caps []string, pid int) string {
	t.Helper()
	port := freePort(t)
	argv := append(wrapper[:len(wrapper):len(wrapper)], sigscope(t), "serve", "--web.listen-address", fmt.Sprintf("127.0.0.1:%d", port))
	cmd := exec.Command(argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	agent := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(testutil.Bound)
	for {
		select {
		case err := <-exited:
			exited <- err
			if err == nil {
				t.Errorf("serve ended on its own")
			}
			return stderr.String()
		default:
		}
		if resp, err := http.Get(agent + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve neither failed nor became ready:\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	privCheckProcess(t, "serve", cmd.Process.Pid, caps)
	testutil.Run(t, "kill", "-USR1", strconv.Itoa(pid))
	m := privAfterSignal(t, agent)
	if sumMetric(m, "sigscope_enrichment_errors_total", nil) > 0 {
		return fmt.Sprintf("enrichment errors %v (%v from /proc): %s", sumMetric(m, "sigscope_enrichment_errors_total", nil),
			sumMetric(m, "sigscope_enrichment_errors_total", map[string]string{"source": "proc"}), stderr.String())
	}
	return ""
}

// privAfterSignal waits until the agent has counted a SIGUSR1 (the test's
// kill of a container process) and returns its metrics.
func privAfterSignal(t *testing.T, agent string) map[string]*dto.MetricFamily {
	t.Helper()
	var m map[string]*dto.MetricFamily
	privPoll(t, "the agent counting the SIGUSR1", func() bool {
		m = mustScrape(t, agent)
		return sumMetric(m, "sigscope_signals_total", map[string]string{"signal": "SIGUSR1"}) > 0
	})
	return m
}

func privGetJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// privPoll waits for cond, up to testutil.Bound.
func privPoll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !testutil.Poll(100*time.Millisecond, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}
