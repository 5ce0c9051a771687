package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	yaml "go.yaml.in/yaml/v3"

	"netspec.dev/netspec/daemon/fleet"
)

// The Grafana dashboard and the Prometheus alerting rules in deploy/ query
// netspec's metrics by name. These tests read every PromQL expression in
// them and check each metric and label it names against the registry the
// watcher builds, so that renaming a metric without updating deploy/ fails.

const (
	dashboardFile = "../deploy/grafana/netspec.json"
	alertsFile    = "../deploy/prometheus/alerts.yaml"
)

// exported is what a registry exports: its metrics by name.
type exported map[string]metricInfo

// metricInfo is what a query may use of a metric.
type metricInfo struct {
	labels []string
	// series: "" for a metric that is no histogram or summary, "histogram"
	// for one (its series are _bucket, _sum, _count), "unknown" for a
	// vector without series when the registry was read.
	series string
}

// scrapeLabels are the labels Prometheus adds to every scraped series.
var scrapeLabels = []string{"instance", "job"}

// notExported are metric names a query may use that no netspec registry
// exports: Prometheus's own series for each scrape target.
var notExported = exported{"up": {}}

// registryMetrics describes the watcher's registry: every metric it can
// export, also vectors that have no series yet, with their label names. The
// client library has no accessor for a descriptor's name, so they are read
// from Desc.String; a format it does not recognise fails the test. Whether a
// metric is a histogram is read from a gathering, after giving the vectors
// this test knows a series; the others' type stays unknown.
func registryMetrics(t *testing.T) exported {
	t.Helper()
	m := newMetrics(time.Minute)
	m.synced("full", time.Millisecond, time.Now())
	m.programming.Observe(0.1)
	m.dnsQuery(0)
	m.applied("0123abcd")
	descs := make(chan *prometheus.Desc)
	go func() {
		m.reg.Describe(descs)
		// A member of a fleet (watch --gossip-listen) is registered
		// once it starts; its descriptors need no member.
		(*fleet.Fleet)(nil).Describe(descs)
		close(descs)
	}()
	re := regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*variableLabels: \{([^}]*)\}\}$`)
	out := exported{}
	for d := range descs {
		s := d.String()
		sub := re.FindStringSubmatch(s)
		if sub == nil {
			t.Fatalf("cannot read a metric name and labels from %s (has the client library changed Desc.String?)", s)
		}
		var labels []string
		for l := range strings.SplitSeq(sub[2], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				labels = append(labels, l)
			}
		}
		out[sub[1]] = metricInfo{labels: labels, series: "unknown"}
	}
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		info := out[f.GetName()]
		info.series = ""
		if t := f.GetType(); t == dto.MetricType_HISTOGRAM || t == dto.MetricType_SUMMARY || t == dto.MetricType_GAUGE_HISTOGRAM {
			info.series = "histogram"
		}
		out[f.GetName()] = info
	}
	for _, name := range []string{"netspec_tree_valid", "netspec_dns_requests_total", "go_goroutines"} {
		if _, ok := out[name]; !ok {
			t.Fatalf("the registry's descriptors lack %s: reading them went wrong", name)
		}
	}
	return out
}

// selector is a metric name in a query and the labels its matchers name.
type selector struct {
	name   string
	labels []string
}

// query is what a PromQL expression names: its metrics and the labels of
// its by, without, on, ignoring and group_left/right clauses.
type query struct {
	selectors []selector
	grouping  []string
}

// parseQuery reads the metric and label names of a PromQL expression as
// Grafana sends it (with $variables). It is a tokenizer, not a parser: it
// tells metric names from functions, keywords, labels, strings, numbers and
// durations, which is all the check needs.
func parseQuery(expr string) (query, error) {
	var q query
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
	}
	i := 0
	skipSpace := func() {
		for i < len(expr) && strings.ContainsRune(" \t\r\n", rune(expr[i])) {
			i++
		}
	}
	ident := func() string {
		j := i
		for i < len(expr) && isIdent(expr[i], i == j) {
			i++
		}
		return expr[j:i]
	}
	str := func() error {
		quote := expr[i]
		for i++; i < len(expr); i++ {
			switch {
			case expr[i] == '\\' && quote != '`':
				i++
			case expr[i] == quote:
				i++
				return nil
			}
		}
		return fmt.Errorf("unterminated string")
	}
	// labelList reads "(a, b)" after by, on, ...
	labelList := func() ([]string, error) {
		skipSpace()
		if i >= len(expr) || expr[i] != '(' {
			return nil, nil // group_left without labels
		}
		i++
		var labels []string
		for {
			skipSpace()
			switch {
			case i >= len(expr):
				return nil, fmt.Errorf("unterminated label list")
			case expr[i] == ')':
				i++
				return labels, nil
			case expr[i] == ',':
				i++
			case isIdent(expr[i], true):
				labels = append(labels, ident())
			default:
				return nil, fmt.Errorf("unexpected %q in a label list", expr[i])
			}
		}
	}
	// matchers reads `{a="x", b=~"$y"}` and returns the label names.
	matchers := func() ([]string, error) {
		i++ // {
		var labels []string
		for {
			skipSpace()
			switch {
			case i >= len(expr):
				return nil, fmt.Errorf("unterminated label matchers")
			case expr[i] == '}':
				i++
				return labels, nil
			case expr[i] == ',':
				i++
			case isIdent(expr[i], true):
				labels = append(labels, ident())
				skipSpace()
				for i < len(expr) && strings.ContainsRune("=!~", rune(expr[i])) {
					i++
				}
				skipSpace()
				if i >= len(expr) || !strings.ContainsRune("\"'`", rune(expr[i])) {
					return nil, fmt.Errorf("label %s: want a quoted value", labels[len(labels)-1])
				}
				if err := str(); err != nil {
					return nil, err
				}
			default:
				return nil, fmt.Errorf("unexpected %q in label matchers", expr[i])
			}
		}
	}
	aggregations := []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
	keywords := []string{"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "Inf", "NaN"}
	for {
		skipSpace()
		if i >= len(expr) {
			return q, nil
		}
		c := expr[i]
		switch {
		case c == '$': // a Grafana variable: $name, ${name} or ${name:format}
			i++
			if i < len(expr) && expr[i] == '{' {
				end := strings.IndexByte(expr[i:], '}')
				if end < 0 {
					return q, fmt.Errorf("unterminated ${")
				}
				i += end + 1
			} else {
				ident()
			}
		case c == '"' || c == '\'' || c == '`':
			if err := str(); err != nil {
				return q, err
			}
		case c == '[': // a range or subquery: durations and variables only
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return q, fmt.Errorf("unterminated [")
			}
			i += end + 1
		case '0' <= c && c <= '9' || c == '.' && i+1 < len(expr) && '0' <= expr[i+1] && expr[i+1] <= '9':
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.' ||
				(expr[i] == '+' || expr[i] == '-') && (expr[i-1] == 'e' || expr[i-1] == 'E')) {
				i++
			}
		case c == '{': // a selector without a metric name
			labels, err := matchers()
			if err != nil {
				return q, err
			}
			q.selectors = append(q.selectors, selector{labels: labels})
		case isIdent(c, true):
			word := ident()
			skipSpace()
			switch {
			case slices.Contains([]string{"by", "without", "on", "ignoring", "group_left", "group_right"}, word):
				labels, err := labelList()
				if err != nil {
					return q, fmt.Errorf("%s: %v", word, err)
				}
				q.grouping = append(q.grouping, labels...)
			case i < len(expr) && expr[i] == '(':
				// a function or an aggregation
			case slices.Contains(keywords, word) || slices.Contains(aggregations, word):
			default:
				sel := selector{name: word}
				if i < len(expr) && expr[i] == '{' {
					labels, err := matchers()
					if err != nil {
						return q, fmt.Errorf("%s: %v", word, err)
					}
					sel.labels = labels
				}
				q.selectors = append(q.selectors, sel)
			}
		default:
			i++ // operators, parentheses, commas
		}
	}
}

