package server

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of the integrity checks (storagefault.go, and raftnode's
// hashcheck.go and diskfull.go, which get their series at open),
// registered once in prometheus' default registry like the others
// (metrics.go).
var (
	integrityOnce sync.Once

	memberFailedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "latch_member_failed",
		Help: "1 when this member stopped serving after a storage fault or a state divergence (see its log).",
	}, []string{"member"})
	hashChecksTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "latch_state_hash_checks_total",
		Help: "Comparisons of this member's state hash with another member's at the same applied index, by result (match, mismatch).",
	}, []string{"member", "result"})
	hashMismatchGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "latch_state_hash_mismatch",
		Help: "Alarm: how many members' state hashes differed from this member's at the last comparison with each (0: all agree); the log names them and the index.",
	}, []string{"member"})
	noSpaceGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "latch_storage_no_space",
		Help: "1 while this member refuses writes because its disk is full.",
	}, []string{"member"})
)

func registerIntegrityMetrics() {
	integrityOnce.Do(func() {
		prometheus.MustRegister(memberFailedGauge, hashChecksTotal, hashMismatchGauge, noSpaceGauge)
	})
}
