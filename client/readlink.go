package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/latch-io/latch/session"
)

// Follower reads. Stale reads, watches and Stale lock-queue reads go to a
// second connection, to a nearby member (Config.ReadEndpoints, else the
// member that is not the leader and answers a probe fastest), so that
// reads scale with members; writes and linearizable reads go to the
// leader. The read connection is made the first time it is needed.
//
// Monotonic reads: the client keeps the highest revision it has seen in
// any answer (reads, writes, watch events) and sends it as MinRev with
// every Stale read and watch. A member that has not applied it waits a
// moment and then answers ErrBehind; the client then gives that member up
// for readBadFor, answers the read from the leader and looks for another
// read member. Members answer a read with the exact revision of the state
// it saw, so a Stale read never returns state older than any the client
// saw before, whichever members answered.

const (
	// readBadFor is how long a member that failed a read (unreachable,
	// behind, shutting down) is not chosen again.
	readBadFor = 2 * time.Second
	// readRecheck is how often a client without a read member (every
	// member but the leader is down, or the cluster is one member) looks
	// again.
	readRecheck = 2 * time.Second
)

// readRouter holds the read connection.
type readRouter struct {
	start sync.Once
	wake  chan struct{} // the loop looks for a member again; buffered 1

	mu  sync.Mutex
	cur *link
	bad map[string]time.Time // member address -> not before
}

// seen is the highest revision this client saw in any answer.
func (c *Client) saw(rev uint64) {
	for {
		cur := c.seen.Load()
		if rev <= cur || c.seen.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// Revision returns the highest revision the client has seen in any answer
// (reads, writes, watch events): Stale reads never return older state.
func (c *Client) Revision() uint64 { return c.seen.Load() }

// ReadMember returns the id of the member the client sends Stale reads and
// watches to, or "" when they go to the leader.
func (c *Client) ReadMember() string {
	c.rd.mu.Lock()
	defer c.rd.mu.Unlock()
	if c.rd.cur == nil {
		return ""
	}
	return c.rd.cur.server
}

// reader returns the read connection, starting the loop that makes one
// the first time; nil sends the read to the leader.
func (c *Client) reader() *link {
	if c.cfg.LeaderReads {
		return nil
	}
	c.rd.start.Do(func() {
		c.rd.wake = make(chan struct{}, 1)
		c.rd.bad = map[string]time.Time{}
		c.goFunc(c.readLoop)
	})
	c.rd.mu.Lock()
	defer c.rd.mu.Unlock()
	if l := c.rd.cur; l != nil && l.conn.Context().Err() == nil {
		return l
	}
	return nil
}

// readLoop keeps a read connection to a nearby member until Close.
func (c *Client) readLoop() {
	fails := 0
	for c.ctx.Err() == nil {
		var l *link
		if addr := c.pickReader(); addr != "" {
			var err error
			if l, err = c.dialReader(addr); err != nil {
				c.log.Debug("latch: read member unreachable", "addr", addr, "err", err)
				c.markBad(addr)
			}
		}
		if l == nil {
			fails++
			pause := readRecheck
			if fails < 4 {
				pause = c.backoff(fails)
			}
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-c.rd.wake:
			case <-c.ctx.Done():
			}
			t.Stop()
			continue
		}
		fails = 0
		c.rd.mu.Lock()
		c.rd.cur = l
		c.rd.mu.Unlock()
		select {
		case <-l.conn.Context().Done():
		case <-c.ctx.Done():
		}
		c.rd.mu.Lock()
		c.rd.cur = nil
		c.rd.mu.Unlock()
		l.conn.CloseWithError(session.ConnClosed, "")
	}
}

// pickReader probes the candidates at once and returns the read member:
// the first of Config.ReadEndpoints that answers (in their order), else
// the fastest answer from a member that is not the leader; "" when none.
// Members that failed a read lately are skipped.
func (c *Client) pickReader() string {
	cands := c.cfg.ReadEndpoints
	explicit := len(cands) > 0
	if !explicit {
		cands = c.readCandidates()
	}
	c.rd.mu.Lock()
	now := time.Now()
	var ask []string
	for _, a := range cands {
		if until, ok := c.rd.bad[a]; !ok || now.After(until) {
			ask = appendNew(ask, a)
		}
	}
	c.rd.mu.Unlock()
	if len(ask) == 0 {
		return ""
	}
	type answer struct {
		addr string
		a    session.ProbeAnswer
		err  error
	}
	ctx, cancel := context.WithTimeout(c.ctx, probeWait)
	defer cancel()
	ch := make(chan answer, len(ask))
	for _, addr := range ask {
		go func() {
			a, err := session.Probe(ctx, addr, probeResend)
			ch <- answer{addr, a, err}
		}()
	}
	answered := map[string]bool{}
	fastest := ""
	for range ask {
		r := <-ch
		if r.err != nil {
			continue
		}
		answered[r.addr] = true
		if !explicit && fastest == "" && !r.a.IsLeader {
			fastest = r.addr
			cancel() // the others do not matter now
		}
	}
	if !explicit {
		return fastest
	}
	for _, a := range ask {
		if answered[a] {
			return a
		}
	}
	return ask[0] // no probe answered (a member that does not speak it): try the first
}

// readCandidates are the configured endpoints and the client addresses of
// every member the leader lists.
func (c *Client) readCandidates() []string {
	cands := append([]string(nil), c.cfg.Endpoints...)
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.DialTimeout)
	defer cancel()
	if ms, err := c.Members(ctx, Stale()); err == nil {
		for _, m := range ms {
			if m.ClientAddr != "" {
				cands = appendNew(cands, m.ClientAddr)
			}
		}
	}
	return cands
}

