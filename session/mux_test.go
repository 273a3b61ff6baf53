package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// startMuxEcho starts an echo server with srv and dials it with cli,
// saying Hello, so RoundTrip uses the mux when both allow it.
func startMuxEcho(t *testing.T, srv, cli Config) (*echoServer, *Conn) {
	t.Helper()
	srvTLS, cliTLS := devTLS(t)
	s := startEcho(t, srvTLS, srv)
	conn := dialTest(t, s.addr(), cliTLS, cli)
	if _, err := Hello(testCtx(t), conn, "mux-test"); err != nil {
		t.Fatal(err)
	}
	return s, conn
}

func getEcho(ctx context.Context, conn *Conn, i int) error {
	path := fmt.Sprintf("/k/%d", i)
	data := bytes.Repeat([]byte{byte(i)}, i%100*10)
	resp, err := RoundTrip(ctx, conn, &Request{Type: MsgGet, Path: path, Data: data})
	switch {
	case err != nil:
		return err
	case resp.Path != path || !bytes.Equal(resp.Data, data) || resp.Rev != 42 || resp.Call != 0 && resp.Err() != nil:
		return fmt.Errorf("request %d got %q, %d bytes, rev %d, %v", i, resp.Path, len(resp.Data), resp.Rev, resp.Err())
	}
	return nil
}

// Concurrent calls on one connection share one mux stream, and each gets
// its own answer.
func TestMuxCallsGetTheirOwnAnswers(t *testing.T) {
	s, conn := startMuxEcho(t, Config{}, Config{})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Go(func() {
			if err := getEcho(ctx, conn, i); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n, m := s.streams.Load(), s.muxStreams.Load(); n != 2 || m != 1 {
		t.Fatalf("%d streams, %d of them mux streams; want Hello's and one mux stream", n, m)
	}

	// A request above MuxMaxFrame takes a stream of its own.
	big := &Request{Type: MsgGet, Path: "/big", Data: make([]byte, MuxMaxFrame+1)}
	resp, err := RoundTrip(ctx, conn, big)
	if err != nil || resp.Path != "/big" || len(resp.Data) != len(big.Data) {
		t.Fatalf("large request: %+v, %v", resp, err)
	}
	if n := s.streams.Load(); n != 3 {
		t.Fatalf("%d streams after a large request, want 3", n)
	}
	if big.Call != 0 {
		t.Fatalf("RoundTrip left Call %d on the caller's request", big.Call)
	}
}

// A call whose ctx ends returns at once; the server sees the cancel; the
// other calls on the mux stream go on.
func TestMuxCancelOneCall(t *testing.T) {
	s, conn := startMuxEcho(t, Config{}, Config{})
	ctx := testCtx(t)
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := RoundTrip(cctx, conn, &Request{Type: MsgSync})
		errc <- err
	}()
	other := make(chan error, 1)
	go func() {
		_, err := RoundTrip(ctx, conn, &Request{Type: MsgSync})
		other <- err
	}()
	waitFor(t, "two calls held by the server", func() bool { return s.inFlight.Load() == 2 })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	recv(t, s.canceled, "the server to see the call cancelled")
	waitFor(t, "one call left on the server", func() bool { return s.inFlight.Load() == 1 })
	for i := range 20 {
		if err := getEcho(ctx, conn, i); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-other:
		t.Fatalf("the other call ended: %v", err)
	default:
	}
	if m := s.muxStreams.Load(); m != 1 {
		t.Fatalf("%d mux streams; a cancel must not end the stream", m)
	}
}

// A mux stream reset under pending calls fails each as a stream error
// (the connection is fine); the next call opens a new mux stream.
func TestMuxResetFailsPendingCalls(t *testing.T) {
	s, conn := startMuxEcho(t, Config{}, Config{})
	ctx := testCtx(t)
	const pending = 3
	errc := make(chan error, pending)
	for range pending {
		go func() {
			_, err := RoundTrip(ctx, conn, &Request{Type: MsgSync})
			errc <- err
		}()
	}
	waitFor(t, "calls held by the server", func() bool { return s.inFlight.Load() == pending })
	_, err := RoundTrip(ctx, conn, &Request{Type: MsgGet, Path: "/reset"})
	var se *quic.StreamError
	if !errors.As(err, &se) {
		t.Fatalf("call on a reset mux stream: %v, want a *quic.StreamError", err)
	}
	for range pending {
		if err := <-errc; !errors.As(err, &se) {
			t.Fatalf("pending call: %v, want a *quic.StreamError", err)
		}
	}
	if err := getEcho(ctx, conn, 1); err != nil {
		t.Fatalf("call after the reset: %v", err)
	}
	if m := s.muxStreams.Load(); m != 2 {
		t.Fatalf("%d mux streams, want a second one after the reset", m)
	}
	if conn.Context().Err() != nil {
		t.Fatal("the connection closed")
	}
}

// Against a server without FeatureMux (an older build), or with a client
// that disables it, every request takes a stream of its own.
func TestMuxFallback(t *testing.T) {
	for _, tc := range []struct {
		name     string
		srv, cli Config
	}{
		{"server without the feature", Config{DisableMux: true}, Config{}},
		{"client with DisableMux", Config{}, Config{DisableMux: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, conn := startMuxEcho(t, tc.srv, tc.cli)
			ctx := testCtx(t)
			for i := range 10 {
				if err := getEcho(ctx, conn, i); err != nil {
					t.Fatal(err)
				}
			}
			if n, m := s.streams.Load(), s.muxStreams.Load(); n != 11 || m != 0 {
				t.Fatalf("%d streams, %d mux streams; want one stream per request", n, m)
			}
		})
	}
}

// frames is a frameWriter that keeps what is written.
type frames struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (f *frames) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.Write(p)
}
func (f *frames) TryWriteAll(p []byte) error       { _, err := f.Write(p); return err }
func (f *frames) SetWriteDeadline(time.Time) error { return nil }

