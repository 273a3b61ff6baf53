package client

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/session"
)

// Finding the leader. Before it makes a connection the client asks every
// endpoint at once who leads (session.Probe: one datagram each way, no
// handshake), then completes a QUIC+TLS handshake with the leader only.
// While members answer but know no leader (an election runs), it asks
// again after electionPoll, later less often (electionPause); the first answer naming the new leader sends
// it there. Endpoints that do not answer the probe at all are dialed as
// before, one after another (attemptStagger), so a cluster that does not
// speak the probe still works.
//
// Before it dials the leader the client asks it for admission (queue):
// one more probe, from the socket it will dial from, that the leader
// answers with a slot ("come now" or "come in W") or "busy, ask again in
// W" (server/quicfront/queue.go). The client waits W and dials, or waits W (plus
// up to half again, jittered) and starts over; a busy answer is heard, so
// the client holds its sessions as for any answer. An ask that goes
// unanswered within askWait is dialed as before.
const (
	// attemptStagger is how long a connection attempt runs alone before
	// the next candidate is tried alongside it (as in Happy Eyeballs, RFC
	// 8305).
	attemptStagger = 250 * time.Millisecond
	// probeWait bounds one round of probes; probeResend is how often an
	// unanswered probe is sent again (lost datagrams).
	probeWait   = 100 * time.Millisecond
	probeResend = 30 * time.Millisecond
	// electionPoll is the pause between probe rounds while members answer
	// that they know no leader, for electionFastPolls rounds (an election
	// usually ends within them); then it doubles with each round up to
	// electionPollMax, jittered. Thousands of clients lose the leader at
	// once: polling every 20ms through a slow election, each asking every
	// member, they would send the candidates hundreds of thousands of
	// probes a second, and load them while they try to elect.
	electionPoll      = 20 * time.Millisecond
	electionFastPolls = 15
	electionPollMax   = 160 * time.Millisecond
	// askWait bounds the admission ask (queue) to a member that just
	// answered the survey as leader, resent every askResend: its silence
	// now is load (a starved member answered after 100ms and its clients,
	// dialing without a slot, were refused), and a leader that died since
	// costs this once.
	askWait   = 500 * time.Millisecond
	askResend = 100 * time.Millisecond
	// slotHandshakeTimeout is the handshake patience of a client that
	// holds a slot: the member promised to let it in and answered just
	// now, so silence is its CPU, not a refusal (with the 1s of an
	// ordinary dial, clients abandoned 1,983 admitted handshakes of a
	// 2,000-client storm and asked again, each costing another).
	slotHandshakeTimeout = 3 * time.Second
	// refusedLimit is how long every endpoint must refuse (nothing
	// listening) before a client that never connected gives up with
	// ErrNotListening.
	refusedLimit = time.Second
)

// attempt is the outcome of one establish.
type attempt struct {
	addr   string
	l      *link
	leader string // the leader a refusing member named
	err    error
}

