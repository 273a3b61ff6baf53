package raftnode

import (
	"fmt"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// FaultLayer is the raft stream layer under the TLS layer of a member
// started with Config.FaultInjection: it passes connections through,
// except that it refuses to dial the raft addresses it is told to block and
// closes the connections it dialed to them. A partition is made by telling
// both members of each cut pair, so neither side dials the other and no
// connection crosses the cut; the chaos runner does that through POST
// /v1/faults. It sits under raft's NetworkTransport, so raft sees what a
// real partition shows it: dial errors and broken connections.
//
// Connections a member accepted are left alone: it cannot tell which raft
// address dialed them, and the dialing side closes them when told.
type FaultLayer struct {
	raft.StreamLayer // plain TCP

	mu      sync.Mutex
	blocked map[string]bool
	conns   map[*faultConn]struct{} // open connections this member dialed
}

var _ raft.StreamLayer = (*FaultLayer)(nil)

// NewFaultLayer passes inner's connections through until told to block.
func NewFaultLayer(inner raft.StreamLayer) *FaultLayer {
	return &FaultLayer{StreamLayer: inner, blocked: map[string]bool{}, conns: map[*faultConn]struct{}{}}
}

// Dial fails at once for a blocked address, as a refused connection would.
func (f *FaultLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	addr := string(address)
	if f.isBlocked(addr) {
		return nil, fmt.Errorf("latch: fault injection: %s is blocked", addr)
	}
	c, err := f.StreamLayer.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	fc := &faultConn{Conn: c, addr: addr, layer: f}
	f.mu.Lock()
	// A block that arrived while dialing wins: the connection never leaves
	// this function.
	if f.blocked[addr] {
		f.mu.Unlock()
		c.Close()
		return nil, fmt.Errorf("latch: fault injection: %s is blocked", addr)
	}
	f.conns[fc] = struct{}{}
	f.mu.Unlock()
	return fc, nil
}

func (f *FaultLayer) isBlocked(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.blocked[addr]
}

// SetBlocked replaces the blocked set with addrs (empty heals) and closes
// every dialed connection to a newly blocked address.
func (f *FaultLayer) SetBlocked(addrs []string) {
	var doomed []*faultConn
	f.mu.Lock()
	f.blocked = make(map[string]bool, len(addrs))
	for _, a := range addrs {
		f.blocked[a] = true
	}
	for c := range f.conns {
		if f.blocked[c.addr] {
			doomed = append(doomed, c)
			delete(f.conns, c)
		}
	}
	f.mu.Unlock()
	for _, c := range doomed {
		c.Conn.Close()
	}
}

// Blocked lists the blocked addresses, sorted.
func (f *FaultLayer) Blocked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	list := make([]string, 0, len(f.blocked))
	for a := range f.blocked {
		list = append(list, a)
	}
	sort.Strings(list)
	return list
}

// faultConn is a dialed connection the layer can cut.
type faultConn struct {
	net.Conn
	addr  string
	layer *FaultLayer
	once  sync.Once
}

func (c *faultConn) Close() error {
	c.once.Do(func() {
		c.layer.mu.Lock()
		delete(c.layer.conns, c)
		c.layer.mu.Unlock()
	})
	return c.Conn.Close()
}
