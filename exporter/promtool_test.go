package exporter

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"

	"github.com/sigscope/sigscope/containers/identity"
	"github.com/sigscope/sigscope/episodes/audit"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/tracer"
	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// promtool finds promtool, installing Debian's prometheus package when it is
// missing and this is root. It skips only when that fails.
func promtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if os.Geteuid() != 0 {
		t.Skip("promtool not installed and not root to apt-get install prometheus")
	}
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	// Other tests (the e2e Prometheus test) may run apt at the same time:
	// wait for dpkg's lock instead of failing at once.
	for _, args := range [][]string{
		{"-o", "DPkg::Lock::Timeout=300", "update", "-qq"},
		{"-o", "DPkg::Lock::Timeout=300", "install", "-y", "-qq", "--no-install-recommends", "prometheus"},
	} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("promtool missing and apt-get %s failed: %v\n%s", args[2], err, out)
		}
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skipf("apt-get installed prometheus but promtool is not on PATH: %v", err)
	}
	return p
}

// exposition is the text format of a registry holding a fully fed exporter.
func exposition(t *testing.T, podLabels bool) []byte {
	t.Helper()
	e := New(Options{
		PodLabels: podLabels,
		MaxSeries: 2,
		Stats: func() (tracer.Stats, error) {
			return tracer.Stats{PerKind: tracer.PerKind{sigvocab.KindGenerate: {Seen: 3, Emitted: 2, Dropped: 1}}}, nil
		},
		EnrichmentErrors: func() map[string]uint64 { return map[string]uint64{"docker": 1} },
		Caches:           func() []Cache { return []Cache{{Name: "episodes", Entries: 1, Capacity: 1000}} },
		Version:          "v0.0.0-test",
		Revision:         "abc\xff",
	})
	reg := register(t, e)
	evil := &identity.Info{Identity: identity.Identity{ID: "e", Name: "a\"b\\c\nd\xff", Pod: "p", Namespace: "n"}}
	for _, c := range []*identity.Info{webApp, webSide, plain, bare, evil, nil} {
		e.ObserveEvent(generate(sigvocab.SIGTERM, sigvocab.ResultIgnored, sigvocab.FlagPID1Ignored), c)
		e.ObserveEvent(generate(sigvocab.SIGKILL, sigvocab.ResultDelivered, sigvocab.FlagNSCascade), c)
		e.ObserveEvent(killed(sigvocab.SIGKILL), c)
		e.ObserveEvent(exited(0), c)
		e.ObserveEvent(oom(), c)
	}
	e.ObserveEpisode(episode(timeline.OutcomeIgnoredByInit, 0, 10*time.Second))
	e.ObserveEpisode(episode(timeline.OutcomeGraceful, 0, time.Second))
	lost := episode(timeline.OutcomeHandlerTimeout, 0, 30*time.Second)
	lost.Container = timeline.Container{Identity: evil.Identity}
	lost.Traffic = &timeline.Traffic{NetNS: 7, Until: time.Unix(1700000000, 0), SeesRefused: true, SeesLastSpeaker: true,
		Probes: &[sigvocab.NumNetKinds]uint64{sigvocab.NetAccepted: 2, sigvocab.NetRefused: 1}}
	lost.Traffic.Counts[sigvocab.NetRefused].N = 3
	e.ObserveEpisode(lost)
	e.SetAudit([]audit.Result{{Container: identity.Summary{Identity: identity.Identity{Name: "web"}}, Prediction: audit.IgnoredByInit}})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestPromtoolCheckMetrics(t *testing.T) {
	bin := promtool(t)
	for _, podLabels := range []bool{false, true} {
		text := exposition(t, podLabels)
		cmd := exec.Command(bin, "check", "metrics")
		cmd.Stdin = bytes.NewReader(text)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Errorf("PodLabels=%v: promtool check metrics: %v\n%s\n--- exposition:\n%s", podLabels, err, out, text)
		}
	}
}

// client_golang's promlint has newer rules than Debian's promtool and needs
// nothing installed.
func TestPromlint(t *testing.T) {
	for _, podLabels := range []bool{false, true} {
		text := exposition(t, podLabels)
		problems, err := promlint.New(bytes.NewReader(text)).Lint()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("PodLabels=%v: %s: %s", podLabels, p.Metric, p.Text)
		}
	}
}
