package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/model"

	"github.com/sigscope/sigscope/test/testutil"
)

// A container whose pod and container names (Kubernetes labels), PID 1's
// comm and command line carry terminal escapes, a newline, invalid UTF-8
// and a 10 kB value, stopped while trace, timeline, audit and the agent
// watch: every table keeps one line per row with no raw control byte,
// every JSON line parses as valid UTF-8, and the agent's metric labels
// parse and stay within their bound.
func TestHostileNames(t *testing.T) {
	img := busyboxImage(t)
	const evil = "\x1b[31mred\x1b]0;title\x07\nnext\xff"
	big := strings.Repeat("A", 10<<10)
	name := "e2e-hostile"
	script := `printf '\033[2Jev\nil\377' > /proc/$$/comm; trap 'exit 0' TERM; sleep 1000 & wait`

	port, agentErr := startServe(t, "--pod-labels")
	agentURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(t, agentURL+"/readyz")

	// No --container: the container's name is the hostile label's.
	tr := testutil.StartSigscope(t, "trace", "-o", "table", "--signals", "TERM,KILL")
	tl := startTimeline(t)
	id := runContainer(t, name, "--stop-timeout", "5",
		"--label", "io.kubernetes.pod.name="+evil+"pod"+big,
		"--label", "io.kubernetes.pod.namespace="+evil+"ns",
		"--label", "io.kubernetes.container.name="+evil+"ctr",
		"--label", "note="+big,
		img, "sh", "-c", script, "sh", evil+big)
	comm, err := exec.Command("sh", "-c", "cat /proc/$(docker inspect -f '{{.State.Pid}}' "+name+")/comm").Output()
	if err != nil || !bytes.Contains(comm, []byte("\x1b[2J")) {
		t.Fatalf("PID 1's comm %q (%v): the hostile comm was not set", comm, err)
	}

	// audit, table and JSON.
	out, err := exec.Command(sigscope(t), "audit").Output()
	if err != nil {
		t.Fatalf("sigscope audit: %v", err)
	}
	checkTable(t, "audit", out, nil)
	rows := 0
	for _, line := range bytes.Split(out, []byte("\n")) {
		if bytes.Contains(line, []byte(`\x1b[31mred`)) {
			rows++
			if n := utf8.RuneCount(line); n > 300 {
				t.Errorf("audit row of %d characters: the 10 kB names are not cut: %.400s", n, line)
			}
		}
	}
	if rows != 1 {
		t.Errorf("audit table: %d rows show the escaped name, want 1:\n%.2000s", rows, out)
	}
	out, err = exec.Command(sigscope(t), "audit", "-o", "json").Output()
	if err != nil {
		t.Fatalf("sigscope audit -o json: %v", err)
	}
	checkJSONLines(t, "audit -o json", out)

	docker(t, "stop", "-t", "5", name)
	tr.WaitLine(t, "PID 1's exit", func(line []byte) bool {
		return bytes.Contains(line, []byte(" exit ")) && bytes.Contains(line, []byte(`\x1b[2Jev\x0ail`))
	})

	lines := tr.Stop(t)
	table := bytes.Join(lines, []byte("\n"))
	checkTable(t, "trace", table, regexp.MustCompile(`^(TIME|\d\d:\d\d:\d\d\.\d{6} )`))
	if n := bytes.Count(table, []byte(`\x1b[2Jev\x0ail`)); n < 2 {
		t.Errorf("trace: %d rows show PID 1's escaped comm, want the SIGTERM and its exit at least:\n%.3000s", n, table)
	}
	eps := tl.stop(t, id)
	ep := episodeOf(t, eps, id)
	checkJSONLines(t, "timeline -o json", ep.raw)
	if ep.Outcome != "graceful" {
		t.Errorf("outcome %s, want graceful", ep.Outcome)
	}
	if !strings.Contains(string(ep.raw), `\u001b[31mred`) || !strings.Contains(string(ep.raw), `\\xff`) {
		t.Errorf("timeline JSON should keep the escape as \\u001b and the invalid byte as \\xff: %.300s", ep.raw)
	}

	// The agent: the exposition parses, label values are valid UTF-8 and
	// bounded, and the stop was counted under the cleaned labels.
	var metrics []byte
	testutil.Poll(200*time.Millisecond, func() bool {
		resp, err := http.Get(agentURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return bytes.Contains(metrics, []byte("sigscope_container_stops_total{")) && bytes.Contains(metrics, []byte("red"))
	})
	families, err := parseMetrics(metrics)
	if err != nil {
		t.Fatal(err)
	}
	found, longest := false, 0
	for name, f := range families {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				v := l.GetValue()
				longest = max(longest, len(v))
				if !utf8.ValidString(v) || len(v) > 256 || strings.ContainsAny(v, "\x1b\n\x07") {
					t.Errorf("%s{%s=%q}: not valid UTF-8, over 256 bytes, or a control character", name, l.GetName(), v)
				}
				if name == "sigscope_container_stops_total" && l.GetName() == "pod" && strings.Contains(v, "red") {
					found = true
				}
			}
		}
		if !model.LegacyValidation.IsValidMetricName(name) {
			t.Errorf("metric name %q", name)
		}
	}
	if !found {
		t.Errorf("no sigscope_container_stops_total series for the hostile pod:\n%s\nagent:\n%s", grepLines(metrics, "container_stops_total"), tail(agentErr.String()))
	}
	t.Logf("longest label value %d bytes; the pod name was %d bytes", longest, len(evil)+3+len(big))
}

// checkTable: no raw control byte but the newlines between rows, no invalid
// UTF-8, and (with row) every line looks like a row or the header.
func checkTable(t *testing.T, what string, out []byte, row *regexp.Regexp) {
	t.Helper()
	if !utf8.Valid(out) {
		t.Errorf("%s: output is not valid UTF-8", what)
	}
	for i, line := range bytes.Split(bytes.TrimRight(out, "\n"), []byte("\n")) {
		if bytes.ContainsAny(line, "\x1b\x07\r\x00") {
			t.Errorf("%s line %d has a raw control byte: %q", what, i+1, line)
		}
		if row != nil && !row.Match(line) {
			t.Errorf("%s line %d is no row (a newline got through?): %q", what, i+1, line)
		}
	}
}

func checkJSONLines(t *testing.T, what string, out []byte) {
	t.Helper()
	for i, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		if !utf8.Valid(line) || !json.Valid(line) {
			t.Errorf("%s line %d: not valid UTF-8 JSON: %.200q", what, i+1, line)
		}
	}
}

func grepLines(b []byte, sub string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