// dialReader connects to addr and says Hello: a read connection carries
// no session.
func (c *Client) dialReader(addr string) (*link, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.DialTimeout)
	defer cancel()
	conn, err := session.Dial(ctx, addr, c.tls, c.tcfg)
	if err != nil {
		return nil, err
	}
	hello, err := session.Hello(ctx, conn, c.cfg.ClientName)
	if err != nil {
		conn.CloseWithError(session.ConnClosed, "")
		return nil, err
	}
	return &link{conn: conn, addr: addr, gen: linkGen.Add(1), server: hello.ServerID, features: hello.Features}, nil
}

// markBad keeps addr from being chosen for readBadFor.
func (c *Client) markBad(addr string) {
	c.rd.mu.Lock()
	c.rd.bad[addr] = time.Now().Add(readBadFor)
	c.rd.mu.Unlock()
}

// readFailed gives up the read member of l after err: the next read goes
// to the leader while the loop finds another member.
func (c *Client) readFailed(l *link, err error) {
	c.log.Debug("latch: read member failed; reading from the leader", "addr", l.addr, "member", l.server, "err", err)
	c.markBad(l.addr)
	c.rd.mu.Lock()
	if c.rd.cur == l {
		c.rd.cur = nil
	}
	c.rd.mu.Unlock()
	l.conn.CloseWithError(session.ConnClosed, "")
	select {
	case c.rd.wake <- struct{}{}:
	default:
	}
}

// readElsewhere reports whether a member's answer to a Stale read says
// another member (or the leader) should answer it instead.
func readElsewhere(err error) bool {
	return errors.Is(err, ErrBehind) || retryElsewhere(err) || errors.Is(err, session.ErrBusy)
}

// staleDo sends a Stale read to the read member with the client's
// revision as MinRev, and to the leader when there is none or it fails
// (the leader then waits for MinRev too).
func (c *Client) staleDo(ctx context.Context, req *session.Request) (*session.Response, error) {
	req.Stale = true
	if l := c.reader(); l != nil {
		req.MinRev = c.seen.Load()
		resp, err := session.RoundTrip(ctx, l.conn, req)
		if err == nil {
			c.saw(resp.Rev)
			if err = resp.Err(); err == nil || !readElsewhere(err) {
				return resp, err
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if isWire(err) || !isStreamErr(err) {
			c.readFailed(l, err)
		}
	}
	req.MinRev = c.seen.Load()
	return c.do(ctx, nil, req)
}

// watchStream opens a watch on the read member (MinRev: the client's
// revision), or on the leader when there is none or it fails.
func (c *Client) watchStream(ctx context.Context, req *session.Request, open func(context.Context, *session.Conn, *session.Request) (*session.StreamReader, error)) (*session.StreamReader, *session.Response, error) {
	if l := c.reader(); l != nil {
		req.MinRev = c.seen.Load()
		sr, err := open(ctx, l.conn, req)
		var first *session.Response
		if err == nil {
			first, err = sr.Next()
		}
		if err == nil {
			c.saw(first.Rev)
			return sr, first, nil
		}
		if sr != nil {
			sr.Close()
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if isWire(err) && !readElsewhere(err) {
			return nil, nil, err // the member refused the watch itself (a bad path, a cap)
		}
		if isWire(err) || !isStreamErr(err) {
			c.readFailed(l, err)
		}
	}
	req.MinRev = c.seen.Load()
	sr, first, _, err := c.stream(ctx, nil, req, open)
	if err == nil {
		c.saw(first.Rev)
	}
	return sr, first, err
}
