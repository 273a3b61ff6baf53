package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report summarizes a run: what was done to the cluster, what the workers
// did, and each checker's verdict.
type Report struct {
	Seed      int64    `json:"seed"`
	Members   int      `json:"members"`
	Workers   int      `json:"workers"`
	Workloads []string `json:"workloads"`
	InjectBug string   `json:"inject_bug,omitempty"`
	Duration  string   `json:"duration"` // configured
	Rounds    int      `json:"rounds,omitempty"`
	Took      string   `json:"took"` // wall time of the whole run

	Faults     map[FaultKind]int         `json:"faults"`     // injected, by kind
	Operations map[string]map[string]int `json:"operations"` // op -> outcome -> count
	// Grants are successful lock acquisitions; Elections won campaigns.
	Grants          int `json:"grants"`
	Elections       int `json:"elections"`
	WorkersStarted  int `json:"workers_started"`
	SessionsOpened  int `json:"sessions_opened"`
	SessionsExpired int `json:"sessions_expired"`

	Verdicts   []Verdict   `json:"verdicts"`
	Violations []Violation `json:"violations"`
	Passed     bool        `json:"passed"`
}

func newReport(cfg *Config, ev *Evidence, verdicts []Verdict, took time.Duration) *Report {
	r := &Report{
		Seed: cfg.Seed, Members: cfg.Members, Workers: cfg.Workers, Workloads: cfg.Workloads, InjectBug: cfg.InjectBug,
		Duration: cfg.Duration.String(), Took: took.Round(time.Second).String(),
		Rounds: cfg.Rounds,
		Faults: map[FaultKind]int{}, Operations: map[string]map[string]int{},
		WorkersStarted: len(ev.Workers), Verdicts: verdicts, Violations: Violations(verdicts),
	}
	if r.Violations == nil {
		r.Violations = []Violation{}
	}
	r.Passed = len(r.Violations) == 0
	for _, f := range ev.Faults {
		if f.Phase == "start" {
			r.Faults[f.Kind]++
		}
	}
	for i := range ev.Ops {
		o := &ev.Ops[i]
		if o.IsEvent() {
			continue
		}
		if r.Operations[o.Op] == nil {
			r.Operations[o.Op] = map[string]int{}
		}
		r.Operations[o.Op][o.Outcome]++
		if o.Outcome == OutcomeOK {
			switch o.Op {
			case OpAcquire:
				r.Grants++
			case OpCampaign:
				r.Elections++
			}
		}
	}
	r.SessionsOpened, r.SessionsExpired = sessionCounts(ev)
	return r
}

// sessionCounts returns how many worker sessions were opened and how many
// of them expired (vanished from the session list without being closed,
// or were seen to expire by their worker).
func sessionCounts(ev *Evidence) (opened, expired int) {
	for _, s := range workerSessions(ev) {
		opened++
		_, gone := seenThenGone(ev.Sessions, s.id)
		if (gone != 0 && (s.closed == 0 || s.closed > gone)) || (gone == 0 && s.expired != 0) {
			expired++
		}
	}
	return opened, expired
}

func (r *Report) violationKinds() string {
	var kinds []string
	for _, v := range r.Violations {
		if !slices.Contains(kinds, v.Kind) {
			kinds = append(kinds, v.Kind)
		}
	}
	return strings.Join(kinds, ", ")
}

// Text renders the report for people.
func (r *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "latch chaos report\n")
	span := "duration " + r.Duration
	if r.Rounds > 0 {
		span = fmt.Sprintf("%d rounds of faults", r.Rounds)
	}
	fmt.Fprintf(&b, "  seed %d, %d members, %d workers (%s), %s, took %s\n",
		r.Seed, r.Members, r.Workers, strings.Join(r.Workloads, ","), span, r.Took)
	if r.InjectBug != "" {
		fmt.Fprintf(&b, "  injected bug: %s\n", r.InjectBug)
	}
	total := 0
	for _, n := range r.Faults {
		total += n
	}
	fmt.Fprintf(&b, "\nfaults injected: %d\n", total)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, k := range FaultKinds {
		if n := r.Faults[k]; n > 0 {
			fmt.Fprintf(tw, "  %s\t%d\n", k, n)
		}
	}
	tw.Flush()
	ops := make([]string, 0, len(r.Operations))
	for op := range r.Operations {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	fmt.Fprintf(&b, "\noperations:\n")
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  op\tok\tfail\tunknown\t\n")
	for _, op := range ops {
		m := r.Operations[op]
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t\n", op, m[OutcomeOK], m[OutcomeFail], m[OutcomeUnknown])
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nlock grants: %d, elections won: %d, workers started: %d, sessions opened: %d, sessions expired: %d\n",
		r.Grants, r.Elections, r.WorkersStarted, r.SessionsOpened, r.SessionsExpired)
	fmt.Fprintf(&b, "\ncheckers:\n")
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, v := range r.Verdicts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.Checker, strings.ToUpper(v.Status), v.Summary)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nviolations: %d\n", len(r.Violations))
	const shown = 20
	for i, v := range r.Violations {
		if i == shown {
			fmt.Fprintf(&b, "  ... %d more in %s\n", len(r.Violations)-shown, FileReport)
			break
		}
		fmt.Fprintf(&b, "  %s: %s\n", v.Kind, v.Detail)
	}
	if r.Passed {
		fmt.Fprintf(&b, "\nPASS\n")
	} else {
		fmt.Fprintf(&b, "\nFAIL: %s\n", r.violationKinds())
	}
	return b.String()
}

// write saves report.json and report.txt in dir.
func (r *Report) write(dir string) error {
	if err := writeJSON(filepath.Join(dir, FileReport), r); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, FileReportText), []byte(r.Text()), 0o644)
}
