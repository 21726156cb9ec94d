package journal

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"

	"github.com/sigscope/sigscope/episodes/pipeline/pipelinetest"
)

// exposition is the text format of a registry holding a journal that
// wrote episodes.
func exposition(t *testing.T) ([]byte, *Journal) {
	t.Helper()
	j := open(t, Options{Dir: t.TempDir()})
	eps := numbered(pipelinetest.StreamEpisodes(t), 1, 3)
	for i := range eps {
		j.ObserveEpisode(&eps[i])
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	text, err := testutil.CollectAndFormat(j, expfmt.TypeTextPlain, "sigscope_journal_episodes_total",
		"sigscope_journal_errors_total", "sigscope_journal_dropped_total", "sigscope_journal_skipped_lines_total")
	if err != nil {
		t.Fatal(err)
	}
	return text, j
}

// The counters say what was written, and every one exists from the start
// (at 0) so that increase() sees its first failure.
func TestMetrics(t *testing.T) {
	text, j := exposition(t)
	want := `
# HELP sigscope_journal_episodes_total Episodes written to the node journal (--journal-dir).
# TYPE sigscope_journal_episodes_total counter
sigscope_journal_episodes_total 3
`
	if err := testutil.CollectAndCompare(j, strings.NewReader(want), "sigscope_journal_episodes_total"); err != nil {
		t.Error(err)
	}
	for _, name := range []string{"sigscope_journal_errors_total 0", "sigscope_journal_dropped_total 0", "sigscope_journal_skipped_lines_total 0"} {
		if !bytes.Contains(text, []byte("\n"+name+"\n")) {
			t.Errorf("no %q in\n%s", name, text)
		}
	}
	problems, err := promlint.New(bytes.NewReader(text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// promtool, where installed (the exporter's test installs Debian's).
func TestPromtoolCheckMetrics(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install prometheus)")
	}
	text, _ := exposition(t)
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("promtool check metrics: %v\n%s\n--- exposition:\n%s", err, out, text)
	}
}