// connect finds the leader and sets up a link to it, until it does or the
// client closes (nil). Redirects are followed at most MaxRedirects times
// per leader named, so a redirect loop ends while a leader change does
// not; between rounds it waits electionPause while an election runs,
// else a jittered exponential backoff.
func (c *Client) connect() *link {
	hops := redirects{}
	var refusedSince time.Time
	round, polls := 0, 0
	for {
		sv := c.survey()
		if c.ctx.Err() != nil {
			return nil
		}
		if sv.allRefused {
			if refusedSince.IsZero() {
				refusedSince = time.Now()
			}
			if time.Since(refusedSince) >= refusedLimit && !c.hadLink() {
				c.setFatal(fmt.Errorf("%w on %s (refused for %v): is latchd running there?",
					ErrNotListening, strings.Join(sv.tried, ", "), refusedLimit))
			}
		} else {
			refusedSince = time.Time{}
		}
		if !sv.answered {
			c.log.Debug("latch: no member answered the probes", "tried", sv.tried)
		}
		if sv.answered {
			// The cluster answered: whatever this round's attempt meets (a
			// refusal for load, heard or dropped, an election, a slow
			// handshake or resume), the cluster decides whether the
			// sessions still live.
			c.holdSessions()
		}
		if len(sv.cands) > 0 {
			var d *session.Dialer
			slot := false
			if sv.answered {
				// cands[0] is the leader (it said so, or a member named
				// it): ask it for a slot and wait for it.
				var busy time.Duration
				if d, slot, busy = c.queue(sv.cands[0]); c.ctx.Err() != nil {
					return nil
				}
				if busy > 0 {
					wait := busy + rand.N(busy/2+1)
					c.log.Debug("latch: the leader is busy", "addr", sv.cands[0], "ask_again", busy, "waiting", wait)
					c.setLastErr(fmt.Errorf("latch: %s is busy taking clients in: told to ask again in %v", sv.cands[0], busy))
					c.setHint(sv.cands[0])
					// The leader's queue is long: it holds the sessions
					// while it takes clients in, and so does the client,
					// through the whole wait it was told to make.
					c.holdSessionsFor(wait)
					if !c.pause(wait) {
						return nil
					}
					round = 0
					continue
				}
			}
			r := c.race(sv.cands, d, slot)
			if r.l != nil {
				c.setLastErr(nil)
				c.log.Debug("latch: connected", "addr", r.addr, "member", r.l.server)
				return r.l
			}
			if c.ctx.Err() != nil {
				return nil
			}
			c.setLastErr(r.err)
			c.log.Debug("latch: connection attempts failed", "err", r.err)
			if fatal := unfixable(r.err); fatal != nil {
				c.setFatal(fatal)
			}
			if refusedBusy(r.err) {
				// Admission control refused the handshake: the member is
				// taking connections in at the rate it can serve. Back off
				// from busyRound on, so thousands of refused clients spread
				// out instead of coming back together.
				round = max(round, busyRound)
			}
			if r.leader == "" && (errors.Is(r.err, ErrNoLeader) || errors.Is(r.err, ErrNotLeader)) {
				// The member lost leadership, or has not loaded its
				// sessions yet, between the probe and the resume.
				sv.electing = true
			}
			if answeredBusy(r.err) || errors.Is(r.err, ErrNoLeader) {
				// The member itself answered (a refusal for load, "no
				// leader yet", a leader still loading), even if its probe
				// answer was lost.
				c.holdSessions()
			}

			if r.leader != "" && hops[r.leader] < c.cfg.MaxRedirects {
				hops[r.leader]++
				c.setHint(r.leader)
				continue
			}
		} else if sv.electing {
			c.setLastErr(fmt.Errorf("%w: an election is running (asked %s)", ErrNoLeader, strings.Join(sv.tried, ", ")))
		}
		var pause time.Duration
		if sv.electing {
			pause, round = electionPause(polls), 0
			polls++
		} else {
			pause, polls = c.backoff(round), 0
			round++
		}
		if !c.pause(pause) {
			return nil
		}
	}
}

// pause waits d; false when the client closed meanwhile.
func (c *Client) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// queue asks the leader at addr for admission (session.Ask) from a new
// socket and waits out the slot it is given. It returns the socket to
// dial from and whether it holds a slot there, or, when the leader's queue is full, nil and how long the
// leader said to wait before asking again: an answer, so the leader is
// alive and the client holds its sessions meanwhile. When the ask goes
// unanswered within askWait (a member that does not answer in time, lost
// datagrams) the client dials as before: the attempt goes through the
// leader's token bucket. See server/quicfront/queue.go for the member's side.
func (c *Client) queue(addr string) (*session.Dialer, bool, time.Duration) {
	d, err := session.NewDialer()
	if err != nil {
		return nil, false, 0 // dial as before, on a socket of its own
	}
	c.mu.Lock()
	ask := session.Ask{Connect: true, Resume: len(c.sessions) > 0}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, askWait)
	a, err := d.Probe(ctx, addr, ask, askResend)
	cancel()
	switch {
	case err != nil:
		if c.ctx.Err() != nil {
			d.Close()
			return nil, false, 0
		}
		return d, false, 0
	case a.Admit == session.AdmitBusy:
		d.Close()
		return nil, false, max(a.Wait, probeWait)
	case a.Admit == session.AdmitWait:
		c.holdSessionsFor(a.Wait)
		if !c.pause(a.Wait) {
			d.Close()
			return nil, false, 0
		}
	}
	return d, a.Admit != session.AdmitNone, 0
}

// holdSessions tells every session's tracker that the cluster answered a
// probe and the client is trying to be taken back (it may be refused for
// load, or an election or a new leader's load may run). The cluster
// holds the sessions of clients it is slow to take back (server/lease,
// the reconnect grace), so the client goes on resuming them rather than
// giving them up after the plain grace: for at least two whole rounds
// (DialTimeout and a back-off each) after each answer, up to
// Config.ReconnectGrace past the plain grace. The cluster still decides:
// a resume it answers "expired" ends the session at once.
func (c *Client) holdSessions() { c.holdSessionsFor(0) }

