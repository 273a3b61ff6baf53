package session

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/namespace"
)

// echoServer is a tiny latch server over real QUIC on loopback. Its
// handler answers by request type:
//   - Get: echoes Path and Data (or Limit zero bytes), Rev 42.
//   - Lock: sends Queued, then Granted once release is closed; if the
//     client goes away first, reports on withdrawn.
//   - Watch: sends an ack and three events, then waits for the client to
//     close (reported on watchClosed) or, with FromRev 99, ends with an
//     ErrTooManyWatches frame.
//   - Sync: blocks until the client cancels, reported on canceled.
//   - Hello: CheckHello; announces FeatureMux unless cfg.DisableMux.
//   - Mux: serves the calls (Get, Sync; Get "/reset" resets the mux
//     stream) with MuxServer, counted in muxStreams.
type echoServer struct {
	mux         bool
	muxStreams  atomic.Int64 // mux streams opened so far
	ln          *Listener
	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	release     chan struct{}
	withdrawn   chan struct{}
	watchClosed chan struct{}
	canceled    chan struct{}
	inFlight    atomic.Int64 // handlers running now
	streams     atomic.Int64 // streams accepted so far
	mu          sync.Mutex
	conns       []*Conn
}

// testClientName is the identity of the tests' client certificate.
const testClientName = "test-client"

func devTLS(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	d, err := EnsureDevCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ServerTLS(d.ServerCert, d.ServerKey, d.CA)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := d.Client(testClientName)
	if err != nil {
		t.Fatal(err)
	}
	client, err = ClientTLS(d.CA, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return server, client
}

func startEcho(t testing.TB, srvTLS *tls.Config, cfg Config) *echoServer {
	t.Helper()
	ln, err := Listen("127.0.0.1:0", srvTLS, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &echoServer{
		ln: ln, ctx: ctx, cancel: cancel, mux: !cfg.DisableMux,
		release:     make(chan struct{}),
		withdrawn:   make(chan struct{}, 100),
		watchClosed: make(chan struct{}, 100),
		canceled:    make(chan struct{}, 100),
	}
	s.wg.Add(1)
	go s.acceptLoop()
	t.Cleanup(s.stop)
	return s
}

func (s *echoServer) stop() {
	s.cancel()
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.CloseWithError(ConnShutdown, "test over")
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *echoServer) addr() string { return s.ln.Addr().String() }

func (s *echoServer) acceptLoop() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept(s.ctx)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, conn)
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(conn)
	}
}

func (s *echoServer) serveConn(conn *Conn) {
	defer s.wg.Done()
	for {
		str, err := conn.AcceptStream(s.ctx)
		if err != nil {
			return
		}
		s.streams.Add(1)
		s.wg.Add(1)
		go s.serveStream(conn, str)
	}
}

func (s *echoServer) serveStream(conn *Conn, str *quic.Stream) {
	defer s.wg.Done()
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	defer EndStream(str)
	req, err := ReadRequest(str, conn.MaxFrameSize())
	if err != nil {
		Reject(str, err)
		return
	}
	switch req.Type {
	case MsgHello:
		if err := CheckHello(req); err != nil {
			Reject(str, err)
			return
		}
		hello := &Response{ProtocolVersion: ProtocolVersion, ServerID: "echo"}
		if s.mux {
			hello.Features = FeatureMux
		}
		Reply(str, hello)
	case MsgMux:
		s.muxStreams.Add(1)
		s.inFlight.Add(-1) // the mux stream is no request; its calls are
		s.serveMux(conn, str)
		s.inFlight.Add(1)
	case MsgGet:
		Reply(str, echoGet(req))
	case MsgLock:
		if err := WriteResponse(str, &Response{Lock: LockQueued, Node: req.Path + "/lock-0000000001", Rev: 7}); err != nil {
			return
		}
		select {
		case <-s.release:
			Reply(str, &Response{Lock: LockGranted, Node: req.Path + "/lock-0000000001", Token: 7})
		case <-str.Context().Done():
			s.withdrawn <- struct{}{}
		case <-s.ctx.Done():
		}
	case MsgWatch:
		frames := []*Response{{Rev: 10}}
		for i := range 3 {
			frames = append(frames, &Response{Events: []WatchEvent{{Type: namespace.EventDataChanged, Path: req.Path, Rev: uint64(11 + i)}}})
		}
		for _, f := range frames {
			if err := WriteResponse(str, f); err != nil {
				s.watchClosed <- struct{}{} // the client left mid-stream
				return
			}
		}
		if req.FromRev == 99 {
			Reply(str, ErrorResponse(fmt.Errorf("%w: limit 3", ErrTooManyWatches)))
			return
		}
		select {
		case <-str.Context().Done():
			s.watchClosed <- struct{}{}
		case <-s.ctx.Done():
		}
	case MsgSync:
		s.sync(str.Context())
	default:
		Reject(str, fmt.Errorf("%w: %v", ErrUnknownType, req.Type))
	}
}

