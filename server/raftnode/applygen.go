package raftnode

// The FSM's apply generation, which lets a read tell whether a batch
// applied around it was observed yet (the server's client-cache read gate
// and stable reads).

import (
	"context"
	"sync"
	"sync/atomic"
)

// ApplyGen is the FSM's apply generation: odd while a batch is being
// applied and observed, even between batches. A read that saw the same even
// generation before and after saw no batch whose observers have not run.
type ApplyGen struct {
	n       atomic.Uint64
	mu      sync.Mutex
	waiters chan struct{} // closed at the next end; nil when nobody waits
}

// Load returns the generation now.
func (g *ApplyGen) Load() uint64 { return g.n.Load() }

// begin and end bracket one batch on the FSM goroutine.
func (g *ApplyGen) begin() { g.n.Add(1) }

func (g *ApplyGen) end() {
	g.n.Add(1)
	g.mu.Lock()
	if g.waiters != nil {
		close(g.waiters)
		g.waiters = nil
	}
	g.mu.Unlock()
}

// Wait returns once the generation reached n, or ctx ended.
func (g *ApplyGen) Wait(ctx context.Context, n uint64) error {
	for {
		g.mu.Lock()
		if g.n.Load() >= n {
			g.mu.Unlock()
			return nil
		}
		if g.waiters == nil {
			g.waiters = make(chan struct{})
		}
		ch := g.waiters
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