// holdSessionsFor is holdSessions for a client that was told to wait
// before its next attempt (a slot W ahead, or "busy, ask again in W"):
// the two rounds start after the wait. A leader working through a long
// queue says "ask again" in more than the two rounds (18s for 900
// reconnects at 50 handshakes a second), and clients that held their
// sessions for two rounds from the answer gave them up while they
// waited as told, the cluster holding them all along.
func (c *Client) holdSessionsFor(wait time.Duration) {
	now := time.Now()
	window := wait + 2*(c.cfg.DialTimeout+c.cfg.MaxBackoff+probeWait)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sessions {
		s.tr.Hold(now, window, c.cfg.ReconnectGrace)
	}
}

// electionPause is the pause after the n-th probe round (from 0) in a row
// that found an election running.
func electionPause(n int) time.Duration {
	if n < electionFastPolls {
		return electionPoll
	}
	return equalJitter(min(electionPoll<<min(n-electionFastPolls+1, 16), electionPollMax))
}

// survey is what one round of probes found.
type survey struct {
	tried    []string // every address asked, the hint first
	cands    []string // addresses to dial, best first
	electing bool     // a member answered that it knows no leader yet
	// answered: some member answered the probe. Followers naming a
	// leader that stays silent to the client count: a leader refusing
	// thousands of clients drops most of its refusals and probe answers
	// (in a storm of 1,000, clients that heeded only the leader's own
	// answers still gave sessions up). A client cut off from the leader
	// alone is held too; the leader expires its sessions on time anyway,
	// and the client learns it when it gets through, or at the hold's
	// limit.
	answered   bool
	allRefused bool // nothing listens on any address
}

// survey probes the hint and every endpoint at once and orders the
// candidates: members that say they are the ready leader, then leaders
// named by others that were not asked themselves. A named leader that did
// not answer as leader (stopped, dead, not ready yet) counts as "no leader
// yet". When no member answered at all, every silent endpoint is a
// candidate, starting at a random one.
func (c *Client) survey() survey {
	hint := c.takeHint()
	var sv survey
	if hint != "" {
		sv.tried = append(sv.tried, hint)
	}
	for _, e := range c.cfg.Endpoints {
		sv.tried = appendNew(sv.tried, e)
	}
	type answer struct {
		addr string
		a    session.ProbeAnswer
		err  error
	}
	ctx, cancel := context.WithTimeout(c.ctx, probeWait)
	defer cancel()
	ch := make(chan answer, len(sv.tried))
	for _, addr := range sv.tried {
		go func() {
			a, err := session.Probe(ctx, addr, probeResend)
			ch <- answer{addr, a, err}
		}()
	}
	got := make(map[string]answer, len(sv.tried))
	for range sv.tried {
		r := <-ch
		got[r.addr] = r
		if r.err == nil && r.a.IsLeader {
			cancel() // the others answer at once now
		}
	}
	var named, silent []string
	refused, answered := 0, false
	for _, addr := range sv.tried {
		r := got[addr]
		switch {
		case r.err == nil:
			answered = true
			switch {
			case r.a.IsLeader:
				sv.cands = appendNew(sv.cands, addr)
			case r.a.Leader != "":
				named = appendNew(named, r.a.Leader)
			default:
				sv.electing = true
			}
		case errors.Is(r.err, session.ErrRefused):
			refused++
		default:
			silent = append(silent, addr)
		}
	}
	sv.allRefused = refused == len(sv.tried)
	sv.answered = answered
	for _, n := range named {
		switch r, asked := got[n]; {
		case !asked:
			sv.cands = appendNew(sv.cands, n)
		case r.err != nil || !r.a.IsLeader:
			sv.electing = true
		}
	}
	if !answered && len(silent) > 0 {
		start := rand.IntN(len(silent))
		if hint != "" && silent[0] == hint {
			start = 0
		}
		for i := range silent {
			sv.cands = append(sv.cands, silent[(start+i)%len(silent)])
		}
	}
	return sv
}