// answers decodes every frame written.
func (f *frames) answers(t testing.TB) []*Response {
	t.Helper()
	var out []*Response
	r := bytes.NewReader(f.buf.Bytes())
	for {
		resp, err := ReadResponse(r, DefaultMaxFrameSize)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("the server wrote an unreadable frame: %v", err)
		}
		out = append(out, resp)
	}
}

func muxInput(reqs ...*Request) []byte {
	var b []byte
	for _, r := range reqs {
		b = append(b, mustFrame(r)...)
	}
	return b
}

// The server's reading of a mux stream: what a client may send, and what
// ends the stream (the caller then closes the connection).
func TestMuxServerInput(t *testing.T) {
	get := func(id uint64) *Request { return &Request{Type: MsgGet, Call: id, Path: "/a"} }
	hugeHeader := []byte{0, 1, 0, 1} // 64 KiB + 1
	for _, tc := range []struct {
		name    string
		in      []byte
		calls   int    // calls Next returns before the error
		want    error  // the error that ends it
		answers []Code // what the server wrote by itself
	}{
		{"calls then the end", muxInput(get(1), get(2)), 2, io.EOF, nil},
		{"call without an id", muxInput(get(1), get(0)), 1, ErrMalformed, nil},
		{"duplicate id", muxInput(get(5), get(5)), 1, ErrMalformed, nil},
		{"an id below the last one (ids only increase)", muxInput(get(5), get(4)), 1, ErrMalformed, nil},
		{"an id again after its cancel", muxInput(get(5), &Request{Type: MsgCancel, Call: 5}, get(5)), 1, ErrMalformed, nil},
		{"cancel of an unknown call is ignored", muxInput(&Request{Type: MsgCancel, Call: 9}, get(1)), 1, io.EOF, nil},
		{"garbage body", append(muxInput(get(1)), 0, 0, 0, 2, 0xc1, 0xc1), 1, ErrMalformed, nil},
		{"frame above MuxMaxFrame", append(muxInput(get(1)), hugeHeader...), 1, ErrFrameTooLarge, nil},
		{"truncated frame", muxInput(get(1))[:5], 0, io.ErrUnexpectedEOF, nil},
		{"frame above the server's limit is answered", muxInput(&Request{Type: MsgGet, Call: 3, Data: make([]byte, 2048)}, get(4)), 1, io.EOF, []Code{CodeFrameTooLarge}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &frames{}
			m := newMuxServer(context.Background(), bytes.NewReader(tc.in), w, 1024, time.Second)
			var err error
			calls := 0
			for {
				if _, err = m.Next(); err != nil {
					break
				}
				calls++
			}
			if calls != tc.calls || !errors.Is(err, tc.want) {
				t.Fatalf("%d calls, then %v; want %d calls, then %v", calls, err, tc.calls, tc.want)
			}
			got := w.answers(t)
			if len(got) != len(tc.answers) {
				t.Fatalf("server wrote %d answers, want %d", len(got), len(tc.answers))
			}
			for i, resp := range got {
				if resp.Code != tc.answers[i] || resp.Call == 0 {
					t.Fatalf("answer %d: %+v", i, resp)
				}
			}
		})
	}
}

// A cancel ends the call's Ctx, and its Reply sends nothing; other calls
// are answered with their ids.
func TestMuxServerCancel(t *testing.T) {
	r, pw := io.Pipe()
	w := &frames{}
	m := newMuxServer(context.Background(), r, w, DefaultMaxFrameSize, time.Second)
	go pw.Write(muxInput(&Request{Type: MsgSync, Call: 1}, &Request{Type: MsgGet, Call: 2}, &Request{Type: MsgCancel, Call: 1}))
	first, err := m.Next()
	if err != nil {
		t.Fatal(err)
	}
	second, err := m.Next()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); m.Next() }() // reads the cancel, then waits
	select {
	case <-first.Ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the cancel did not end the call's Ctx")
	}
	if second.Ctx.Err() != nil {
		t.Fatal("the cancel ended another call")
	}
	if err := m.Reply(first, &Response{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Reply(second, &Response{Rev: 7}); err != nil {
		t.Fatal(err)
	}
	if second.Ctx.Err() == nil {
		t.Fatal("Reply did not end the call's Ctx")
	}
	pw.Close()
	<-done
	got := w.answers(t)
	if len(got) != 1 || got[0].Call != 2 || got[0].Rev != 7 {
		t.Fatalf("answers %+v; want only call 2's", got)
	}
}

// Once the mux stream is over (its ctx ended), answers of calls still
// running are dropped: nobody reads them, and a failed write must not
// look like a client that stopped reading.
func TestMuxServerReplyAfterEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &frames{}
	m := newMuxServer(ctx, bytes.NewReader(muxInput(&Request{Type: MsgSync, Call: 1})), w, DefaultMaxFrameSize, time.Second)
	call, err := m.Next()
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if call.Ctx.Err() == nil {
		t.Fatal("the stream's end did not end the call's Ctx")
	}
	if err := m.Reply(call, &Response{}); err != nil || w.buf.Len() != 0 {
		t.Fatalf("Reply after the end: %v, wrote %d bytes", err, w.buf.Len())
	}
}