// checkQuery returns the problems of an expression: metrics the registry
// does not export, labels those metrics do not have.
func checkQuery(expr string, reg exported) []string {
	q, err := parseQuery(expr)
	if err != nil {
		return []string{fmt.Sprintf("cannot read %q: %v", expr, err)}
	}
	var problems []string
	known := slices.Clone(scrapeLabels) // labels a by (...) may name
	for _, s := range q.selectors {
		if s.name == "" {
			problems = append(problems, "a selector without a metric name: name the metric")
			continue
		}
		info, ok := reg[s.name]
		if !ok {
			info, ok = notExported[s.name]
		}
		labels := info.labels
		if !ok {
			// A histogram's series: name_bucket{le}, name_sum, name_count.
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				base, cut := strings.CutSuffix(s.name, suffix)
				if b, exists := reg[base]; cut && exists && b.series != "" {
					labels, ok = b.labels, true
					if suffix == "_bucket" {
						labels = append(slices.Clone(labels), "le")
					}
				}
			}
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("metric %s: netspec does not export it", s.name))
			continue
		}
		known = append(known, labels...)
		for _, l := range s.labels {
			if !slices.Contains(labels, l) && !slices.Contains(scrapeLabels, l) && l != "__name__" {
				problems = append(problems, fmt.Sprintf("metric %s has no label %s (it has %v)", s.name, l, labels))
			}
		}
	}
	for _, l := range q.grouping {
		if !slices.Contains(known, l) {
			problems = append(problems, fmt.Sprintf("label %s: none of the expression's metrics has it", l))
		}
	}
	if len(q.selectors) == 0 {
		problems = append(problems, "no metric in the expression")
	}
	return problems
}