// race dials cands, each attempt starting when the previous one failed or
// after attemptStagger, and returns the first link set up; else the last
// failure, with the leader a refusing member named. d, when not nil, is
// the socket to dial cands[0] from; slot: it holds a slot there.
func (c *Client) race(cands []string, d *session.Dialer, slot bool) attempt {
	ctx, cancel := context.WithCancel(c.ctx)
	results := make(chan attempt, len(cands))
	next, running := 0, 0
	launch := func() {
		addr := cands[next]
		next++
		running++
		from, patient := d, slot
		d, slot = nil, false
		go func() {
			l, leader, err := c.establish(ctx, addr, from, patient)
			results <- attempt{addr: addr, l: l, leader: leader, err: err}
		}()
	}
	finish := func(win attempt) attempt {
		// Stop the attempts still running; one that set up a link after
		// the winner closes it.
		cancel()
		for ; running > 0; running-- {
			if r := <-results; r.l != nil {
				r.l.conn.CloseWithError(session.ConnClosed, "")
			}
		}
		return win
	}
	launch()
	stagger := time.NewTimer(attemptStagger)
	defer stagger.Stop()
	var out attempt
	for {
		select {
		case <-stagger.C:
			if next < len(cands) {
				launch()
				stagger.Reset(attemptStagger)
			}
		case r := <-results:
			running--
			if r.err == nil {
				return finish(r)
			}
			out.err = fmt.Errorf("%s: %w", r.addr, r.err)
			if out.leader == "" && r.leader != r.addr {
				out.leader = r.leader
			}
			if next < len(cands) {
				launch()
				stagger.Reset(attemptStagger)
			} else if running == 0 {
				return finish(out)
			}
		case <-c.ctx.Done():
			return finish(attempt{err: ErrClosed})
		}
	}
}

// busyRound is the backoff round a client refused for load starts from:
// MinBackoff·2^3, 80-160ms with the defaults.
const busyRound = 3

// refusedBusy reports whether err is a member refusing a connection for
// load: quic's CONNECTION_REFUSED before the handshake (admission
// control) or a handshake that timed out, or ConnBusy after it
// (--max-conns).
func refusedBusy(err error) bool {
	var te *quic.TransportError
	if errors.As(err, &te) && te.Remote && te.ErrorCode == quic.ConnectionRefused {
		return true
	}
	// A member refusing thousands of attempts at once drops some of its
	// CONNECTION_REFUSED packets (quic-go queues four): the handshake
	// then times out in silence, and is as much a "busy".
	var ie *quic.HandshakeTimeoutError
	if errors.As(err, &ie) {
		return true
	}
	var idle *quic.IdleTimeoutError
	if errors.As(err, &idle) {
		return true
	}
	var ae *quic.ApplicationError
	return errors.As(err, &ae) && ae.Remote && ae.ErrorCode == session.ConnBusy
}

// answeredBusy reports whether err is a member's own answer that it is
// busy: CONNECTION_REFUSED (admission control) or ConnBusy. Unlike a
// handshake that timed out, it proves the member is there.
func answeredBusy(err error) bool {
	var te *quic.TransportError
	if errors.As(err, &te) && te.Remote && te.ErrorCode == quic.ConnectionRefused {
		return true
	}
	var ae *quic.ApplicationError
	return errors.As(err, &ae) && ae.Remote && ae.ErrorCode == session.ConnBusy
}

// unfixable returns the error to fail waiting calls with when err is one
// no retry can fix (the server's certificate is not trusted, the server
// wants a client certificate or refused ours, another protocol version),
// else nil.
func unfixable(err error) error {
	var (
		ua x509.UnknownAuthorityError
		he x509.HostnameError
		ci x509.CertificateInvalidError
		te *quic.TransportError
	)
	switch {
	case errors.As(err, &ua), errors.As(err, &he), errors.As(err, &ci):
		return fmt.Errorf("%w: %w", ErrUntrusted, err)
	case errors.As(err, &te) && te.Remote && (te.ErrorCode == alertCode(alertCertificateRequired) ||
		te.ErrorCode == alertCode(alertBadCertificate) || te.ErrorCode == alertCode(alertUnknownCA)):
		return fmt.Errorf("%w: %w", ErrCertRequired, err)
	case errors.Is(err, ErrVersion):
		return err
	}
	return nil
}

// TLS alerts a server sends when it does not accept the client's
// certificate (RFC 8446 6.2); QUIC carries them as CRYPTO_ERROR 0x100+alert.
const (
	alertBadCertificate      = 42
	alertUnknownCA           = 48
	alertCertificateRequired = 116
)

func alertCode(alert uint8) quic.TransportErrorCode {
	return quic.TransportErrorCode(0x100 + uint64(alert))
}

func (c *Client) takeHint() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.hint
	c.hint = ""
	return h
}

func (c *Client) setHint(addr string) {
	c.mu.Lock()
	c.hint = addr
	c.mu.Unlock()
}

// hadLink reports whether the client was ever connected.
func (c *Client) hadLink() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.linked
}

// setFatal records why calls waiting for a link cannot succeed (nil: they
// may) and wakes them, so they fail now instead of at their deadline.
func (c *Client) setFatal(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.fatal
	c.fatal = err
	if err != nil && was == nil && c.cur == nil {
		close(c.ready)
		c.ready = make(chan struct{})
	}
}
