package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// The operator files in testdata/deploy: Prometheus alerting rules
// (latch-alerts.yml, with promtool unit tests in latch-alerts.test.yml)
// and a Grafana dashboard (latch-dashboard.json). These tests keep them
// true to what a member exports.

const (
	alertRulesFile = "../testdata/deploy/latch-alerts.yml"
	alertTestsFile = "../testdata/deploy/latch-alerts.test.yml"
	dashboardFile  = "../testdata/deploy/latch-dashboard.json"
)

// prometheusSeries are series Prometheus itself makes for every scrape
// target; latch cannot export them, and rules may name them. "up" is how
// a member that cannot be scraped shows at all.
var prometheusSeries = []string{"up"}

// TestDeployRulesNameExportedSeries starts three members in this process,
// makes them export what they export under load (requests, commits, an
// election), and checks that every series the alert rules and the
// dashboard name is one of them: the /metrics scrape (with a histogram's
// _bucket, _sum and _count) plus every descriptor registered with the
// Prometheus registry, for the series that appear only after an event
// (a vector with no child yet). It then shows the check catches a
// misspelt series in a rule and in a panel.
func TestDeployRulesNameExportedSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	exported := exportedSeries(t)

	rules, err := os.ReadFile(alertRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	ruleExprs, err := ruleExpressions(string(rules))
	if err != nil {
		t.Fatal(err)
	}
	dash, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	dashExprs, err := dashboardExpressions(dash)
	if err != nil {
		t.Fatal(err)
	}
	if len(ruleExprs) < 10 || len(dashExprs) < 10 {
		t.Fatalf("%d rule and %d dashboard expressions: the files were not read", len(ruleExprs), len(dashExprs))
	}
	if bad := unknownSeries(ruleExprs, exported); len(bad) > 0 {
		t.Errorf("%s names series no member exports: %v", alertRulesFile, bad)
	}
	if bad := unknownSeries(dashExprs, exported); len(bad) > 0 {
		t.Errorf("%s names series no member exports: %v", dashboardFile, bad)
	}

	// The rules cover what an operator must be woken for.
	named := map[string]bool{}
	for _, e := range ruleExprs {
		for _, n := range seriesNames(e) {
			named[n] = true
		}
	}
	for _, want := range []string{
		"latch_is_leader", "latch_term", "latch_state_hash_mismatch", "latch_member_failed",
		"latch_storage_no_space", "latch_apply_errors_total", "up", "latch_applied_index",
		"latch_sessions_total", "latch_refused_total", "latch_watch_backlog_resyncs_total",
	} {
		if !named[want] {
			t.Errorf("no alert rule watches %s", want)
		}
	}

	// A planted misspelling is caught, in a rule and in a panel.
	planted := strings.Replace(string(rules), "latch_is_leader", "latch_is_leadr", 1)
	exprs, err := ruleExpressions(planted)
	if err != nil {
		t.Fatal(err)
	}
	if bad := unknownSeries(exprs, exported); !slices.Equal(bad, []string{"latch_is_leadr"}) {
		t.Errorf("a rule naming latch_is_leadr: check reported %v", bad)
	}
	plantedDash := strings.Replace(string(dash), "latch_locks_waiting", "latch_locks_queued", 1)
	if exprs, err = dashboardExpressions([]byte(plantedDash)); err != nil {
		t.Fatal(err)
	}
	if bad := unknownSeries(exprs, exported); !slices.Equal(bad, []string{"latch_locks_queued"}) {
		t.Errorf("a panel naming latch_locks_queued: check reported %v", bad)
	}
}

