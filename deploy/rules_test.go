package deploy

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sigscope/sigscope/episodes/timeline"
)

const (
	rulesFile     = "prometheus/sigscope-alerts.yaml"
	rulesTestFile = "prometheus/sigscope-alerts_test.yaml"
	// The chart's copy of rulesFile, which its PrometheusRule embeds
	// (.Files.Get cannot read outside the chart); render.sh writes it.
	chartRulesFile = "chart/sigscope/files/sigscope-alerts.yaml"
	// The chart rendered with prometheusRule.enabled, the PrometheusRule only.
	manifestPrometheusRule = "manifests/sigscope-prometheusrule.yaml"
	alertsDoc              = "../docs/alerts.md"
	runbookPrefix          = "https://github.com/sigscope/sigscope/blob/main/docs/alerts.md#"
)

// ruleGroups is a Prometheus rules file, and the spec of a PrometheusRule:
// the fields Prometheus reads, decoded strictly so that a misspelt one
// fails here rather than being ignored by Prometheus.
type ruleGroups struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Record      string            `json:"record,omitempty"`
	Alert       string            `json:"alert,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ruleTests is the part of a promtool test file this test reads.
type ruleTests struct {
	RuleFiles          []string `json:"rule_files"`
	EvaluationInterval string   `json:"evaluation_interval"`
	Tests              []struct {
		Name        string `json:"name"`
		Interval    string `json:"interval"`
		InputSeries []struct {
			Series string `json:"series"`
			Values string `json:"values"`
		} `json:"input_series"`
		// PromQLExprTests hold a recording rule's own values (promtool's
		// promql_expr_test).
		PromQLExprTests []struct {
			Expr       string `json:"expr"`
			EvalTime   string `json:"eval_time"`
			ExpSamples []struct {
				Labels string  `json:"labels"`
				Value  float64 `json:"value"`
			} `json:"exp_samples"`
		} `json:"promql_expr_test"`
		AlertRuleTests []struct {
			EvalTime  string `json:"eval_time"`
			Alertname string `json:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `json:"exp_labels"`
				ExpAnnotations map[string]string `json:"exp_annotations"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func readRules(t *testing.T, path string) (*ruleGroups, []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	g := &ruleGroups{}
	strict(t, path, data, g)
	return g, data
}

func alerts(g *ruleGroups) []rule {
	var out []rule
	for _, gr := range g.Groups {
		for _, r := range gr.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

// docAnchors returns the GitHub anchors of docs/alerts.md's headings.
func docAnchors(t *testing.T) (map[string]bool, []string) {
	t.Helper()
	data, err := os.ReadFile(alertsDoc)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	var alertSections []string
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, l := range strings.Split(string(data), "\n") {
		h, ok := strings.CutPrefix(l, "## ")
		if !ok {
			continue
		}
		anchors[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
		if strings.HasPrefix(h, "Sigscope") {
			alertSections = append(alertSections, h)
		}
	}
	return anchors, alertSections
}

// Every alert says how bad it is and what to do, and its runbook is a
// section of docs/alerts.md; every such section is an alert's.
func TestAlertRulesDocumented(t *testing.T) {
	g, _ := readRules(t, rulesFile)
	as := alerts(g)
	if len(as) == 0 {
		t.Fatalf("%s has no alert", rulesFile)
	}
	anchors, sections := docAnchors(t)
	var names []string
	for _, a := range as {
		names = append(names, a.Alert)
		if s := a.Labels["severity"]; !slices.Contains([]string{"info", "warning", "critical"}, s) {
			t.Errorf("%s: severity %q, want info, warning or critical", a.Alert, s)
		}
		for _, k := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(a.Annotations[k]) == "" {
				t.Errorf("%s: no %s annotation", a.Alert, k)
			}
		}
		anchor, ok := strings.CutPrefix(a.Annotations["runbook_url"], runbookPrefix)
		if !ok || anchor != strings.ToLower(a.Alert) || !anchors[anchor] {
			t.Errorf("%s: runbook_url %q, want %s%s, a section of docs/alerts.md", a.Alert, a.Annotations["runbook_url"], runbookPrefix, strings.ToLower(a.Alert))
		}
	}
	for _, s := range sections {
		if !slices.Contains(names, s) {
			t.Errorf("docs/alerts.md has a section %q, which is no alert of %s", s, rulesFile)
		}
	}
}

// The rules read only metrics docs/metrics.md describes, with the labels
// it gives them; stop outcomes are the timeline's.
func TestAlertRulesMetrics(t *testing.T) {
	g, _ := readRules(t, rulesFile)
	documented := documentedMetrics(t)
	// Recorded series (level:metric:operations) are the file's own, each
	// defined before the rules that read it.
	recorded := regexp.MustCompile(`\b[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_:]+`)
	defined := map[string]bool{}
	for _, gr := range g.Groups {
		for _, r := range gr.Rules {
			name := r.Alert + r.Record
			if !balanced(r.Expr) {
				t.Errorf("%s: unbalanced brackets or quotes: %s", name, r.Expr)
			}
			for _, m := range recorded.FindAllString(r.Expr, -1) {
				if !defined[m] {
					t.Errorf("%s reads %s, which no rule above it records", name, m)
				}
			}
			for _, m := range metricName.FindAllString(recorded.ReplaceAllString(r.Expr, ""), -1) {
				if !documented[m] {
					t.Errorf("%s: metric %s is not documented in docs/metrics.md", name, m)
				}
			}
			for _, m := range outcomeMatcher.FindAllStringSubmatch(r.Expr, -1) {
				for _, o := range strings.Split(m[1], "|") {
					if !slices.Contains(timelineOutcomes(), o) {
						t.Errorf("%s: outcome %q is not one of the timeline's %v", name, o, timelineOutcomes())
					}
				}
			}
			if r.Record != "" {
				defined[r.Record] = true
			}
		}
	}
}

// Every alert has a promtool test where it fires and one where it does not.
func TestAlertRulesTested(t *testing.T) {
	g, _ := readRules(t, rulesFile)
	data, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests ruleTests
	strict(t, rulesTestFile, data, &tests)
	if !slices.Equal(tests.RuleFiles, []string{filepath.Base(rulesFile)}) {
		t.Errorf("%s tests %v, want %s", rulesTestFile, tests.RuleFiles, filepath.Base(rulesFile))
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTests {
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
			for _, e := range at.ExpAlerts {
				// promtool compares annotations exactly, but only those
				// listed: all of them must be.
				if len(e.ExpAnnotations) == 0 {
					t.Errorf("%s: %s at %s: an expected alert without its annotations", tc.Name, at.Alertname, at.EvalTime)
				}
			}
		}
	}
	for _, a := range alerts(g) {
		if !fires[a.Alert] {
			t.Errorf("%s: no promtool test where it fires", a.Alert)
		}
		if !quiet[a.Alert] {
			t.Errorf("%s: no promtool test where it does not fire", a.Alert)
		}
	}
}

// promtool itself checks the rules and runs their unit tests, as `make
// test-rules` does. Without promtool (Debian's prometheus package) the test
// skips, or fails with SIGSCOPE_REQUIRE_PRIVILEGED=1 (CI).
func TestAlertRulesPromtool(t *testing.T) {
	promtoolRules(t, rulesFile, rulesTestFile)
}

