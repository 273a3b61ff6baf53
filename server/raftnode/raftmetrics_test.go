package raftnode

import (
	"sync"
	"testing"

	gometrics "github.com/hashicorp/go-metrics"
	gometricsprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestRaftSink: raft's samples, counters and gauges reach Prometheus under
// their go-metrics names, labelled, with every observation counted once
// (histogram buckets cumulative), also when emitted concurrently.
func TestRaftSink(t *testing.T) {
	k := NewRaftSink()
	reg := prometheus.NewRegistry()
	reg.MustRegister(k)
	peer := func(id string) []gometrics.Label { return []gometrics.Label{{Name: "peer_id", Value: id}} }
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 100 {
				k.AddSample([]string{"raft", "commitTime"}, float32(i%4)*0.5) // 0, 0.5, 1, 1.5 ms
				k.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, 0.2, peer("n2"))
				k.IncrCounterWithLabels([]string{"raft", "replication", "appendEntries", "logs"}, 2, peer("n3"))
			}
		})
	}
	wg.Wait()
	k.SetGauge([]string{"raft", "leader", "dispatchNumLogs"}, 7)
	k.SetGauge([]string{"raft", "leader", "dispatchNumLogs"}, 3)
	k.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, 9000, peer("n3")) // above every bucket

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	commit := byName["raft_commitTime"]
	if commit == nil || commit.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("raft_commitTime: %v", commit)
	}
	h := commit.GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 400 || h.GetSampleSum() != 300 {
		t.Errorf("commitTime count %d sum %v, want 400 and 300", h.GetSampleCount(), h.GetSampleSum())
	}
	for _, b := range h.GetBucket() {
		want := map[float64]uint64{0.05: 100, 0.1: 100, 0.25: 100, 0.5: 200, 1: 300, 2.5: 400}[b.GetUpperBound()]
		if b.GetUpperBound() > 2.5 {
			want = 400
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("commitTime bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	rpc := byName["raft_replication_appendEntries_rpc"]
	if rpc == nil || len(rpc.GetMetric()) != 2 {
		t.Fatalf("appendEntries_rpc: %v", rpc)
	}
	for _, m := range rpc.GetMetric() {
		l := m.GetLabel()
		if len(l) != 1 || l[0].GetName() != "peer_id" {
			t.Fatalf("labels %v", l)
		}
		count, inBuckets := m.GetHistogram().GetSampleCount(), m.GetHistogram().GetBucket()[len(raftBuckets)-1].GetCumulativeCount()
		switch l[0].GetValue() {
		case "n2":
			if count != 400 || inBuckets != 400 {
				t.Errorf("n2: count %d, in buckets %d, want 400", count, inBuckets)
			}
		case "n3":
			if count != 1 || inBuckets != 0 {
				t.Errorf("n3: count %d, in buckets %d; want 1 above the last bucket", count, inBuckets)
			}
		}
	}
	logs := byName["raft_replication_appendEntries_logs"]
	if logs == nil || logs.GetType() != dto.MetricType_COUNTER || logs.GetMetric()[0].GetCounter().GetValue() != 800 {
		t.Errorf("appendEntries_logs: %v, want a counter at 800", logs)
	}
	g := byName["raft_leader_dispatchNumLogs"]
	if g == nil || g.GetType() != dto.MetricType_GAUGE || g.GetMetric()[0].GetGauge().GetValue() != 3 {
		t.Errorf("dispatchNumLogs: %v, want a gauge at 3", g)
	}
}

// BenchmarkRaftSink compares one labelled raft sample through this sink
// with go-metrics' own Prometheus sink, which latchd used before.
func BenchmarkRaftSink(b *testing.B) {
	key := []string{"raft", "replication", "appendEntries", "rpc"}
	labels := []gometrics.Label{{Name: "peer_id", Value: "n2"}}
	b.Run("RaftSink", func(b *testing.B) {
		k := NewRaftSink()
		b.ReportAllocs()
		for b.Loop() {
			k.AddSampleWithLabels(key, 0.4, labels)
		}
	})
	b.Run("go-metrics-prometheus", func(b *testing.B) {
		sink, err := gometricsprom.NewPrometheusSinkFrom(gometricsprom.PrometheusOpts{Registerer: prometheus.NewRegistry()})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			sink.AddSampleWithLabels(key, 0.4, labels)
		}
	})
}