// Answers given while another Reply gathers join its write: the joiner
// returns at once (it does not wait for the stream), and its frame goes
// out whole with the gatherer's. Many concurrent Replies each arrive
// exactly once, whichever write carried them.
func TestMuxServerGathersAnswers(t *testing.T) {
	var in []*Request
	for id := uint64(1); id <= 200; id++ {
		in = append(in, &Request{Type: MsgGet, Call: id})
	}
	w := &frames{}
	m := newMuxServer(context.Background(), bytes.NewReader(muxInput(in...)), w, DefaultMaxFrameSize, time.Second)
	calls := make([]*MuxCall, len(in))
	for i := range calls {
		c, err := m.Next()
		if err != nil {
			t.Fatal(err)
		}
		calls[i] = c
	}

	// A gatherer mid-yield: it holds the stream and takes answers.
	m.wmu.Lock()
	m.g.mu.Lock()
	m.g.pending, m.g.open = m.g.pending[:0], true
	m.g.mu.Unlock()
	joined := make(chan error, 1)
	go func() { joined <- m.Reply(calls[0], &Response{Rev: 1}) }()
	select {
	case err := <-joined:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an answer given while another gathers waited for the stream instead of joining")
	}
	if w.buf.Len() != 0 {
		t.Fatal("the joined answer was written before the gatherer's write")
	}
	m.g.mu.Lock()
	m.g.open = false
	buf := m.g.pending
	m.g.mu.Unlock()
	if err := m.write(buf); err != nil {
		t.Fatal(err)
	}
	m.wmu.Unlock()

	var wg sync.WaitGroup
	for i, c := range calls[1:] {
		wg.Go(func() {
			if err := m.Reply(c, &Response{Rev: uint64(i + 2), Path: fmt.Sprintf("/%d", c.ID)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, resp := range w.answers(t) {
		if seen[resp.Call] {
			t.Fatalf("call %d answered twice", resp.Call)
		}
		seen[resp.Call] = true
		if resp.Rev != resp.Call || resp.Call > 1 && resp.Path != fmt.Sprintf("/%d", resp.Call) {
			t.Fatalf("call %d got the answer %+v", resp.Call, resp)
		}
	}
	if len(seen) != len(calls) {
		t.Fatalf("%d of %d calls answered", len(seen), len(calls))
	}
}

// A call made while another gathers joins its write with the next id, so
// the ids on the stream still only increase (the server refuses any
// other order); a call too large for the mux stream, or made when nobody
// gathers, does not join.
func TestMuxCallsJoinTheGatheredWrite(t *testing.T) {
	m := newMux(&Conn{maxFrame: DefaultMaxFrameSize})
	ms := &muxStream{calls: map[uint64]chan<- muxAnswer{}}
	if _, _, ok := m.join(&Request{Type: MsgGet}, make(chan muxAnswer, 1)); ok {
		t.Fatal("a call joined while nobody gathered")
	}
	first := m.next.Add(1)
	m.gathering, m.g.open, m.g.pending = ms, true, mustFrame(&Request{Type: MsgGet, Call: first})
	for i := range 5 {
		_, id, ok := m.join(&Request{Type: MsgSet, Path: fmt.Sprintf("/%d", i)}, make(chan muxAnswer, 1))
		if !ok || id <= first {
			t.Fatalf("call %d: joined %v with id %d after the gatherer's %d", i, ok, id, first)
		}
	}
	if _, _, ok := m.join(&Request{Type: MsgSet, Data: make([]byte, MuxMaxFrame+1)}, make(chan muxAnswer, 1)); ok {
		t.Fatal("a call too large for the mux stream joined")
	}
	r := bytes.NewReader(m.g.pending)
	last := uint64(0)
	for n := 0; ; n++ {
		req := new(Request)
		_, err := readMessage(r, MuxMaxFrame, req)
		if errors.Is(err, io.EOF) {
			if n != 6 {
				t.Fatalf("%d frames gathered, want 6", n)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if req.Call <= last {
			t.Fatalf("frame %d has id %d after %d", n, req.Call, last)
		}
		if _, waiting := ms.calls[req.Call]; n > 0 && !waiting {
			t.Fatalf("call %d was gathered but waits for no answer", req.Call)
		}
		last = req.Call
	}
}
