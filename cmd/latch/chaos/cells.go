package chaos

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// Cells of a two-cell run (Config.Cells 2).
const (
	// CellChaos is the cell the faults and workloads hit: RootPath's
	// first component.
	CellChaos = "chaos"
	// CellSteady is the cell that takes no fault.
	CellSteady = "steady"
	// CheckCells is the cells checker: the steady cell served on while
	// the chaos cell was under faults, and every path went to its cell.
	CheckCells = "cells"
)

// Violations of the cells checker.
const (
	ViolationOtherCellFailed = "other-cell-failed" // an operation of the steady cell failed while only the chaos cell had faults
	ViolationMisrouted       = "misrouted"         // a path was sent to (or found in) a cell it does not belong to
	ViolationCellStaleRead   = "cell-stale-read"   // the steady cell read back a value other than the one just written
)

// steadyOpTimeout bounds one operation of the steady cell: far above its
// normal latency, far below a failover of the other cell.
const steadyOpTimeout = 2 * time.Second

// steadyCell is the second cell of a two-cell run and its writer: one
// client.Cells with both cells in its map writes /steady/k (and reads it
// back) again and again while the chaos cell takes its faults.
type steadyCell struct {
	cluster *proc.Cluster
	chaos   *proc.Cluster
	x       *client.Cells
	direct  [2]*client.Client // steady, chaos: for the final routing check

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	ops     int
	last    int // the last acknowledged write
	tried   int // the last write sent (it may have landed unacknowledged)
	vs      []Violation
	verdict Verdict
}

// steadyKey is the node the steady writer writes.
var steadyKey = "/" + CellSteady + "/k"

// startSteadyCell starts the steady cell's members and its clients.
func startSteadyCell(ctx context.Context, cfg *Config, latchd string, certs session.DevCerts, cert, key string, chaos *proc.Cluster) (*steadyCell, error) {
	extra := []string{"--cell", CellSteady}
	if cfg.MutualTLS {
		extra = append(extra, "--tls-client-ca", certs.CA, "--acl-default", "allow")
	}
	c, err := startCluster(cfg.Members, latchd, filepath.Join(cfg.Out, "members-"+CellSteady), certs, extra...)
	if err != nil {
		return nil, err
	}
	st := &steadyCell{cluster: c, chaos: chaos, done: make(chan struct{})}
	tlsConf, err := session.ClientTLS(certs.CA, cert, key)
	if err != nil {
		st.close()
		return nil, err
	}
	base := client.Config{TLS: tlsConf, SessionTTL: 10 * time.Second, ClientName: "latch-chaos-cells", Logger: cfg.Logger,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	m := client.CellMap{CellChaos: chaos.ClientAddrs(), CellSteady: c.ClientAddrs()}
	if cfg.InjectBug == BugMisroute {
		m[CellSteady] = chaos.ClientAddrs() // the planted bug: the steady cell's paths go to the chaos cell
	}
	if st.x, err = client.DialCells(ctx, client.CellsConfig{Config: base, Map: m}); err != nil {
		st.close()
		return nil, err
	}
	for i, eps := range [][]string{c.ClientAddrs(), chaos.ClientAddrs()} {
		dc := base
		dc.Endpoints = eps
		if st.direct[i], err = client.Dial(ctx, dc); err != nil {
			st.close()
			return nil, err
		}
	}
	if _, err := st.direct[0].Create(ctx, steadyKey, []byte("0")); err != nil && !errors.Is(err, client.ErrNodeExists) {
		st.close()
		return nil, err
	}
	return st, nil
}

// start runs the writer until stop.
func (st *steadyCell) start() {
	st.ctx, st.cancel = context.WithCancel(context.Background())
	go func() {
		defer close(st.done)
		for i := 1; st.ctx.Err() == nil; i++ {
			st.round(i)
		}
	}()
}

// round writes i to steadyKey through the routing client and reads it
// back; a failure is a violation unless the run is ending.
func (st *steadyCell) round(i int) {
	fail := func(what string, err error) {
		if st.ctx.Err() != nil {
			return
		}
		kind := ViolationOtherCellFailed
		if errors.Is(err, session.ErrWrongCell) {
			kind = ViolationMisrouted
		}
		st.mu.Lock()
		if len(st.vs) < 20 {
			st.vs = append(st.vs, Violation{Kind: kind, Detail: fmt.Sprintf("%s %s at %s: %v", what, steadyKey, time.Now().Format("15:04:05.000"), err)})
		}
		st.mu.Unlock()
		time.Sleep(50 * time.Millisecond) // a failed round does not spin
	}
	ctx, cancel := context.WithTimeout(st.ctx, steadyOpTimeout)
	defer cancel()
	v := strconv.Itoa(i)
	st.mu.Lock()
	st.tried = i
	st.mu.Unlock()
	if _, err := st.x.Set(ctx, steadyKey, []byte(v)); err != nil {
		fail("set", err)
		return
	}
	st.mu.Lock()
	st.last = i
	st.mu.Unlock()
	got, _, err := st.x.Get(ctx, steadyKey)
	if err != nil {
		fail("get", err)
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if string(got) != v {
		st.vs = append(st.vs, Violation{Kind: ViolationCellStaleRead, Detail: fmt.Sprintf("wrote %s, read %q", v, got)})
	}
	st.ops++
}

// stop ends the writer and judges: no failed operation, the last value in
// the steady cell, and the steady cell's path refused by the chaos cell.
func (st *steadyCell) stop() {
	if st.cancel == nil {
		return
	}
	st.cancel()
	<-st.done
	ctx, cancel := context.WithTimeout(context.Background(), recoverTimeout)
	defer cancel()
	st.mu.Lock()
	defer st.mu.Unlock()
	vs := st.vs
	if st.ops == 0 {
		vs = append(vs, Violation{Kind: ViolationOtherCellFailed, Detail: "no operation of the steady cell succeeded"})
	} else if got, _, err := st.direct[0].Get(ctx, steadyKey); err != nil || (string(got) != strconv.Itoa(st.last) && string(got) != strconv.Itoa(st.tried)) {
		vs = append(vs, Violation{Kind: ViolationMisrouted, Detail: fmt.Sprintf("the steady cell holds %q (%v), the last acknowledged write was %d (last sent %d)", got, err, st.last, st.tried)})
	}
	if _, _, err := st.direct[1].Get(ctx, steadyKey); !errors.Is(err, session.ErrWrongCell) {
		vs = append(vs, Violation{Kind: ViolationMisrouted, Detail: fmt.Sprintf("the chaos cell answered get %s with %v, not WrongCell", steadyKey, err)})
	}
	st.verdict = verdict(CheckCells, fmt.Sprintf("cell %s: %d writes and reads through the routing client while cell %s took every fault", CellSteady, st.ops, CellChaos), vs)
}

// close stops the writer, the clients and the steady cell's members.
func (st *steadyCell) close() {
	if st.cancel != nil {
		st.cancel()
		<-st.done
		st.cancel = nil
	}
	if st.x != nil {
		st.x.Close()
	}
	for _, c := range st.direct {
		if c != nil {
			c.Close()
		}
	}
	st.cluster.Shutdown()
}
