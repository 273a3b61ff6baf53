package server_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// rawStream opens a stream on conn, writes b, closes the write side and
// returns the server's response, or the read error (io.EOF: the server
// ended the stream without an answer).
func rawStream(t *testing.T, conn *session.Conn, b []byte) (*session.Response, error) {
	t.Helper()
	str, err := conn.OpenStreamSync(ctxT(t))
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	defer str.CancelRead(session.StreamDone)
	// The server may stop reading early (oversized frame): the write then
	// fails, and its answer still says why.
	_, _ = str.Write(b)
	_ = str.Close()
	return session.ReadResponse(str, conn.MaxFrameSize())
}

// header is a frame header announcing n body bytes.
func header(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func encode(t *testing.T, req *session.Request) []byte {
	t.Helper()
	b, err := session.EncodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFrontBadInput(t *testing.T) {
	fc := startFront(t, 1, func(_ int, cfg *server.Config) {
		cfg.MaxRequestsPerConn, cfg.MaxWatchesPerConn = 3, 2
	})
	conn := fc.dial(0)
	healthy := func() {
		t.Helper()
		ok(t, conn, &session.Request{Type: session.MsgGet, Path: "/"})
	}
	valid := encode(t, &session.Request{Type: session.MsgGet, Path: "/"})
	huge := header(0x7fffffff)

	for _, tc := range []struct {
		name  string
		bytes []byte
		want  error // nil: the stream ends without an answer
	}{
		{"empty stream", nil, nil},
		{"truncated header", []byte{0, 0}, session.ErrMalformed},
		{"truncated body", append(header(100), 1, 2, 3), session.ErrMalformed},
		{"empty frame", []byte{0, 0, 0, 0}, session.ErrMalformed},
		{"garbage msgpack", append(header(5), 0xc1, 0xc1, 0xc1, 0xc1, 0xc1), session.ErrMalformed},
		{"wrong msgpack type", append(header(4), 0xa3, 'a', 'b', 'c'), session.ErrMalformed},
		{"bytes after the frame", append(append([]byte(nil), valid...), 0x90), session.ErrMalformed},
		{"oversized header", huge, session.ErrFrameTooLarge},
		{"oversized body", append(header(2<<20), make([]byte, 2<<20)...), session.ErrFrameTooLarge},
		{"unknown type", encode(t, &session.Request{Type: 200}), session.ErrUnknownType},
		{"invalid type", encode(t, &session.Request{Type: session.MsgInvalid}), session.ErrUnknownType},
		{"session not attached", encode(t, &session.Request{Type: session.MsgGet, Path: "/", Session: 12345}), session.ErrUnknownSession},
		{"keepalive of unknown session", encode(t, &session.Request{Type: session.MsgKeepAlive, Session: 12345}), session.ErrUnknownSession},
		{"close of no session", encode(t, &session.Request{Type: session.MsgCloseSession}), session.ErrUnknownSession},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := rawStream(t, conn, tc.bytes)
			switch {
			case tc.want == nil && !errors.Is(err, io.EOF):
				t.Fatalf("answer %+v, %v; want the stream ended without one", resp, err)
			case tc.want != nil && err != nil:
				t.Fatalf("no answer: %v", err)
			case tc.want != nil && !errors.Is(resp.Err(), tc.want):
				t.Fatalf("answer %v, want %v", resp.Err(), tc.want)
			}
			healthy()
		})
	}

	// Announcing huge frames costs the server nothing like their size.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 20 {
		if resp, err := rawStream(t, conn, huge); err != nil || !errors.Is(resp.Err(), session.ErrFrameTooLarge) {
			t.Fatalf("oversized: %v %v", resp, err)
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Fatalf("20 frames announcing 2 GiB allocated %d MiB", grew>>20)
	}

	// Requests in flight beyond MaxRequestsPerConn are refused at once.
	w1 := watch(t, conn, &session.Request{Path: "/"})
	w2 := watch(t, conn, &session.Request{Path: "/"})
	stalled, err := conn.OpenStreamSync(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	stalled.Write([]byte{0, 0}) // half a header: the server waits for more
	servertest.Eventually(t, "a request over the limit is refused", func() error {
		resp, err := rawStream(t, conn, valid)
		if err != nil {
			return err
		}
		if !errors.Is(resp.Err(), session.ErrBusy) {
			return resp.Err() // the stalled stream may not hold its slot yet
		}
		return nil
	})
	stalled.CancelWrite(session.StreamCanceled)
	stalled.CancelRead(session.StreamCanceled)
	w1.sr.Close()
	w2.sr.Close()
	servertest.Eventually(t, "slots freed", func() error {
		return call(t, conn, &session.Request{Type: session.MsgGet, Path: "/"}).Err()
	})
}

// closedWith waits for conn to be closed by the server and returns its
// application error code.
func closedWith(t *testing.T, conn *session.Conn) quic.ApplicationErrorCode {
	t.Helper()
	select {
	case <-conn.Context().Done():
	case <-ctxT(t).Done():
		t.Fatal("connection not closed")
	}
	var ae *quic.ApplicationError
	if !errors.As(context.Cause(conn.Context()), &ae) || !ae.Remote {
		t.Fatalf("connection closed with %v, want an application error from the server", context.Cause(conn.Context()))
	}
	return ae.ErrorCode
}

func TestFrontHelloRequired(t *testing.T) {
	fc := startFront(t, 1, nil)
	healthy := fc.dial(0)

	// Another protocol version: a clear answer, then the connection ends.
	conn := fc.dialRaw(0)
	resp := call(t, conn, &session.Request{Type: session.MsgHello, ProtocolVersion: 99})
	if !errors.Is(resp.Err(), session.ErrVersion) {
		t.Fatalf("hello with version 99: %v", resp.Err())
	}
	if code := closedWith(t, conn); code != session.ConnVersion {
		t.Fatalf("closed with %d, want ConnVersion", code)
	}

	// Anything but Hello first.
	conn = fc.dialRaw(0)
	resp = call(t, conn, &session.Request{Type: session.MsgGet, Path: "/"})
	if !errors.Is(resp.Err(), session.ErrVersion) {
		t.Fatalf("get before hello: %v", resp.Err())
	}
	if code := closedWith(t, conn); code != session.ConnVersion {
		t.Fatalf("closed with %d, want ConnVersion", code)
	}

	// Garbage first.
	conn = fc.dialRaw(0)
	if resp, err := rawStream(t, conn, []byte{0, 0, 0, 1, 0xc1}); err == nil && !errors.Is(resp.Err(), session.ErrMalformed) {
		t.Fatalf("garbage before hello: %v", resp.Err())
	}
	if code := closedWith(t, conn); code != session.ConnProtocol {
		t.Fatalf("closed with %d, want ConnProtocol", code)
	}

	// A repeated Hello is harmless, and the others were not disturbed.
	ok(t, healthy, &session.Request{Type: session.MsgHello, ProtocolVersion: session.ProtocolVersion})
	ok(t, healthy, &session.Request{Type: session.MsgGet, Path: "/"})
}

// With a client CA the server requires a client certificate and records its
// identity on the sessions the client opens; a resume from another
// identity is refused even with the secret.
func TestFrontMutualTLS(t *testing.T) {
	certs, err := session.EnsureDevCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fc := startFront(t, 1, func(_ int, cfg *server.Config) {
		cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA = certs.ServerCert, certs.ServerKey, certs.CA
	})
	cert, key, err := certs.Client("alice")
	if err != nil {
		t.Fatal(err)
	}
	withCert, err := session.ClientTLS(certs.CA, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	fc.tls = withCert
	conn := fc.dial(0)
	open := openSession(t, conn, 5*time.Second)
	list := ok(t, conn, &session.Request{Type: session.MsgSessions})
	if len(list.Sessions) != 1 || list.Sessions[0].Identity != "alice" || list.Sessions[0].ID != open.Session ||
		list.Sessions[0].ExpiresInMillis <= 0 {
		t.Fatalf("sessions %+v", list.Sessions)
	}

	// No certificate: no connection.
	anon, err := session.ClientTLS(certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := session.Dial(ctxT(t), fc.Server(0).ClientAddr(), anon, session.Config{}); err == nil {
		// TLS 1.3 may report the refusal only on first use.
		_, herr := session.Hello(ctxT(t), c, "anon")
		c.Close()
		if herr == nil {
			t.Fatal("a client without a certificate was served")
		}
	}
}

// Every stream's goroutine ends with its stream, while the connection
// lives on: answered, refused, cancelled and abandoned requests and
// closed watches leave nothing behind.
func TestFrontStreamsEnd(t *testing.T) {
	fc := startFront(t, 1, nil)
	conn := fc.dial(0)
	ok(t, conn, &session.Request{Type: session.MsgGet, Path: "/"})
	base := runtime.NumGoroutine()
	for i := range 50 {
		ok(t, conn, &session.Request{Type: session.MsgCreate, Path: "/k" + string(rune('a'+i%26)) + string(rune('a'+i/26))})
		rawStream(t, conn, []byte{0, 0, 0, 9, 1})                  // truncated
		rawStream(t, conn, encode(t, &session.Request{Type: 250})) // unknown
		w := watch(t, conn, &session.Request{Path: "/", Kind: session.WatchChildren})
		w.sr.Close()
		str, err := conn.OpenStreamSync(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		str.Write([]byte{0, 0}) // half a header, then the client gives up
		str.CancelWrite(session.StreamCanceled)
		str.CancelRead(session.StreamCanceled)
	}
	servertest.Eventually(t, "stream goroutines ended", func() error {
		if n := runtime.NumGoroutine(); n > base+5 {
			return fmt.Errorf("%d goroutines, %d before the requests", n, base)
		}
		return nil
	})
	ok(t, conn, &session.Request{Type: session.MsgGet, Path: "/"})
}

// A 1.1 MB frame holding a Multi of 1.1 million nil ops decoded into ~373
// MB before the op limit was checked, and it did so before Hello; eight at
// once killed a member. Decoding is now bounded by the frame: each is
// refused as malformed, and together they cost a small multiple of their
// size.
func TestFrontDecodeAmplification(t *testing.T) {
	fc := startFront(t, 1, nil)
	const ops = 1_100_000
	body := []byte{0x82, 0xa1, 't', byte(session.MsgMulti), 0xa3, 'o', 'p', 's', 0xdd}
	body = binary.BigEndian.AppendUint32(body, ops)
	body = append(body, make([]byte, ops)...)
	for i := range ops {
		body[len(body)-ops+i] = 0xc0 // nil
	}
	frame := append(header(uint32(len(body))), body...)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	errs := make(chan error, 8)
	conns := make([]*session.Conn, 8)
	for i := range conns {
		conns[i] = fc.dialRaw(0) // no Hello: the frame is the first thing sent
		go func() {
			resp, err := rawStream(t, conns[i], frame)
			if err == nil {
				err = resp.Err()
			}
			errs <- err
		}()
	}
	for _, conn := range conns {
		// Malformed before Hello: the answer says so, or the server has
		// already closed the connection as a protocol violation.
		if err := <-errs; !errors.Is(err, session.ErrMalformed) {
			if code := closedWith(t, conn); code != session.ConnProtocol {
				t.Errorf("amplifying frame before hello: %v, closed with %d", err, code)
			}
		}
	}
	runtime.ReadMemStats(&after)
	// The frames themselves are 8.8 MB, read and copied on both sides.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 160<<20 {
		t.Fatalf("8 amplifying frames allocated %d MiB", grew>>20)
	}
}

// A KeepAlive naming 16,383 unknown sessions got a 1.9 MB answer, beyond
// the client's frame limit. A batch is capped at session.MaxKeepAliveBatch
// and a full batch of failures fits a frame.
func TestFrontKeepAliveBatchBounded(t *testing.T) {
	fc := startFront(t, 1, nil)
	conn := fc.dial(0)
	unknown := func(n int) []uint64 {
		ids := make([]uint64, n)
		for i := range ids {
			ids[i] = math.MaxUint64 - uint64(i) // the longest ids in the messages
		}
		return ids
	}
	resp := call(t, conn, &session.Request{Type: session.MsgKeepAlive, Session: math.MaxUint64, Sessions: unknown(16383)})
	if err := resp.Err(); !errors.Is(err, session.ErrMalformed) || !strings.Contains(err.Error(), fmt.Sprint(session.MaxKeepAliveBatch)) {
		t.Fatalf("16,384-session keepalive: %v, want ErrMalformed naming the cap", err)
	}
	resp = call(t, conn, &session.Request{Type: session.MsgKeepAlive, Session: math.MaxUint64, Sessions: unknown(session.MaxKeepAliveBatch - 1)})
	if resp.Err() != nil || len(resp.KeepAlives) != session.MaxKeepAliveBatch {
		t.Fatalf("full batch: %v, %d results", resp.Err(), len(resp.KeepAlives))
	}
	for _, r := range resp.KeepAlives {
		if !errors.Is(r.Err(), session.ErrUnknownSession) {
			t.Fatalf("result %+v", r)
		}
	}
	frame, err := session.EncodeResponse(resp)
	if err != nil || len(frame) > session.DefaultMaxFrameSize/4 {
		t.Fatalf("full batch answer is %d bytes (%v), want well below %d", len(frame), err, session.DefaultMaxFrameSize)
	}
}

// muxStream opens a mux stream on conn by hand.
type muxStream struct {
	t   *testing.T
	str *quic.Stream
	max int
}

func openMux(t *testing.T, conn *session.Conn) *muxStream {
	t.Helper()
	str, err := conn.OpenStreamSync(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { str.CancelRead(session.StreamDone); str.CancelWrite(session.StreamDone) })
	m := &muxStream{t: t, str: str, max: conn.MaxFrameSize()}
	m.send(encode(t, &session.Request{Type: session.MsgMux}))
	return m
}

func (m *muxStream) send(b []byte) {
	m.t.Helper()
	if _, err := m.str.Write(b); err != nil {
		m.t.Fatal(err)
	}
}

// call sends req with call id id and reads the next answer, which must
// be id's.
func (m *muxStream) call(id uint64, req *session.Request) *session.Response {
	m.t.Helper()
	req.Call = id
	m.send(encode(m.t, req))
	m.str.SetReadDeadline(time.Now().Add(servertest.WaitTimeout))
	resp, err := session.ReadResponse(m.str, m.max)
	if err != nil {
		m.t.Fatalf("call %d: %v", id, err)
	}
	if resp.Call != id {
		m.t.Fatalf("call %d answered %+v", id, resp)
	}
	return resp
}

// The mux stream takes its calls through the same caps and checks as a
// stream each; a streaming type is refused there; bad input closes the
// connection and only it.
func TestFrontMux(t *testing.T) {
	fc := startFront(t, 1, func(_ int, cfg *server.Config) {
		cfg.MaxRequestsPerConn, cfg.MaxWatchesPerConn = 3, 2
	})
	conn := fc.dial(0)
	mux := openMux(t, conn)
	if resp := mux.call(1, &session.Request{Type: session.MsgGet, Path: "/"}); resp.Err() != nil {
		t.Fatal(resp.Err())
	}
	if resp := mux.call(2, &session.Request{Type: session.MsgGet, Path: "/", Session: 12345}); !errors.Is(resp.Err(), session.ErrUnknownSession) {
		t.Fatalf("a session not attached: %v", resp.Err())
	}
	resp := mux.call(3, &session.Request{Type: session.MsgWatch, Path: "/"})
	if !errors.Is(resp.Err(), session.ErrMalformed) || !strings.Contains(resp.Message, "streaming") {
		t.Fatalf("a watch on the mux: %v", resp.Err())
	}
	// A cancel of a call already answered changes nothing.
	mux.send(encode(t, &session.Request{Type: session.MsgCancel, Call: 1}))

	// Calls over --max-requests-per-conn are answered ErrBusy, with their
	// id, and the stream goes on.
	w1 := watch(t, conn, &session.Request{Path: "/"})
	w2 := watch(t, conn, &session.Request{Path: "/"})
	// A stream that sent half a header holds the third slot while the
	// member waits for the rest. If a call of ours held that slot when the
	// member accepted the stream, the member refused the stream instead:
	// then open another.
	stall := func() (*quic.Stream, <-chan struct{}) {
		str, err := conn.OpenStreamSync(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		str.Write([]byte{0, 0}) // half a header: the server waits for more
		refused := make(chan struct{})
		go func() {
			defer close(refused)
			session.ReadResponse(str, conn.MaxFrameSize()) // an answer only if refused; ends when the test cancels it
		}()
		return str, refused
	}
	stalled, refused := stall()
	id := uint64(10)
	servertest.Eventually(t, "a call over the limit is refused", func() error {
		id++
		resp := mux.call(id, &session.Request{Type: session.MsgGet, Path: "/"})
		if !errors.Is(resp.Err(), session.ErrBusy) || !strings.Contains(resp.Message, "--max-requests-per-conn") {
			select {
			case <-refused:
				stalled, refused = stall()
			default: // not accepted yet
			}
			return fmt.Errorf("answer %v, want ErrBusy naming the cap", resp.Err())
		}
		return nil
	})
	stalled.CancelWrite(session.StreamCanceled)
	stalled.CancelRead(session.StreamCanceled)
	w1.sr.Close()
	w2.sr.Close()
	servertest.Eventually(t, "slots freed", func() error {
		id++
		return mux.call(id, &session.Request{Type: session.MsgGet, Path: "/"}).Err()
	})

	for _, tc := range []struct {
		name  string
		bytes []byte
	}{
		{"garbage", append(header(5), 0xc1, 0xc1, 0xc1, 0xc1, 0xc1)},
		{"no call id", encode(t, &session.Request{Type: session.MsgGet, Path: "/"})},
		{"frame above MuxMaxFrame", header(session.MuxMaxFrame + 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := fc.dial(0)
			m := openMux(t, bad)
			m.call(1, &session.Request{Type: session.MsgGet, Path: "/"})
			m.send(tc.bytes)
			if code := closedWith(t, bad); code != session.ConnProtocol {
				t.Fatalf("closed with %d, want ConnProtocol", code)
			}
			id++
			if resp := mux.call(id, &session.Request{Type: session.MsgGet, Path: "/"}); resp.Err() != nil {
				t.Fatalf("another connection after the bad one: %v", resp.Err())
			}
		})
	}
}

// A member that does not offer the mux (like one built before it) serves
// a new client a stream per request.
func TestFrontWithoutMux(t *testing.T) {
	fc := startFront(t, 1, func(_ int, cfg *server.Config) { cfg.Transport.DisableMux = true })
	conn := fc.dialRaw(0)
	hello, err := session.Hello(ctxT(t), conn, "test")
	if err != nil {
		t.Fatal(err)
	}
	if hello.Features&session.FeatureMux != 0 {
		t.Fatalf("hello offers the mux: %+v", hello)
	}
	sess := openSession(t, conn, 10*time.Second)
	ok(t, conn, &session.Request{Type: session.MsgCreate, Path: "/a", Data: []byte("x"), Session: sess.Session})
	if got := ok(t, conn, &session.Request{Type: session.MsgGet, Path: "/a"}); string(got.Data) != "x" {
		t.Fatalf("get /a = %q", got.Data)
	}
	// A client that opens a mux stream anyway is refused, clearly.
	resp, err := rawStream(t, conn, encode(t, &session.Request{Type: session.MsgMux}))
	if err != nil || !errors.Is(resp.Err(), session.ErrUnknownType) {
		t.Fatalf("a mux stream: %v, %v; want ErrUnknownType", resp, err)
	}
}
