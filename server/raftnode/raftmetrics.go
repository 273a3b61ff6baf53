package raftnode

import (
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	gometrics "github.com/hashicorp/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// RaftSink exports raft's own series, which raft emits through
// go-metrics' global sink, to Prometheus: raft_* named as go-metrics' own
// Prometheus sink named them (the key's parts joined by "_"), samples as
// histograms in raft's unit (milliseconds for times), counters and
// gauges as such.
//
// It replaces go-metrics' Prometheus sink, which on every sample joins the
// key and formats the labels into new strings and feeds a summary (a
// quantile stream behind a lock): about 3% of a loaded leader's CPU, for
// ten or so samples per commit. Here a sample finds its series by a hash
// of key and labels without allocating, and a histogram observation is a
// few atomic adds. Histograms also add up across members, summaries do
// not.
type RaftSink struct {
	mu     sync.RWMutex
	series map[uint64][]*raftSeries // by raftSeriesHash; a slice for collisions
}

// NewRaftSink returns an empty sink; register it with Prometheus and make
// it go-metrics' global sink.
func NewRaftSink() *RaftSink { return &RaftSink{series: map[uint64][]*raftSeries{}} }

var _ gometrics.MetricSink = (*RaftSink)(nil)
var _ prometheus.Collector = (*RaftSink)(nil)

// raftBuckets are the histogram bounds: milliseconds for raft's times
// (about 50µs to 5s), plain counts for its batch sizes.
var raftBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000}

type raftKind uint8

const (
	raftGauge raftKind = iota
	raftCounter
	raftHistogram
)

// raftSeries is one series: a gauge's value or a counter's total in bits
// (float64), or a histogram's bucket counts, sum and count.
type raftSeries struct {
	kind   raftKind
	parts  []string
	labels []gometrics.Label
	desc   *prometheus.Desc
	values []string // label values, in desc's order

	bits    atomic.Uint64
	buckets []atomic.Uint64 // len(raftBuckets), not cumulative
	count   atomic.Uint64
}

var raftSeed = maphash.MakeSeed()

func raftSeriesHash(kind raftKind, parts []string, labels []gometrics.Label) uint64 {
	var h maphash.Hash
	h.SetSeed(raftSeed)
	h.WriteByte(byte(kind))
	for _, p := range parts {
		h.WriteString(p)
		h.WriteByte(0)
	}
	for _, l := range labels {
		h.WriteByte(1)
		h.WriteString(l.Name)
		h.WriteByte(0)
		h.WriteString(l.Value)
	}
	return h.Sum64()
}

func (s *raftSeries) is(kind raftKind, parts []string, labels []gometrics.Label) bool {
	return s.kind == kind && slices.Equal(s.parts, parts) && slices.Equal(s.labels, labels)
}

// get returns the series, making it on first use.
func (k *RaftSink) get(kind raftKind, parts []string, labels []gometrics.Label) *raftSeries {
	h := raftSeriesHash(kind, parts, labels)
	k.mu.RLock()
	for _, s := range k.series[h] {
		if s.is(kind, parts, labels) {
			k.mu.RUnlock()
			return s
		}
	}
	k.mu.RUnlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.series[h] {
		if s.is(kind, parts, labels) {
			return s
		}
	}
	s := newRaftSeries(kind, parts, labels)
	k.series[h] = append(k.series[h], s)
	return s
}

func newRaftSeries(kind raftKind, parts []string, labels []gometrics.Label) *raftSeries {
	s := &raftSeries{kind: kind, parts: slices.Clone(parts), labels: slices.Clone(labels)}
	names := make([]string, len(labels))
	s.values = make([]string, len(labels))
	for i, l := range labels {
		names[i], s.values[i] = raftMetricName(l.Name), l.Value
	}
	s.desc = prometheus.NewDesc(raftMetricName(strings.Join(parts, "_")), "raft's own "+strings.Join(parts, "."), names, nil)
	if kind == raftHistogram {
		s.buckets = make([]atomic.Uint64, len(raftBuckets))
	}
	return s
}

// raftMetricName makes a go-metrics key a Prometheus name, as go-metrics'
// own sink did: every character outside [a-zA-Z0-9_:] becomes "_".
func raftMetricName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == ':':
			return r
		}
		return '_'
	}, s)
}

func addFloat(u *atomic.Uint64, v float64) {
	for {
		old := u.Load()
		if u.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (k *RaftSink) SetGauge(key []string, val float32) { k.SetGaugeWithLabels(key, val, nil) }

func (k *RaftSink) SetGaugeWithLabels(key []string, val float32, labels []gometrics.Label) {
	k.get(raftGauge, key, labels).bits.Store(math.Float64bits(float64(val)))
}

// EmitKey is not exported, as go-metrics' Prometheus sink did not.
func (k *RaftSink) EmitKey([]string, float32) {}

func (k *RaftSink) IncrCounter(key []string, val float32) { k.IncrCounterWithLabels(key, val, nil) }

func (k *RaftSink) IncrCounterWithLabels(key []string, val float32, labels []gometrics.Label) {
	addFloat(&k.get(raftCounter, key, labels).bits, float64(val))
}

func (k *RaftSink) AddSample(key []string, val float32) { k.AddSampleWithLabels(key, val, nil) }

func (k *RaftSink) AddSampleWithLabels(key []string, val float32, labels []gometrics.Label) {
	s := k.get(raftHistogram, key, labels)
	v := float64(val)
	if i, _ := slices.BinarySearch(raftBuckets, v); i < len(raftBuckets) {
		s.buckets[i].Add(1)
	}
	addFloat(&s.bits, v)
	s.count.Add(1)
}

// Describe sends nothing: raft's series appear as raft emits them.
func (k *RaftSink) Describe(chan<- *prometheus.Desc) {}

func (k *RaftSink) Collect(ch chan<- prometheus.Metric) {
	k.mu.RLock()
	var all []*raftSeries
	for _, ss := range k.series {
		all = append(all, ss...)
	}
	k.mu.RUnlock()
	for _, s := range all {
		v := math.Float64frombits(s.bits.Load())
		switch s.kind {
		case raftGauge:
			ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, v, s.values...)
		case raftCounter:
			ch <- prometheus.MustNewConstMetric(s.desc, prometheus.CounterValue, v, s.values...)
		case raftHistogram:
			cum := make(map[float64]uint64, len(raftBuckets))
			var n uint64
			for i, le := range raftBuckets {
				n += s.buckets[i].Load()
				cum[le] = n
			}
			ch <- prometheus.MustNewConstHistogram(s.desc, max(s.count.Load(), n), v, cum, s.values...)
		}
	}
}
