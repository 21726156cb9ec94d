package main

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/sigscope/sigscope/exporter"
)

// runRoot runs the command line with args and returns its stdout.
func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// parseVersion reads "label: value" lines.
func parseVersion(t *testing.T, text string) (map[string]string, []string) {
	t.Helper()
	labels := map[string]string{}
	var order []string
	line := regexp.MustCompile(`^([a-z_]+): +(.*)$`)
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("version output line %q is not \"label: value\":\n%s", l, text)
		}
		labels[m[1]] = m[2]
		order = append(order, m[1])
	}
	return labels, order
}

// buildInfoExposed returns sigscope_build_info's labels as the agent's
// /metrics writes them: the exporter given what serve gives it, in the text
// exposition format, parsed back.
func buildInfoExposed(t *testing.T) map[string]string {
	t.Helper()
	version, revision := buildVersion()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(exporter.New(exporter.Options{Version: version, Revision: revision}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	enc := expfmt.NewEncoder(&text, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	m := regexp.MustCompile(`(?m)^sigscope_build_info\{(.*)\} 1$`).FindStringSubmatch(text.String())
	if m == nil {
		t.Fatalf("no sigscope_build_info ... 1 in the exposition:\n%s", text.String())
	}
	labels := map[string]string{}
	for _, kv := range regexp.MustCompile(`([a-z_]+)="((?:[^"\\]|\\.)*)"`).FindAllStringSubmatch(m[1], -1) {
		labels[kv[1]] = strings.NewReplacer(`\\`, `\`, `\"`, `"`, `\n`, "\n").Replace(kv[2])
	}
	return labels
}

// `sigscope version` prints every label of sigscope_build_info with the
// value the agent's /metrics gives it, version first; the labels are the
// ones docs/metrics.md lists; --version prints the same.
func TestVersion(t *testing.T) {
	out, err := runRoot(t, "version")
	if err != nil {
		t.Fatalf("sigscope version: %v\n%s", err, out)
	}
	got, order := parseVersion(t, out)
	want := buildInfoExposed(t)
	if !maps.Equal(got, want) {
		t.Errorf("sigscope version printed %v; sigscope_build_info says %v", got, want)
	}
	if order[0] != "version" {
		t.Errorf("first line %q, want version", order[0])
	}
	version, revision := buildVersion()
	if got["version"] != version || got["revision"] != revision || got["goversion"] != runtime.Version() {
		t.Errorf("version %q, revision %q, goversion %q; the build says %q, %q, %q",
			got["version"], got["revision"], got["goversion"], version, revision, runtime.Version())
	}

	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `sigscope_build_info` \\| gauge \\| (.*?) \\|").FindSubmatch(doc)
	if row == nil {
		t.Fatal("docs/metrics.md has no sigscope_build_info row")
	}
	var documented []string
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllSubmatch(row[1], -1) {
		documented = append(documented, string(m[1]))
	}
	if g, d := slices.Sorted(maps.Keys(got)), slices.Sorted(slices.Values(documented)); !slices.Equal(g, d) {
		t.Errorf("sigscope version prints the labels %v, docs/metrics.md documents %v", g, d)
	}

	flag, err := runRoot(t, "--version")
	if err != nil || flag != out {
		t.Errorf("sigscope --version printed %q (%v), want what sigscope version prints, %q", flag, err, out)
	}
}

func TestVersionTakesNoArguments(t *testing.T) {
	_, err := runRoot(t, "version", "extra")
	var ue usageError
	if !errors.As(err, &ue) {
		t.Errorf("sigscope version extra: %v, want a usage error (exit 2)", err)
	}
}