// exportedSeries runs three in-process members under a little load and
// returns every series name they export.
func exportedSeries(t *testing.T) map[string]bool {
	t.Helper()
	c := servertest.StartCluster(t, 3, nil)
	leader := c.Server(c.WaitLeader())
	c.WaitMembers()
	conf, err := session.ClientTLS(c.Certs().CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), servertest.WaitTimeout)
	defer cancel()
	cl, err := client.Dial(ctx, client.Config{Endpoints: []string{leader.ClientAddr()}, TLS: conf})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 5 {
		p := fmt.Sprintf("/deploy-k%d", i)
		if _, err := cl.Create(ctx, p, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := cl.Get(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	out := map[string]bool{}
	code, body := httpGet(t, c, "https://"+leader.HTTPAddr()+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\w+)$`).FindAllStringSubmatch(body, -1) {
		out[m[1]] = true
		switch m[2] {
		case "histogram":
			out[m[1]+"_bucket"], out[m[1]+"_sum"], out[m[1]+"_count"] = true, true, true
		case "summary":
			out[m[1]+"_sum"], out[m[1]+"_count"] = true, true
		}
	}
	if !out["latch_request_duration_seconds_bucket"] || !out["raft_commitTime_bucket"] {
		t.Fatalf("the scrape lacks the series the load makes:\n%s", body)
	}
	reg, ok := prometheus.DefaultRegisterer.(*prometheus.Registry)
	if !ok {
		t.Fatal("the default registerer is not a *prometheus.Registry")
	}
	descs := make(chan *prometheus.Desc)
	go func() {
		reg.Describe(descs)
		close(descs)
	}()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			out[m[1]] = true
		}
	}
	for _, n := range prometheusSeries {
		out[n] = true
	}
	return out
}

// TestDeployRulesPromtool runs promtool (Debian's prometheus package) on
// the rules: their syntax, their unit tests, and the dashboard's queries
// (as recording rules, which promtool parses the same way).
func TestDeployRulesPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("no promtool on PATH: the alert rules' check needs Debian's prometheus package (.ci/run installs it: apt-get install prometheus)")
	}
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run(".", "check", "rules", alertRulesFile)
	run(filepath.Dir(alertTestsFile), "test", "rules", filepath.Base(alertTestsFile))

	dash, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	exprs, err := dashboardExpressions(dash)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	vars := strings.NewReplacer("$__rate_interval", "1m", "$job", "latch")
	for i, e := range exprs {
		if args, ok := strings.CutPrefix(e, "label_values("); ok {
			// Grafana's, not PromQL: its first argument is a query.
			e, _, _ = strings.Cut(args, ",")
		}
		q, _ := json.Marshal(vars.Replace(e)) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: dashboard:q%d\n        expr: %s\n", i, q)
	}
	f := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run(".", "check", "rules", f)

	// promtool does fail a broken rule: the check above means something.
	bad := filepath.Join(t.TempDir(), "bad.yml")
	os.WriteFile(bad, []byte("groups:\n  - name: bad\n    rules:\n      - alert: Broken\n        expr: sum by (job (latch_is_leader)\n"), 0o644)
	if out, err := exec.Command(promtool, "check", "rules", bad).CombinedOutput(); err == nil {
		t.Fatalf("promtool accepted a rule with unbalanced parentheses:\n%s", out)
	}
}

func TestPromQLSeriesNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up{job="latch"} == 0`, []string{"up"}},
		{`sum by (job) (latch_is_leader) == 0`, []string{"latch_is_leader"}},
		{`sum(latch_is_leader) by (job, member) > 1`, []string{"latch_is_leader"}},
		{`max by (job) (latch_commit_index) - on (job) group_right latch_applied_index > 10000`,
			[]string{"latch_commit_index", "latch_applied_index"}},
		{`x * on(a) group_left(b, c) y`, []string{"x", "y"}},
		{`histogram_quantile(0.99, sum by (job, le) (rate(latch_proposal_duration_seconds_bucket{job="$job"}[$__rate_interval])))`,
			[]string{"latch_proposal_duration_seconds_bucket"}},
		{`increase(latch_state_hash_checks_total{result="mismatch", member=~"n}1|by"}[1h] offset 5m) > 0`,
			[]string{"latch_state_hash_checks_total"}},
		{`max by (job, cap) (latch_cap_used / (latch_cap_limit > 0)) > 0.9 # used over limit`,
			[]string{"latch_cap_used", "latch_cap_limit"}},
		{`(a > bool 1) and on () b unless c or d`, []string{"a", "b", "c", "d"}},
		{`count_values("v", latch_term) + NaN + Inf + 1e3 + 0x1f`, []string{"latch_term"}},
		{`topk(3, sum without (instance) (rate(latch_requests_total[5m:1m])))`, []string{"latch_requests_total"}},
		{`label_values(latch_is_leader, job)`, []string{"latch_is_leader"}},
		{`ns:recorded:rate5m`, []string{"ns:recorded:rate5m"}},
	} {
		if got := seriesNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("seriesNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// unknownSeries lists, sorted and once each, the series the expressions
// name that are not in known.
func unknownSeries(exprs []string, known map[string]bool) []string {
	var out []string
	for _, e := range exprs {
		for _, n := range seriesNames(e) {
			if !known[n] && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

// ruleExpressions returns the expr of every rule in a Prometheus rules
// file, written as latch-alerts.yml writes them: "expr: <query>" on one
// line, or "expr: |" / "expr: >" with the query on the lines indented
// below. It fails when some rule's expr is in another form, so that no
// rule escapes the check.
func ruleExpressions(yml string) ([]string, error) {
	lines := strings.Split(yml, "\n")
	var out []string
	rules := 0
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		if strings.HasPrefix(trimmed, "- alert:") || strings.HasPrefix(trimmed, "- record:") {
			rules++
		}
		v, ok := strings.CutPrefix(trimmed, "expr:")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if v == "|" || v == ">" || v == "|-" || v == ">-" {
			indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
			var block []string
			for i+1 < len(lines) {
				next := lines[i+1]
				if strings.TrimSpace(next) != "" && len(next)-len(strings.TrimLeft(next, " ")) <= indent {
					break
				}
				block = append(block, strings.TrimSpace(next))
				i++
			}
			v = strings.Join(block, "\n")
		} else if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			if v[0] == '"' {
				if err := json.Unmarshal([]byte(v), &v); err != nil {
					return nil, fmt.Errorf("expr %s: %v", v, err)
				}
			} else {
				v = strings.ReplaceAll(v[1:len(v)-1], "''", "'")
			}
		}
		if v == "" {
			return nil, fmt.Errorf("line %d: an expr this check cannot read", i+1)
		}
		out = append(out, v)
	}
	if len(out) != rules {
		return nil, fmt.Errorf("%d rules but %d exprs read: write each expr as \"expr: <query>\" or a block", rules, len(out))
	}
	return out, nil
}

// dashboardExpressions returns every query of a Grafana dashboard: each
// "expr" of a panel's targets and each templating variable's query.
func dashboardExpressions(b []byte) ([]string, error) {
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	var out []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				walk(c, k)
			}
		case []any:
			for _, c := range v {
				walk(c, key)
			}
		case string:
			if key == "expr" || (key == "query" && strings.HasPrefix(v, "label_values(")) {
				out = append(out, v)
			}
		}
	}
	walk(doc, "")
	slices.Sort(out)
	return out, nil
}

// PromQL words that are not series: aggregation operators (which may be
// followed by "by (...)" rather than a parenthesis), binary operators and
// modifiers, and number literals.
var (
	promAggregations = []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
		"bottomk", "topk", "quantile", "limitk", "limit_ratio"}
	promKeywords   = []string{"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}
	promLabelLists = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
)

// seriesNames returns, in order of appearance and once each, the series a
// PromQL expression (or a Grafana label_values query) names: identifiers
// outside label matchers, strings, ranges and label lists that are
// neither functions, operators nor keywords. Grafana variables ($job,
// $__rate_interval) are skipped.
func seriesNames(expr string) []string {
	var out []string
	add := func(n string) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || (!first && c >= '0' && c <= '9')
	}
	s := expr
	i := 0
	// skipSpace moves past blanks and returns the next byte (0 at the end).
	skipSpace := func() byte {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
			i++
		}
		if i < len(s) {
			return s[i]
		}
		return 0
	}
	// skipString moves past the string starting at i.
	skipString := func() {
		q := s[i]
		for i++; i < len(s) && s[i] != q; i++ {
			if s[i] == '\\' && q != '`' {
				i++
			}
		}
		i++
	}
	// skipGroup moves past the group opened at i, strings inside included.
	skipGroup := func(open, close byte) {
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '"', '\'', '`':
				skipString()
				continue
			case open:
				depth++
			case close:
				depth--
				if depth == 0 {
					i++
					return
				}
			}
			i++
		}
	}
	for skipSpace() != 0 {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			skipString()
		case c == '{':
			skipGroup('{', '}')
		case c == '[':
			skipGroup('[', ']')
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '$':
			for i++; i < len(s) && (isIdent(s[i], false) || s[i] == '{' || s[i] == '}'); i++ {
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(s) && (isIdent(s[i], false) || s[i] == '.') {
				i++
			}
		case isIdent(c, true):
			start := i
			for i < len(s) && isIdent(s[i], false) {
				i++
			}
			word := s[start:i]
			lower := strings.ToLower(word)
			switch {
			case slices.Contains(promLabelLists, lower):
				if skipSpace() == '(' {
					skipGroup('(', ')')
				}
			case slices.Contains(promKeywords, lower), slices.Contains(promAggregations, lower):
			case word == "label_values":
				// Grafana: label_values(series, label): only the first
				// argument names a series.
				if skipSpace() == '(' {
					i++
					rest := s[i:]
					if j := strings.LastIndexByte(rest, ','); j >= 0 {
						rest = rest[:j]
					}
					for _, n := range seriesNames(rest) {
						add(n)
					}
					i = len(s)
				}
			default:
				if skipSpace() == '(' {
					continue // a function call
				}
				add(word)
			}
		default:
			i++
		}
	}
	return out
}