// promtoolRules runs promtool check rules on rules and promtool test rules
// on tests.
func promtoolRules(t *testing.T, rules, tests string) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		msg := "promtool is not installed (apt-get install prometheus): the alerting rules are not checked"
		if os.Getenv("SIGSCOPE_REQUIRE_PRIVILEGED") == "1" {
			t.Fatalf("%s, and SIGSCOPE_REQUIRE_PRIVILEGED=1 makes that a failure", msg)
		}
		t.Skip(msg + "; SIGSCOPE_REQUIRE_PRIVILEGED=1 makes this a failure")
	}
	for _, args := range [][]string{{"check", "rules", rules}, {"test", "rules", tests}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// checkPrometheusRule checks that the rendered objects are one
// PrometheusRule named name, labelled as the chart's objects are (and with
// extraLabels), whose rules are the rules file's with the agent alerts
// reading up{job="job"}.
func checkPrometheusRule(t *testing.T, o *objects, name, job string, extraLabels map[string]string) *prometheusRule {
	t.Helper()
	if len(o.prometheusRules) != 1 {
		t.Fatalf("%d PrometheusRules, want 1", len(o.prometheusRules))
	}
	pr := o.prometheusRules[0]
	if pr.Metadata.Name != name || pr.Metadata.Namespace != namespace {
		t.Errorf("PrometheusRule %s/%s, want %s/%s", pr.Metadata.Namespace, pr.Metadata.Name, namespace, name)
	}
	for k, v := range extraLabels {
		if pr.Metadata.Labels[k] != v {
			t.Errorf("PrometheusRule label %s=%q, want %q", k, pr.Metadata.Labels[k], v)
		}
	}
	if pr.Metadata.Labels["app.kubernetes.io/part-of"] != "sigscope" {
		t.Errorf("PrometheusRule labels %v lack the chart's", pr.Metadata.Labels)
	}
	want, _ := readRules(t, rulesFile)
	agentAlerts := map[string]string{
		"SigscopeAgentDown":   `up{job="sigscope"} == 0`,
		"SigscopeAgentAbsent": `absent(up{job="sigscope"})`,
	}
	for i, g := range want.Groups {
		for j, r := range g.Rules {
			if e, ok := agentAlerts[r.Alert]; ok {
				if r.Expr != e {
					t.Fatalf("%s: %s expr %q, want %q (what the chart replaces)", rulesFile, r.Alert, r.Expr, e)
				}
				want.Groups[i].Rules[j].Expr = strings.Replace(e, `"sigscope"`, `"`+job+`"`, 1)
				delete(agentAlerts, r.Alert)
			}
		}
	}
	if len(agentAlerts) != 0 {
		t.Errorf("%s lacks %v", rulesFile, slices.Sorted(maps.Keys(agentAlerts)))
	}
	if !reflect.DeepEqual(pr.Spec, *want) {
		got, _ := yaml.Marshal(pr.Spec)
		exp, _ := yaml.Marshal(want)
		t.Errorf("PrometheusRule spec is not %s with job %q:\n--- got\n%s\n--- want\n%s", rulesFile, job, got, exp)
	}
	return pr
}

// The committed PrometheusRule manifest (a release named sigscope) holds the
// rules file's rules exactly: promtool checks them, and the unit tests pass
// on them as they are in the manifest.
func TestPrometheusRuleManifest(t *testing.T) {
	o := readManifest(t, manifestPrometheusRule)
	if n := len(o.daemonSets) + len(o.services) + len(o.serviceAccounts) + len(o.clusterRoles) + len(o.serviceMonitors); n != 0 {
		t.Errorf("%s holds %d objects besides the PrometheusRule", manifestPrometheusRule, n)
	}
	pr := checkPrometheusRule(t, o, "sigscope", "sigscope", nil)
	dir := t.TempDir()
	spec, err := yaml.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(dir, filepath.Base(rulesFile))
	if err := os.WriteFile(rules, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(rulesTestFile)), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	promtoolRules(t, rules, filepath.Join(dir, filepath.Base(rulesTestFile)))
}

// prometheusRule.enabled renders the rules with the release's job and the
// labels asked for; prometheusRule.job overrides the job.
func TestChartPrometheusRule(t *testing.T) {
	o := decode(t, "fullnameOverride", helmTemplate(t, "--set", "prometheusRule.enabled=true", "--set", "fullnameOverride=watch",
		"--set", "prometheusRule.labels.release=prom", "--set", "serviceMonitor.enabled=true"))
	checkPrometheusRule(t, o, "watch", "watch", map[string]string{"release": "prom"})
	if len(o.services) != 1 || o.services[0].Name != "watch" {
		t.Errorf("the Service (the ServiceMonitor's job) is not named watch")
	}
	o = decode(t, "prometheusRule.job", helmTemplate(t, "--set", "prometheusRule.enabled=true", "--set", "prometheusRule.job=node-signals"))
	checkPrometheusRule(t, o, "sigscope", "node-signals", nil)
}

// The chart embeds a copy of the rules file; render.sh (make manifests)
// writes it, and it must not drift.
func TestChartRulesCopy(t *testing.T) {
	want, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(chartRulesFile)
	if err != nil {
		t.Fatalf("%v: run `make manifests`", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s: run `make manifests` and commit", chartRulesFile, rulesFile)
	}
}

// timelineOutcomes lists every outcome an episode can have.
func timelineOutcomes() []string {
	var out []string
	for _, o := range timeline.Outcomes {
		out = append(out, string(o))
	}
	return out
}
