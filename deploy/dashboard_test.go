package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sigscope/sigscope/episodes/timeline"
)

const dashboardPath = "../docs/grafana-dashboard.json"

var metricName = regexp.MustCompile(`\bsigscope_[a-zA-Z0-9_]+`)

// documentedMetrics returns the metric names docs/metrics.md mentions.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range metricName.FindAllString(string(data), -1) {
		names[m] = true
	}
	if len(names) == 0 {
		t.Fatal("docs/metrics.md names no sigscope_ metric")
	}
	return names
}

type dashboard struct {
	Title      string  `json:"title"`
	Links      []link  `json:"links"`
	UID        string  `json:"uid"`
	Schema     int     `json:"schemaVersion"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
	Links  []link  `json:"links"`
}

// link is a dashboard link or a panel link.
type link struct {
	Title string `json:"title"`
	Type  string `json:"type"` // dashboard links: "link" for a URL
	URL   string `json:"url"`
}

func loadDashboard(t *testing.T) *dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	d := &dashboard{}
	if err := json.Unmarshal(data, d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	return d
}

func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// usesDatasourceVar reports whether ds points at the dashboard's data source
// variable rather than at one Grafana's own data source.
func usesDatasourceVar(ds *datasource) bool {
	return ds != nil && ds.Type == "prometheus" && (ds.UID == "${datasource}" || ds.UID == "$datasource")
}

// balanced checks (), {} and [] outside string literals.
func balanced(expr string) bool {
	var stack []rune
	pairs := map[rune]rune{')': '(', '}': '{', ']': '['}
	inString := false
	for i, r := range expr {
		switch {
		case r == '"' && (i == 0 || expr[i-1] != '\\'):
			inString = !inString
		case inString:
		case r == '(' || r == '{' || r == '[':
			stack = append(stack, r)
		case r == ')' || r == '}' || r == ']':
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0 && !inString
}

var outcomeMatcher = regexp.MustCompile(`outcome\s*=~?\s*"([^"]*)"`)

func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	documented := documentedMetrics(t)
	if d.Title == "" || d.UID == "" || d.Schema == 0 {
		t.Errorf("title %q, uid %q, schemaVersion %d: all required", d.Title, d.UID, d.Schema)
	}

	var dsVar bool
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Name == "datasource" && string(v.Query) == `"prometheus"` {
			dsVar = true
		}
		if v.Type == "query" && !usesDatasourceVar(v.Datasource) {
			t.Errorf("variable %s does not query through $datasource", v.Name)
		}
	}
	if !dsVar {
		t.Errorf("no Prometheus data source variable named datasource")
	}

	outcomes := []string{}
	for _, o := range []timeline.Outcome{timeline.OutcomeOOMKilled, timeline.OutcomeKilled, timeline.OutcomeGraceful,
		timeline.OutcomeHandlerTimeout, timeline.OutcomeIgnoredByInit, timeline.OutcomeExited} {
		outcomes = append(outcomes, string(o))
	}

	ids := map[int]bool{}
	used := map[string]bool{}
	var exprs []string
	for _, p := range allPanels(d.Panels) {
		if p.Type == "row" {
			continue
		}
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v off the 24-column grid", p.Title, p.GridPos)
		}
		if !usesDatasourceVar(p.Datasource) {
			t.Errorf("panel %q: data source %+v, want the $datasource variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			where := p.Title + "/" + tg.RefID
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("%s: empty query", where)
				continue
			}
			if !usesDatasourceVar(tg.Datasource) {
				t.Errorf("%s: target data source %+v, want the $datasource variable", where, tg.Datasource)
			}
			if !balanced(tg.Expr) {
				t.Errorf("%s: unbalanced brackets or quotes: %s", where, tg.Expr)
			}
			exprs = append(exprs, tg.Expr)
			names := metricName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("%s: queries no sigscope_ metric: %s", where, tg.Expr)
			}
			for _, n := range names {
				base := n
				if !documented[base] {
					for _, suffix := range []string{"_bucket", "_sum", "_count"} {
						if b, ok := strings.CutSuffix(n, suffix); ok && documented[b] {
							base = b
						}
					}
				}
				if !documented[base] {
					t.Errorf("%s: metric %s is not documented", where, n)
				}
				used[base] = true
			}
			for _, m := range outcomeMatcher.FindAllStringSubmatch(tg.Expr, -1) {
				for _, o := range strings.Split(m[1], "|") {
					if !slices.Contains(outcomes, o) {
						t.Errorf("%s: outcome %q is not one of the timeline's %v", where, o, outcomes)
					}
				}
			}
		}
	}

	// The key panels of issue 5.
	all := strings.Join(exprs, "\n")
	for _, want := range []struct{ what, fragment string }{
		{"ignored stop signals", "rate(sigscope_pid1_ignored_signals_total"},
		{"forced kills", `sigscope_container_stops_total{outcome=~"ignored_by_init|handler_timeout|killed"`},
		{"stop duration", "histogram_quantile(0.95, sum by (le) (rate(sigscope_container_stop_duration_seconds_bucket"},
		{"drops", "sigscope_events_dropped_total"},
		{"cascade kills", "sigscope_pidns_cascade_kills_total"},
		{"OOM kills", "sigscope_oom_kills_total"},
	} {
		if !strings.Contains(all, want.fragment) {
			t.Errorf("no %s panel (a query containing %s)", want.what, want.fragment)
		}
	}
}

// The dashboard links docs/alerts.md, and each panel links the alerts that
// read a metric it shows, at their sections of docs/alerts.md.
func TestDashboardLinksAlerts(t *testing.T) {
	d := loadDashboard(t)
	alertsURL := strings.TrimSuffix(runbookPrefix, "#")
	if !slices.ContainsFunc(d.Links, func(l link) bool { return l.Type == "link" && l.URL == alertsURL && l.Title != "" }) {
		t.Errorf("no dashboard link to %s: %+v", alertsURL, d.Links)
	}

	// The metrics each alert reads, through the recording rules it reads.
	g, _ := readRules(t, rulesFile)
	recordedFrom := map[string][]string{}
	alertMetrics := map[string][]string{}
	for _, gr := range g.Groups {
		for _, r := range gr.Rules {
			ms := metricName.FindAllString(r.Expr, -1)
			for rec, from := range recordedFrom {
				if strings.Contains(r.Expr, rec) {
					ms = append(ms, from...)
				}
			}
			if r.Record != "" {
				recordedFrom[r.Record] = ms
			} else {
				alertMetrics[r.Alert] = ms
			}
		}
	}
	anchors, _ := docAnchors(t)
	linked := 0
	for _, p := range allPanels(d.Panels) {
		var exprs []string
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
		shows := strings.Join(exprs, "\n")
		var links []string
		for _, l := range p.Links {
			anchor, ok := strings.CutPrefix(l.URL, runbookPrefix)
			if !ok {
				continue
			}
			linked++
			if !anchors[anchor] {
				t.Errorf("panel %q links %s, no section of docs/alerts.md", p.Title, l.URL)
			}
			if l.Title == "" {
				t.Errorf("panel %q: link %s has no title", p.Title, l.URL)
			}
			links = append(links, anchor)
		}
		for alert, ms := range alertMetrics {
			for _, m := range ms {
				if regexp.MustCompile(`\b`+m+`\b`).MatchString(shows) && !slices.Contains(links, strings.ToLower(alert)) {
					t.Errorf("panel %q shows %s but does not link %s, which alerts on it", p.Title, m, alert)
					break
				}
			}
		}
	}
	if linked == 0 {
		t.Errorf("no panel links an alert")
	}
}