func echoGet(req *Request) *Response {
	data := req.Data
	if req.Limit > 0 {
		data = make([]byte, req.Limit)
	}
	return &Response{Path: req.Path, Data: data, Rev: 42}
}

// sync blocks until ctx ends (reported on canceled) or the server stops.
func (s *echoServer) sync(ctx context.Context) {
	select {
	case <-ctx.Done():
		s.canceled <- struct{}{}
	case <-s.ctx.Done():
	}
}

func (s *echoServer) serveMux(conn *Conn, str *quic.Stream) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	m := NewMuxServer(ctx, str, conn.MaxFrameSize(), 5*time.Second)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		call, err := m.Next()
		if err != nil {
			return
		}
		switch call.Req.Type {
		case MsgGet:
			if call.Req.Path == "/reset" {
				abort(str, StreamCanceled)
				return
			}
			m.Reply(call, echoGet(call.Req))
		case MsgSync:
			wg.Go(func() {
				s.inFlight.Add(1)
				defer s.inFlight.Add(-1)
				s.sync(call.Ctx)
				m.Reply(call, &Response{})
			})
		default:
			m.Reply(call, ErrorResponse(fmt.Errorf("%w: %v", ErrUnknownType, call.Req.Type)))
		}
	}
}

func dialTest(t testing.TB, addr string, cliTLS *tls.Config, cfg Config) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := Dial(ctx, addr, cliTLS, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func recv(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestHelloAndRoundTripConcurrent(t *testing.T) {
	srvTLS, cliTLS := devTLS(t)
	s := startEcho(t, srvTLS, Config{})
	conn := dialTest(t, s.addr(), cliTLS, Config{})
	ctx := testCtx(t)

	hello, err := Hello(ctx, conn, "test")
	if err != nil {
		t.Fatal(err)
	}
	if hello.ServerID != "echo" || hello.ProtocolVersion != ProtocolVersion {
		t.Fatalf("hello = %+v", hello)
	}

	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			path := fmt.Sprintf("/k/%d", i)
			data := bytes.Repeat([]byte{byte(i)}, i*10)
			resp, err := RoundTrip(ctx, conn, &Request{Type: MsgGet, Path: path, Data: data})
			switch {
			case err != nil:
				errs <- err
			case resp.Path != path || !bytes.Equal(resp.Data, data) || resp.Rev != 42:
				errs <- fmt.Errorf("request %d got %q, %d bytes, rev %d", i, resp.Path, len(resp.Data), resp.Rev)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestHelloWrongVersionRejected(t *testing.T) {
	srvTLS, cliTLS := devTLS(t)
	s := startEcho(t, srvTLS, Config{})
	conn := dialTest(t, s.addr(), cliTLS, Config{})
	resp, err := RoundTrip(testCtx(t), conn, &Request{Type: MsgHello, ProtocolVersion: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Err(); !errors.Is(err, ErrVersion) {
		t.Fatalf("Hello with version 2: %v, want ErrVersion", err)
	}
}

func TestALPNMismatchFailsHandshake(t *testing.T) {
	srvTLS, cliTLS := devTLS(t)
	s := startEcho(t, srvTLS, Config{})
	other := cliTLS.Clone()
	other.NextProtos = []string{"latch/2"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	qc, err := quic.DialAddr(ctx, s.addr(), other, ClientQUICConfig(Config{}))
	if err == nil {
		qc.CloseWithError(0, "")
		t.Fatal("handshake with ALPN latch/2 succeeded")
	}
}

func TestBlockedStreamDoesNotDelayOthers(t *testing.T) {
	srvTLS, cliTLS := devTLS(t)
	s := startEcho(t, srvTLS, Config{})
	conn := dialTest(t, s.addr(), cliTLS, Config{})
	ctx := testCtx(t)

	lock, err := OpenStreaming(ctx, conn, &Request{Type: MsgLock, Path: "/l"})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	queued, err := lock.Next()
	if err != nil || queued.Lock != LockQueued || queued.Node != "/l/lock-0000000001" {
		t.Fatalf("first lock frame = %+v, %v", queued, err)
	}

	// The lock waits on the server; unrelated requests on the same
	// connection must complete meanwhile.
	var wg sync.WaitGroup
	var done atomic.Int64
	for i := range 50 {
		wg.Go(func() {
			resp, err := RoundTrip(ctx, conn, &Request{Type: MsgGet, Path: fmt.Sprintf("/x/%d", i)})
			if err != nil || resp.Rev != 42 {
				t.Errorf("get %d behind a blocked lock: %+v, %v", i, resp, err)
				return
			}
			done.Add(1)
		})
	}
	wg.Wait()
	if done.Load() != 50 {
		t.Fatalf("%d of 50 requests completed while the lock waited", done.Load())
	}

	close(s.release)
	granted, err := lock.Next()
	if err != nil || granted.Lock != LockGranted || granted.Token != 7 {
		t.Fatalf("grant frame = %+v, %v", granted, err)
	}
	if _, err := lock.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the grant: %v, want io.EOF", err)
	}
}

func TestStreamingWatchFramesAndErrorFrame(t *testing.T) {
	srvTLS, cliTLS := devTLS(t)
	s := startEcho(t, srvTLS, Config{})
	conn := dialTest(t, s.addr(), cliTLS, Config{})
	ctx := testCtx(t)

	read := func(w *StreamReader) []uint64 {
		t.Helper()
		var revs []uint64
		ack, err := w.Next()
		if err != nil || ack.Rev != 10 || len(ack.Events) != 0 {
			t.Fatalf("ack = %+v, %v", ack, err)
		}
		for range 3 {
			f, err := w.Next()
			if err != nil || len(f.Events) != 1 {
				t.Fatalf("event frame = %+v, %v", f, err)
			}
			revs = append(revs, f.Events[0].Rev)
		}
		return revs
	}

	// A watch the server ends with an error code.
	w, err := OpenStreaming(ctx, conn, &Request{Type: MsgWatch, Path: "/w", FromRev: 99})
	if err != nil {
		t.Fatal(err)
	}
	if revs := read(w); fmt.Sprint(revs) != "[11 12 13]" {
		t.Fatalf("revs = %v", revs)
	}
	_, err = w.Next()
	if !errors.Is(err, ErrTooManyWatches) || err.Error() != "latch: too many watches: limit 3" {
		t.Fatalf("final frame: %v, want ErrTooManyWatches with the server's message", err)
	}
	if _, err2 := w.Next(); err2 != err {
		t.Fatalf("Next after the end = %v, want the same error again", err2)
	}
	w.Close()

	// A watch the client closes: the server notices.
	w, err = OpenStreaming(ctx, conn, &Request{Type: MsgWatch, Path: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	read(w)
	w.Close()
	recv(t, s.watchClosed, "the server to see the watch closed")
	if _, err := w.Next(); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("Next after Close = %v, want ErrStreamClosed", err)
	}
}

func TestContextCancelResetsStream(t *testing.T) {
	srvTLS, cliTLS := devTLS(t)
	s := startEcho(t, srvTLS, Config{})
	conn := dialTest(t, s.addr(), cliTLS, Config{})

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := RoundTrip(ctx, conn, &Request{Type: MsgSync})
		errc <- err
	}()
	waitFor(t, "the server to hold the request", func() bool { return s.inFlight.Load() == 1 })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("RoundTrip after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RoundTrip did not return after cancel")
	}
	recv(t, s.canceled, "the server to see the request canceled")

	// A lock wait abandoned through its context withdraws on the server.
	lctx, lcancel := context.WithCancel(context.Background())
	lock, err := OpenStreaming(lctx, conn, &Request{Type: MsgLock, Path: "/l"})
	if err != nil {
		t.Fatal(err)
	}
	if f, err := lock.Next(); err != nil || f.Lock != LockQueued {
		t.Fatalf("queued frame = %+v, %v", f, err)
	}
	lcancel()
	if _, err := lock.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after cancel = %v, want context.Canceled", err)
	}
	recv(t, s.withdrawn, "the server to see the lock request withdrawn")
	lock.Close()
}

func TestMaxFrameSize(t *testing.T) {
	srvTLS, cliTLS := devTLS(t)
	s := startEcho(t, srvTLS, Config{MaxFrameSize: 4 << 10})
	ctx := testCtx(t)

	// A client whose limit is higher sends a frame above the server's:
	// the server refuses it without reading it and says why.
	big := dialTest(t, s.addr(), cliTLS, Config{MaxFrameSize: 4 << 20})
	resp, err := RoundTrip(ctx, big, &Request{Type: MsgGet, Path: "/big", Data: make([]byte, 2<<20)})
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Err(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversize request answered %v, want ErrFrameTooLarge", err)
	}
	// The connection is still good.
	if resp, err := RoundTrip(ctx, big, &Request{Type: MsgGet, Path: "/small"}); err != nil || resp.Path != "/small" {
		t.Fatalf("request after the rejected one: %+v, %v", resp, err)
	}

	// A client refuses locally to send what its own limit forbids.
	small := dialTest(t, s.addr(), cliTLS, Config{MaxFrameSize: 4 << 10})
	before := s.streams.Load()
	_, err = RoundTrip(ctx, small, &Request{Type: MsgGet, Data: make([]byte, 8<<10)})
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("local oversize: %v, want ErrFrameTooLarge", err)
	}
	if got := s.streams.Load(); got != before {
		t.Fatalf("an oversize request reached the server (%d streams, was %d)", got, before)
	}

	// A response above the client's limit fails on the client.
	resp, err = RoundTrip(ctx, big, &Request{Type: MsgGet, Data: make([]byte, 3<<10)})
	if err != nil || len(resp.Data) != 3<<10 {
		t.Fatalf("3 KiB echo: %v", err)
	}
	tiny := dialTest(t, s.addr(), cliTLS, Config{MaxFrameSize: 1 << 10})
	_, err = RoundTrip(ctx, tiny, &Request{Type: MsgGet, Path: "/p", Limit: 2 << 10})
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversize response: %v, want ErrFrameTooLarge", err)
	}
}

// With a server that allows only 4 concurrent streams, hundreds of
// requests that end every way (answered, cancelled, streaming closed,
// streaming ended by the server) must all give their stream credit back:
// afterwards 4 requests can still be in flight at once.
func TestNoStreamLeak(t *testing.T) {
	const limit = 4
	srvTLS, cliTLS := devTLS(t)
	s := startEcho(t, srvTLS, Config{MaxIncomingStreams: limit})
	conn := dialTest(t, s.addr(), cliTLS, Config{})
	ctx := testCtx(t)

	for i := range 100 {
		if _, err := RoundTrip(ctx, conn, &Request{Type: MsgGet, Path: fmt.Sprint("/", i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the get handlers to end", func() bool { return s.inFlight.Load() == 0 })
	for range 10 {
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { _, err := RoundTrip(cctx, conn, &Request{Type: MsgSync}); errc <- err }()
		waitFor(t, "the sync to reach the server", func() bool { return s.inFlight.Load() == 1 })
		cancel()
		<-errc
		recv(t, s.canceled, "cancel seen by the server")
		waitFor(t, "the handler to end", func() bool { return s.inFlight.Load() == 0 })
	}
	for range 10 {
		w, err := OpenStreaming(ctx, conn, &Request{Type: MsgWatch, Path: "/w"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Next(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		recv(t, s.watchClosed, "watch close seen by the server")
	}
	for range 10 {
		w, err := OpenStreaming(ctx, conn, &Request{Type: MsgWatch, Path: "/w", FromRev: 99})
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := w.Next(); err != nil {
				break
			}
		}
		w.Close()
	}
	// Streams the server ended, read to their end and never closed (a
	// granted lock): they retire without an abort.
	close(s.release)
	for range 10 {
		l, err := OpenStreaming(ctx, conn, &Request{Type: MsgLock, Path: "/l"})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []LockPhase{LockQueued, LockGranted} {
			if f, err := l.Next(); err != nil || f.Lock != want {
				t.Fatalf("lock frame %+v %v, want %v", f, err, want)
			}
		}
		if _, err := l.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("after the grant: %v, want the stream's end", err)
		}
	}
	waitFor(t, "all handlers to end", func() bool { return s.inFlight.Load() == 0 })

	var readers []*StreamReader
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for range limit {
		r, err := OpenStreaming(sctx, conn, &Request{Type: MsgSync})
		if err != nil {
			t.Fatalf("opening stream %d of %d after the churn: %v (credits leaked)", len(readers)+1, limit, err)
		}
		readers = append(readers, r)
	}
	waitFor(t, fmt.Sprintf("%d concurrent streams on the server", limit), func() bool { return s.inFlight.Load() == limit })
	for _, r := range readers {
		r.Close()
	}
	for range limit {
		recv(t, s.canceled, "cancel seen by the server")
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []Config{
		{MaxFrameSize: -1},
		{MaxFrameSize: 100},
		{MaxFrameSize: 65<<20 + 1},
		{MaxIncomingStreams: -1},
		{KeepAlivePeriod: -time.Second},
		{MaxIdleTimeout: -time.Second},
		{HandshakeTimeout: -time.Second},
		{KeepAlivePeriod: time.Minute, MaxIdleTimeout: time.Second},
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%+v: Validate = %v, want ErrBadConfig", c, err)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
	if _, err := Listen("127.0.0.1:0", nil, Config{MaxFrameSize: -1}, nil); !errors.Is(err, ErrBadConfig) {
		t.Errorf("Listen with a bad config: %v", err)
	}
}

// TestWindowsSizedForFrames: the flow-control windows bound what a peer
// can park in this side's memory far below quic-go's bulk-transfer
// defaults (15 MiB a connection), yet a largest frame fits a stream's
// window and the connection's, and largest values and frames go through
// many at once, on the mux stream and on streams of their own.
func TestWindowsSizedForFrames(t *testing.T) {
	for _, c := range []Config{{}, {MaxFrameSize: 8 << 20}} {
		for name, qc := range map[string]*quic.Config{"server": ServerQUICConfig(c), "client": ClientQUICConfig(c)} {
			frame := uint64(c.withDefaults().MaxFrameSize + frameHeaderLen)
			switch {
			case qc.InitialStreamReceiveWindow < 64<<10+1024:
				t.Errorf("%s: initial stream window %d does not hold a largest value", name, qc.InitialStreamReceiveWindow)
			case qc.MaxStreamReceiveWindow < frame || qc.MaxConnectionReceiveWindow < qc.MaxStreamReceiveWindow:
				t.Errorf("%s: windows %d/%d below a largest frame %d", name, qc.MaxStreamReceiveWindow, qc.MaxConnectionReceiveWindow, frame)
			case c.MaxFrameSize == 0 && qc.MaxConnectionReceiveWindow > 4<<20:
				t.Errorf("%s: connection window %d, want at most 4 MiB", name, qc.MaxConnectionReceiveWindow)
			}
		}
	}

	srvTLS, cliTLS := devTLS(t)
	for _, mux := range []bool{false, true} {
		s := startEcho(t, srvTLS, Config{DisableMux: !mux})
		conn := dialTest(t, s.addr(), cliTLS, Config{})
		ctx := testCtx(t)
		if _, err := Hello(ctx, conn, "test"); err != nil {
			t.Fatal(err)
		}
		sizes := []int{DefaultMaxFrameSize - 1024, DefaultMaxFrameSize - 1024}
		for range 32 {
			sizes = append(sizes, 64<<10, 32<<10) // a largest value on its own stream; on the mux stream
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(sizes))
		for i, n := range sizes {
			wg.Go(func() {
				data := bytes.Repeat([]byte{byte(i)}, n)
				resp, err := RoundTrip(ctx, conn, &Request{Type: MsgGet, Path: "/v", Data: data})
				switch {
				case err != nil:
					errs <- fmt.Errorf("mux %v, %d bytes: %w", mux, n, err)
				case !bytes.Equal(resp.Data, data):
					errs <- fmt.Errorf("mux %v: %d bytes came back as %d", mux, n, len(resp.Data))
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		conn.Close()
	}
}
