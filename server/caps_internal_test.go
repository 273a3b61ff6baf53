package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/watch"
	"github.com/latch-io/latch/session"
)

// rawConn dials s and says Hello; the error is Hello's.
func rawConn(t *testing.T, ctx context.Context, s *Server) (*session.Conn, error) {
	t.Helper()
	tlsConf, err := session.ClientTLS(filepath.Join(s.cfg.DataDir, devTLSDir, "ca.pem"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := session.Dial(ctx, s.ClientAddr(), tlsConf, session.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_, err = session.Hello(ctx, conn, "internal-test")
	return conn, err
}

func TestConnCap(t *testing.T) {
	s := startDevWith(t, func(c *Config) { c.MaxConns = 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var conns []*session.Conn
	for range 3 {
		c, err := rawConn(t, ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	extra, err := rawConn(t, ctx, s)
	if err == nil {
		t.Fatal("a fourth connection was served with --max-conns 3")
	}
	select {
	case <-extra.Context().Done():
	case <-ctx.Done():
		t.Fatal("the refused connection was not closed")
	}
	var ae *quic.ApplicationError
	if !errors.As(context.Cause(extra.Context()), &ae) || ae.ErrorCode != session.ConnBusy || !strings.Contains(ae.ErrorMessage, "--max-conns") {
		t.Fatalf("refused with %v, want ConnBusy naming --max-conns", context.Cause(extra.Context()))
	}
	if n := s.front.quic.Stats().RefusedConns; n != 1 {
		t.Fatalf("refused connections counted %d", n)
	}
	conns[0].Close()
	waitCond(t, "a connection is taken again once one closed", func() error {
		_, err := rawConn(t, ctx, s)
		return err
	})
}

func TestStreamCap(t *testing.T) {
	s := startDevWith(t, func(c *Config) { c.MaxStreams, c.MaxRequestsPerConn, c.MaxWatchesPerConn = 4, 8, 4 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stalled []*quic.Stream
	var conns []*session.Conn
	for range 2 {
		c, err := rawConn(t, ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		for range 2 {
			str, err := c.OpenStreamSync(ctx)
			if err != nil {
				t.Fatal(err)
			}
			str.Write([]byte{0, 0}) // half a frame header: the server waits
			stalled = append(stalled, str)
		}
	}
	waitCond(t, "4 streams in flight", func() error {
		if n := s.front.quic.Stats().Streams; n != 4 {
			return fmt.Errorf("%d streams", n)
		}
		return nil
	})
	resp, err := session.RoundTrip(ctx, conns[0], &session.Request{Type: session.MsgGet, Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Err(); !errors.Is(err, session.ErrBusy) || !strings.Contains(err.Error(), "--max-streams") {
		t.Fatalf("a fifth request: %v, want ErrBusy naming --max-streams", err)
	}
	for _, str := range stalled {
		str.CancelWrite(session.StreamCanceled)
		str.CancelRead(session.StreamCanceled)
	}
	waitCond(t, "requests served again", func() error {
		resp, err := session.RoundTrip(ctx, conns[1], &session.Request{Type: session.MsgGet, Path: "/"})
		if err != nil {
			return err
		}
		return resp.Err()
	})
}

// Connections whose watches were never read held their queued events
// (10,000 watches with 1,000-byte paths: 1.07 GB of leader memory), and
// the cap counted events, whatever their size. Bytes are capped now: here
// 8 connections x 100 unread recursive watches see 100 creates of
// 1,000-byte paths (about 88 MB of events, far beyond what QUIC flow
// control lets through), and the bytes the hub counts stay within
// MaxWatchBacklogBytes (plus one Resync per watch); the watches beyond it
// end with a Resync whose frame names the cap.
func TestWatchBacklogBoundedInBytes(t *testing.T) {
	const conns, watches, creates, maxBytes = 8, 100, 100, 1 << 20
	s := startDevWith(t, func(c *Config) { c.MaxWatchBacklogBytes = maxBytes })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	streams, peak := unreadWatches(t, ctx, s, conns, watches, creates, func() int {
		n, _, _ := s.front.hub.BacklogStats()
		return n
	})
	_, resyncs, _ := s.front.hub.BacklogStats()
	if peak > maxBytes+conns*watches*watch.EventOverhead {
		t.Fatalf("watches held %d bytes, cap %d", peak, maxBytes)
	}
	if resyncs == 0 {
		t.Fatalf("no watch was resynced for the byte cap (peak %d bytes)", peak)
	}
	if !resyncedNaming(t, streams, "--"+capWatchBacklogBytes) {
		t.Fatalf("no watch stream ended with a Resync naming --%s", capWatchBacklogBytes)
	}
	t.Logf("peak %d bytes held for watches (cap %d), %d watches resynced", peak, maxBytes, resyncs)
}

// One connection's unread watches hold at most MaxWatchBytesPerConn, and
// are resynced beyond it while a watch on another connection that reads
// gets every event.
func TestWatchBytesPerConnBounded(t *testing.T) {
	const watches, creates, maxConn = 100, 60, 256 << 10
	s := startDevWith(t, func(c *Config) { c.MaxWatchBytesPerConn = maxConn })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reader, err := rawConn(t, ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Propose(ctx, &namespace.Command{Op: namespace.OpCreate, Path: "/w"}); err != nil || res.Err != nil {
		t.Fatal(err, res)
	}
	live, err := session.OpenStreaming(ctx, reader, &session.Request{Type: session.MsgWatch, Path: "/w", Kind: session.WatchRecursive})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := live.Next(); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { // reads as a healthy client does, while the creates run
		n := 0
		for n < 2*creates {
			resp, err := live.Next()
			if err != nil {
				got <- err
				return
			}
			for _, ev := range resp.Events {
				if ev.Type == session.EventResync {
					got <- fmt.Errorf("the reading watch was resynced after %d events: %s", n, resp.Message)
					return
				}
				n++
			}
		}
		got <- nil
	}()
	streams, peak := unreadWatches(t, ctx, s, 1, watches, creates, s.front.hub.BusiestConn)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	_, _, connResyncs := s.front.hub.BacklogStats()
	if peak > maxConn+watches*watch.EventOverhead {
		t.Fatalf("one connection's watches held %d bytes, cap %d", peak, maxConn)
	}
	if connResyncs == 0 {
		t.Fatalf("no watch was resynced for the per-connection cap (peak %d bytes)", peak)
	}
	if !resyncedNaming(t, streams, "--"+capWatchBytesPerConn) {
		t.Fatalf("no watch stream ended with a Resync naming --%s", capWatchBytesPerConn)
	}
	t.Logf("peak %d bytes for one connection (cap %d), %d watches resynced", peak, maxConn, connResyncs)
}

// unreadWatches opens conns connections of watches recursive watches on
// /w that read nothing past their acknowledgement, creates creates nodes
// with 1,000-byte names under /w, and returns the streams and the peak of
// held() sampled after each create.
func unreadWatches(t *testing.T, ctx context.Context, s *Server, conns, watches, creates int, held func() int) ([]*session.StreamReader, int) {
	t.Helper()
	propose := func(cmd *namespace.Command) {
		t.Helper()
		res, err := s.Propose(ctx, cmd)
		if err != nil || (res.Err != nil && !errors.Is(res.Err, namespace.ErrNodeExists)) {
			t.Fatalf("%v: %v %v", cmd.Op, err, res)
		}
	}
	propose(&namespace.Command{Op: namespace.OpCreate, Path: "/w"})
	var streams []*session.StreamReader
	for range conns {
		c, err := rawConn(t, ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		for range watches {
			sr, err := session.OpenStreaming(ctx, c, &session.Request{Type: session.MsgWatch, Path: "/w", Kind: session.WatchRecursive})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sr.Next(); err != nil { // the acknowledgement; nothing more is read
				t.Fatal(err)
			}
			streams = append(streams, sr)
		}
	}
	long := strings.Repeat("x", 990)
	peak := 0
	for i := range creates {
		propose(&namespace.Command{Op: namespace.OpCreate, Path: fmt.Sprintf("/w/%s-%04d", long, i)})
		peak = max(peak, held())
	}
	return streams, peak
}

// resyncedNaming reads every stream (a resynced watch's writer sends what
// it holds, then the Resync) until one ends with a Resync whose frame's
// message contains flag, or every one ended without; then it closes them
// all and reports whether one did.
func resyncedNaming(t *testing.T, streams []*session.StreamReader, flag string) bool {
	t.Helper()
	found := make(chan bool, len(streams))
	var wg sync.WaitGroup
	for _, sr := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				resp, err := sr.Next()
				if err != nil {
					found <- false
					return
				}
				if evs := resp.Events; len(evs) > 0 && evs[len(evs)-1].Type == session.EventResync {
					found <- strings.Contains(resp.Message, flag)
					return
				}
			}
		}()
	}
	ok := false
	for range streams {
		if ok = <-found; ok {
			break
		}
	}
	for _, sr := range streams {
		sr.Close()
	}
	wg.Wait()
	return ok
}

// Idle connections were held forever (3,000 at ~58 KB each): one with no
// session and no request is closed after IdleConnTimeout, naming the flag;
// one with a session stays.
func TestIdleConnClosed(t *testing.T) {
	s := startDevWith(t, func(c *Config) { c.IdleConnTimeout = 300 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	withSession, err := rawConn(t, ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	open, err := session.RoundTrip(ctx, withSession, &session.Request{Type: session.MsgOpenSession, TTLMillis: 10000})
	if err != nil || open.Err() != nil {
		t.Fatal(err, open.Err())
	}
	idle, err := rawConn(t, ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-idle.Context().Done():
	case <-ctx.Done():
		t.Fatal("an idle connection was kept")
	}
	var ae *quic.ApplicationError
	if !errors.As(context.Cause(idle.Context()), &ae) || !strings.Contains(ae.ErrorMessage, "--idle-conn-timeout") {
		t.Fatalf("idle connection closed with %v", context.Cause(idle.Context()))
	}
	// The connection with a session, older than the idle one, is served.
	resp, err := session.RoundTrip(ctx, withSession, &session.Request{Type: session.MsgKeepAlive, Session: open.Session})
	if err != nil || resp.Err() != nil {
		t.Fatalf("connection with a session after the idle one was closed: %v %v", err, resp.Err())
	}
}

// stallStreams opens n streams on conn, each writing a frame header that
// announces a full frame and then part of its body, and never finishing.
func stallStreams(t *testing.T, ctx context.Context, conn *session.Conn, n, body int) {
	t.Helper()
	frame := binary.BigEndian.AppendUint32(nil, uint32(conn.MaxFrameSize()))
	frame = append(frame, make([]byte, body)...)
	for range n {
		str, err := conn.OpenStreamSync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = str.Write(frame) // fails on a stream the server refused
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// 16 connections x 4,096 half-written streams added 350 MB that was never
// given back. Streams in flight are capped across connections
// (MaxStreams) and each must deliver its frame within RequestReadTimeout:
// here 4 connections open 64 streams that write half a frame (512 KiB of
// a 1 MiB frame) and stall. At most MaxStreams (16) are held, the rest are
// refused; after the read deadline every slot is given back while the
// clients still hold their connections open, and so is the memory; a
// second wave, given back by closing the connections before the (long)
// deadline, leaves nothing either.
func TestStalledStreamsGivenBack(t *testing.T) {
	const streamCap, perConn, conns, body = 16, 16, 4, 512 << 10
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		close   bool // give back by closing the connections
	}{
		{"read-deadline", 2 * time.Second, false},
		{"connection-close", time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startDevWith(t, func(c *Config) {
				c.MaxStreams, c.MaxRequestsPerConn, c.MaxWatchesPerConn = streamCap, 64, 32
				c.RequestReadTimeout = tc.timeout
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var cs []*session.Conn
			for range conns {
				c, err := rawConn(t, ctx, s)
				if err != nil {
					t.Fatal(err)
				}
				cs = append(cs, c)
			}
			base := heapInUse()
			held := 0
			for _, c := range cs {
				stallStreams(t, ctx, c, perConn, body)
				held = max(held, s.front.quic.Stats().Streams)
			}
			waitCond(t, "the stalled streams counted", func() error {
				held = max(held, s.front.quic.Stats().Streams)
				if n := s.front.quic.Stats().RefusedStreams + uint64(held); n < conns*perConn && held < streamCap {
					return fmt.Errorf("%d held, %d refused", held, s.front.quic.Stats().RefusedStreams)
				}
				return nil
			})
			peak := heapInUse()
			if held > streamCap {
				t.Fatalf("%d streams held, cap %d", held, streamCap)
			}
			if s.front.quic.Stats().RefusedStreams == 0 {
				t.Fatalf("no stream refused: %d half-written streams with --max-streams %d", conns*perConn, streamCap)
			}
			if tc.close {
				for _, c := range cs {
					c.Close()
				}
			}
			waitCond(t, "every stream slot given back", func() error {
				if n := s.front.quic.Stats().Streams; n != 0 {
					return fmt.Errorf("%d streams still held", n)
				}
				return nil
			})
			after := heapInUse()
			t.Logf("held %d (cap %d), refused %d; heap %d KiB before, %d KiB stalled, %d KiB after",
				held, streamCap, s.front.quic.Stats().RefusedStreams, base>>10, peak>>10, after>>10)
			if after > base+4<<20 {
				t.Fatalf("heap %d KiB after the streams ended, %d KiB before: not given back", after>>10, base>>10)
			}
			if !tc.close {
				// The connections still work.
				resp, err := session.RoundTrip(ctx, cs[0], &session.Request{Type: session.MsgGet, Path: "/"})
				if err != nil {
					t.Fatal(err)
				}
				if err := resp.Err(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
