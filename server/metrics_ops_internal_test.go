package server

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/latch-io/latch/session"
)

// TestRequestMetrics checks what request counts through the cached series
// of a type: every call lands on its type's ok or error series, timed ones
// in the histogram, and an untimed type gets no histogram series.
func TestRequestMetrics(t *testing.T) {
	registerOpsMetrics()
	m := &opsMetrics{id: "request-metrics-test"}
	start := time.Now()
	for range 3 {
		m.request(session.MsgSet, start, nil, true)
	}
	m.request(session.MsgGet, start, nil, true)
	m.request(session.MsgSet, start, errors.New("refused"), true)
	m.request(session.MsgWatch, time.Time{}, nil, false)

	counter := func(typ, result string) float64 {
		var out dto.Metric
		if err := requestsTotal.WithLabelValues(m.id, typ, result).Write(&out); err != nil {
			t.Fatal(err)
		}
		return out.GetCounter().GetValue()
	}
	for _, c := range []struct {
		typ, result string
		want        float64
	}{{"Set", "ok", 3}, {"Set", "error", 1}, {"Get", "ok", 1}, {"Get", "error", 0}, {"Watch", "ok", 1}} {
		if got := counter(c.typ, c.result); got != c.want {
			t.Errorf("latch_requests_total{type=%q,result=%q} = %v, want %v", c.typ, c.result, got, c.want)
		}
	}
	timed := map[string]uint64{}
	ch := make(chan prometheus.Metric, 64)
	go func() { requestSeconds.Collect(ch); close(ch) }()
	for pm := range ch {
		var out dto.Metric
		if err := pm.Write(&out); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range out.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["member"] == m.id {
			timed[labels["type"]] = out.GetHistogram().GetSampleCount()
		}
	}
	if want := map[string]uint64{"Set": 4, "Get": 1}; len(timed) != len(want) || timed["Set"] != 4 || timed["Get"] != 1 {
		t.Errorf("latch_request_duration_seconds counts = %v, want %v (no series for the untimed Watch)", timed, want)
	}
}