// TestCheckQuery proves the check finds what it must: a missing metric, a
// histogram suffix on a metric that is not one, a label a metric lacks.
func TestCheckQuery(t *testing.T) {
	reg := exported{
		"netspec_sync_duration_seconds":  {labels: []string{"kind"}, series: "histogram"},
		"netspec_probe_duration_seconds": {labels: []string{"action"}, series: "unknown"},
		"netspec_tree_valid":             {},
		"netspec_dns_requests_total":     {labels: []string{"rcode"}},
		"netspec_applied_revision_info":  {labels: []string{"revision"}},
	}
	for _, tc := range []struct {
		name string
		expr string
		want []string // substrings of the problems, in order; none when empty
	}{
		{name: "gauge", expr: `netspec_tree_valid{instance=~"$instance"} == 0`},
		{name: "histogram quantile", expr: `histogram_quantile(0.99, sum by (le, kind) (rate(netspec_sync_duration_seconds_bucket{kind="full", instance=~"$instance"}[$__rate_interval])))`},
		{name: "histogram mean", expr: `rate(netspec_sync_duration_seconds_sum[5m]) / rate(netspec_sync_duration_seconds_count[5m])`},
		{name: "count of counts", expr: `count(count by (revision) (netspec_applied_revision_info{job="netspec"}))`},
		{name: "time minus a metric the registry lacks", expr: `time() - netspec_sync_last_timestamp_seconds`, want: []string{"metric netspec_sync_last_timestamp_seconds: netspec does not export it"}},
		{name: "missing metric", expr: `sum(rate(netspec_sync_errors_total[5m])) > 0`, want: []string{"metric netspec_sync_errors_total: netspec does not export it"}},
		{name: "missing metric in a string is no metric", expr: `netspec_tree_valid{instance="netspec_nope"}`},
		{name: "suffix on a gauge", expr: `netspec_tree_valid_bucket`, want: []string{"metric netspec_tree_valid_bucket"}},
		{name: "histogram vector without series", expr: `netspec_probe_duration_seconds_bucket{action="http"}`},
		{name: "label the metric lacks", expr: `netspec_dns_requests_total{result="ok"}`, want: []string{"metric netspec_dns_requests_total has no label result"}},
		{name: "le on a counter", expr: `netspec_dns_requests_total{le="1"}`, want: []string{"has no label le"}},
		{name: "grouping by a label no metric has", expr: `sum by (kind, result) (rate(netspec_sync_duration_seconds_count[5m]))`, want: []string{"label result: none of the expression's metrics has it"}},
		{name: "on and group_left", expr: `netspec_tree_valid * on (instance) group_left (revision) netspec_applied_revision_info`},
		{name: "keywords and numbers", expr: `netspec_tree_valid offset 5m == bool 1e3 or netspec_tree_valid and 0.5`},
		{name: "up", expr: `up{job="netspec"} == 0`},
		{name: "nameless selector", expr: `{__name__=~"netspec_.*"}`, want: []string{"a selector without a metric name"}},
		{name: "no metric", expr: `vector(1)`, want: []string{"no metric in the expression"}},
		{name: "unterminated", expr: `netspec_tree_valid{instance="x}`, want: []string{"cannot read"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkQuery(tc.expr, reg)
			if len(got) != len(tc.want) {
				t.Fatalf("checkQuery(%s) = %q, want %d problems %q", tc.expr, got, len(tc.want), tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// dashboard is the part of a Grafana dashboard JSON model the test reads.
type dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	Targets    []struct {
		Expr       string      `json:"expr"`
		RefID      string      `json:"refId"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// TestDashboardMetricsExist checks every query of the Grafana dashboard:
// each names metrics and labels netspec exports, on the ${datasource}
// chosen by the dashboard's variable.
func TestDashboardMetricsExist(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("%s: uid %q, title %q, schemaVersion %d: want a uid, a title and schemaVersion >= 36", dashboardFile, d.UID, d.Title, d.SchemaVersion)
	}
	reg := registryMetrics(t)

	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		switch v.Type {
		case "datasource":
			if string(v.Query) != `"prometheus"` {
				t.Errorf("variable %s: query %s, want \"prometheus\"", v.Name, v.Query)
			}
		case "query":
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil {
				if err := json.Unmarshal(v.Query, &q.Query); err != nil {
					t.Errorf("variable %s: query %s: %v", v.Name, v.Query, err)
					continue
				}
			}
			// label_values(METRIC_OR_SELECTOR, LABEL)
			inner, ok := strings.CutPrefix(q.Query, "label_values(")
			comma := strings.LastIndexByte(inner, ',')
			if !ok || !strings.HasSuffix(inner, ")") || comma < 0 {
				t.Errorf("variable %s: query %q: want label_values(metric, label)", v.Name, q.Query)
				continue
			}
			expr, label := inner[:comma], strings.TrimSpace(strings.TrimSuffix(inner[comma+1:], ")"))
			for _, p := range checkQuery(fmt.Sprintf("count by (%s) (%s)", label, expr), reg) {
				t.Errorf("variable %s: %s", v.Name, p)
			}
			if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
				t.Errorf("variable %s: datasource %+v, want uid ${datasource}", v.Name, v.Datasource)
			}
		}
	}
	for _, want := range []string{"datasource", "instance"} {
		if !vars[want] {
			t.Errorf("no variable %q", want)
		}
	}

	ids := map[int]string{}
	queries := 0
	var walk func([]panel)
	walk = func(panels []panel) {
		for _, p := range panels {
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if other, dup := ids[p.ID]; dup {
				t.Errorf("%s: id taken by %q", where, other)
			}
			ids[p.ID] = p.Title
			walk(p.Panels)
			if p.Type == "row" || p.Type == "text" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no queries", where)
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("%s: datasource %+v, want uid ${datasource}", where, p.Datasource)
			}
			for _, tg := range p.Targets {
				queries++
				if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
					t.Errorf("%s, query %s: datasource %+v, want uid ${datasource}", where, tg.RefID, tg.Datasource)
				}
				for _, prob := range checkQuery(tg.Expr, reg) {
					t.Errorf("%s, query %s: %s\n\t%s", where, tg.RefID, prob, tg.Expr)
				}
			}
		}
	}
	walk(d.Panels)
	if queries == 0 {
		t.Fatalf("%s: no queries found", dashboardFile)
	}
	t.Logf("%d panels, %d queries checked", len(ids), queries)
}

// TestAlertsMetricsExist checks every expression of the Prometheus alerting
// rules the same way, and that each rule says what to do.
func TestAlertsMetricsExist(t *testing.T) {
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Record      string            `yaml:"record"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	reg := registryMetrics(t)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			where := fmt.Sprintf("group %s, alert %s", g.Name, r.Alert)
			if r.Alert == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: want an alert name, a severity label, a summary and a description", where)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", where, r.For, err)
				}
			}
			for _, p := range checkQuery(r.Expr, reg) {
				t.Errorf("%s: %s\n\t%s", where, p, r.Expr)
			}
		}
	}
	if n == 0 {
		t.Fatalf("%s: no rules", alertsFile)
	}
}
