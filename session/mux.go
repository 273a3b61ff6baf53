package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// MuxMaxFrame is the largest request body a client sends on the mux
// stream and the largest frame a server reads there. A larger request
// takes a stream of its own: on the mux it would hold back every call
// behind it, and the server reads mux frames into a buffer of at most
// this size whatever its MaxFrameSize.
const MuxMaxFrame = 64 << 10

// muxOpen is the first frame of every mux stream.
var muxOpen = mustFrame(&Request{Type: MsgMux})

func mustFrame(req *Request) []byte {
	b, err := appendFrame(nil, req)
	if err != nil {
		panic(err)
	}
	return b
}

// frameWriter is the write side of a stream as the mux uses it
// (*quic.Stream; tests and fuzzing substitute their own).
type frameWriter interface {
	io.Writer
	TryWriteAll([]byte) error
	SetWriteDeadline(time.Time) error
}

// mux is a client connection's multiplexing stream for unary requests,
// opened by the first call after a Hello whose answer had FeatureMux, and
// again by the first call after it broke. Calls write under lock; one
// reader goroutine per stream hands each answer to the call of its id.
type mux struct {
	conn *Conn
	lock chan struct{} // held to open the stream or to write a frame
	cur  *muxStream    // guarded by lock; nil or broken: the next call opens one
	next atomic.Uint64 // the last call id given; ids are never reused on a connection

	// Calls made while the holder of lock gathers join its write (as the
	// server's answers do, MuxServer.Reply): one packet carries the
	// requests of goroutines that call at the same moment. Their ids are
	// given under pmu, after the gatherer's, so the stream's ids still
	// only increase.
	g         gatherer
	gathering *muxStream // guarded by g.mu: the stream being gathered for; nil: none
}

func newMux(conn *Conn) *mux { return &mux{conn: conn, lock: make(chan struct{}, 1)} }

// muxStream is one mux stream and the calls waiting for their answers.
type muxStream struct {
	str *quic.Stream

	mu    sync.Mutex
	calls map[uint64]chan<- muxAnswer
	err   error // the stream broke: every call waiting got it, new ones fail with it
}

type muxAnswer struct {
	resp *Response
	err  error
}

// errNotForMux: the request is too large for the mux stream; nothing was
// sent, and the caller sends it on a stream of its own.
var errNotForMux = errors.New("latch: request too large for the mux stream")

// roundTrip sends req on the mux stream and waits for its answer, with
// RoundTrip's results, or errNotForMux.
func (m *mux) roundTrip(ctx context.Context, req *Request) (*Response, error) {
	answer := make(chan muxAnswer, 1)
	if ms, id, ok := m.join(req, answer); ok {
		return m.wait(ctx, ms, id, answer)
	}
	select {
	case m.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err() // nothing sent
	}
	// The id is taken under the lock, so that ids go out in increasing
	// order: the server refuses an id not above the last one.
	id := m.next.Add(1)
	bp := writeBufs.Get().(*[]byte)
	defer writeBufs.Put(bp)
	frame, err := m.frame(bp, req, id)
	if err != nil {
		<-m.lock
		return nil, err
	}
	ms, err := m.stream(ctx)
	if err == nil {
		err = ms.add(id, answer)
	}
	if err == nil {
		if err = m.gatherAndWrite(ctx, ms, frame); err != nil {
			ms.fail(err)
		}
	}
	<-m.lock
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	return m.wait(ctx, ms, id, answer)
}

// frame encodes req as call id into *bp, or says why it cannot go on the
// mux stream (errNotForMux: too large).
func (m *mux) frame(bp *[]byte, req *Request, id uint64) ([]byte, error) {
	req.Call = id
	frame, err := appendFrame((*bp)[:0], req)
	req.Call = 0 // the caller may send req again, on this link or another
	if err == nil && cap(frame) <= maxPooledBuf {
		*bp = frame[:0]
	}
	if err == nil && len(frame)-frameHeaderLen > min(MuxMaxFrame, m.conn.maxFrame) {
		err = errNotForMux
	}
	return frame, err
}

// join adds req to the write being gathered, if one is and req fits: ok
// then means it will be written with the gatherer's frame (or the stream
// fails, and answer hears of it).
func (m *mux) join(req *Request, answer chan<- muxAnswer) (ms *muxStream, id uint64, ok bool) {
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	if m.gathering == nil {
		return nil, 0, false
	}
	bp := writeBufs.Get().(*[]byte)
	defer writeBufs.Put(bp)
	id = m.next.Add(1) // a call that does not join leaves a gap: ids need only increase
	frame, err := m.frame(bp, req, id)
	if err != nil || !m.g.fits(frame) || m.gathering.add(id, answer) != nil {
		return nil, 0, false
	}
	m.g.pending = append(m.g.pending, frame...)
	return m.gathering, id, true
}

// gatherAndWrite writes frame on ms with the calls that join it while
// this goroutine yields once. The caller holds m.lock.
func (m *mux) gatherAndWrite(ctx context.Context, ms *muxStream, frame []byte) error {
	joinable := func(open bool) {
		m.gathering = nil
		if open {
			m.gathering = ms
		}
	}
	return m.g.write(frame, joinable, func(buf []byte) error { return ms.write(ctx, buf) })
}

// wait waits for the answer to call id on ms; a call given up is
// cancelled on the server.
func (m *mux) wait(ctx context.Context, ms *muxStream, id uint64, answer <-chan muxAnswer) (*Response, error) {
	select {
	case a := <-answer:
		return a.resp, a.err
	case <-ctx.Done():
		if ms.remove(id) {
			go m.cancel(ms, id)
		}
		return nil, ctx.Err()
	}
}

// stream returns the live mux stream, opening one when there is none. The
// caller holds m.lock.
func (m *mux) stream(ctx context.Context) (*muxStream, error) {
	if m.cur != nil && m.cur.live() {
		return m.cur, nil
	}
	str, err := m.conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	ms := &muxStream{str: str, calls: map[uint64]chan<- muxAnswer{}}
	if err := ms.write(ctx, muxOpen); err != nil {
		abort(str, StreamCanceled)
		return nil, err
	}
	m.cur = ms
	go ms.read(m.conn.maxFrame, m.conn.dog)
	return ms, nil
}

// cancel tells the server that the caller of id gave up: it cancels the
// handler and sends no answer. Nothing depends on it arriving.
func (m *mux) cancel(ms *muxStream, id uint64) {
	frame := mustFrame(&Request{Type: MsgCancel, Call: id})
	m.lock <- struct{}{}
	defer func() { <-m.lock }()
	if ms.live() {
		// Bounded by the connection: a member that stops reading holds
		// this goroutine until the connection ends, no longer.
		if err := ms.write(m.conn.Context(), frame); err != nil {
			ms.fail(err)
		}
	}
}

// write writes one frame. Flow control may hold it back; a caller whose
// ctx ends meanwhile resets the stream, for a frame cut short would break
// the framing of every call after it.
func (ms *muxStream) write(ctx context.Context, frame []byte) error {
	err := ms.str.TryWriteAll(frame)
	if !errors.Is(err, quic.ErrWouldBlock) {
		return err
	}
	stop := context.AfterFunc(ctx, func() { ms.str.CancelWrite(StreamCanceled) })
	defer stop()
	_, err = ms.str.Write(frame)
	return err
}

func (ms *muxStream) live() bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.err == nil
}

func (ms *muxStream) add(id uint64, answer chan<- muxAnswer) error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.err != nil {
		return ms.err
	}
	ms.calls[id] = answer
	return nil
}

// remove forgets call id, reporting whether it was still waiting.
func (ms *muxStream) remove(id uint64) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	_, ok := ms.calls[id]
	delete(ms.calls, id)
	return ok
}

// fail ends the stream: every call waiting gets err, the way each would
// have got it on a stream of its own, and the next call opens a new one.
func (ms *muxStream) fail(err error) {
	ms.finish(muxAnswer{err: err}, err)
}

// finish gives every waiting call a, and makes err the stream's error.
func (ms *muxStream) finish(a muxAnswer, err error) {
	ms.mu.Lock()
	if ms.err != nil {
		ms.mu.Unlock()
		return
	}
	ms.err = err
	calls := ms.calls
	ms.calls = nil
	ms.mu.Unlock()
	abort(ms.str, StreamCanceled)
	for _, answer := range calls {
		if a.resp != nil {
			copied := *a.resp
			answer <- muxAnswer{resp: &copied}
		} else {
			answer <- a
		}
	}
}

// read hands every answer to its call until the stream ends. An answer
// without a call id is the server's answer to the stream as a whole (it
// refused it: ErrBusy, ...): every waiting call gets it as its own.
func (ms *muxStream) read(max int, dog *watchdog) {
	for {
		resp, err := ReadResponse(ms.str, max)
		if err == nil {
			dog.heard()
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				// The server ended the stream: like a stream it
				// reset, the connection may be fine.
				err = fmt.Errorf("latch: the server ended the mux stream: %w",
					&quic.StreamError{StreamID: ms.str.StreamID(), ErrorCode: StreamDone, Remote: true})
			}
			ms.fail(err)
			return
		}
		if resp.Call == 0 {
			if resp.Code == CodeOK {
				ms.fail(fmt.Errorf("%w: an answer without a call id on the mux stream", ErrMalformed))
			} else {
				ms.finish(muxAnswer{resp: resp}, fmt.Errorf("latch: the server refused the mux stream: %w", resp.Err()))
			}
			return
		}
		ms.mu.Lock()
		answer, ok := ms.calls[resp.Call]
		delete(ms.calls, resp.Call)
		ms.mu.Unlock()
		if ok { // else the call was cancelled: nobody waits
			answer <- muxAnswer{resp: resp}
		}
	}
}

// MuxServer is the server's side of a connection's mux stream (MsgMux):
// Next reads the calls, Reply answers each exactly once, from any
// goroutine. A call's Ctx ends when the client cancels it (MsgCancel, and
// then Reply sends nothing) or when the MuxServer's ctx ends.
type MuxServer struct {
	ctx     context.Context
	r       io.Reader
	w       frameWriter
	max     int
	timeout time.Duration

	wmu sync.Mutex // one stream write at a time

	// Answers ready while another gathers join its write (Reply): one
	// stream write, and so one packet, carries the answers of calls that
	// finished together (a raft batch) instead of a packet each.
	g gatherer

	mu    sync.Mutex
	calls map[uint64]context.CancelFunc // calls read and not yet answered
	last  uint64                        // the highest call id read: ids only increase
}

// MuxCall is one request read from a mux stream.
type MuxCall struct {
	ID  uint64
	Req *Request
	// Ctx ends when the client cancels the call, or the mux stream ends.
	Ctx    context.Context
	cancel context.CancelFunc
}

// NewMuxServer serves str, a stream whose first frame was MsgMux, under
// ctx. Requests above max bytes are answered ErrFrameTooLarge; an answer
// the client does not take within writeTimeout fails Reply (close the
// connection: a client that stops reading its mux stream must not hold
// the server's memory).
func NewMuxServer(ctx context.Context, str *quic.Stream, max int, writeTimeout time.Duration) *MuxServer {
	return newMuxServer(ctx, str, str, max, writeTimeout)
}

func newMuxServer(ctx context.Context, r io.Reader, w frameWriter, max int, writeTimeout time.Duration) *MuxServer {
	return &MuxServer{ctx: ctx, r: r, w: w, max: max, timeout: writeTimeout, calls: map[uint64]context.CancelFunc{}}
}

// Next reads the next call. Cancel frames are handled here: one naming a
// call in flight cancels its Ctx; one naming no call (it was answered
// already, the answer and the cancel crossed) is ignored. io.EOF means the
// client closed the stream; an error wrapping ErrMalformed or
// ErrFrameTooLarge means it broke the protocol (a frame that cannot be
// read, a call without an id or with the id of a call in flight): close
// the connection.
func (m *MuxServer) Next() (*MuxCall, error) {
	for {
		req, size, err := m.read()
		if err != nil {
			return nil, err
		}
		if req.Type == MsgCancel {
			m.mu.Lock()
			cancel := m.calls[req.Call]
			delete(m.calls, req.Call)
			m.mu.Unlock()
			if cancel != nil {
				cancel()
			}
			continue
		}
		if req.Call == 0 {
			return nil, fmt.Errorf("%w: a %v request without a call id on the mux stream", ErrMalformed, req.Type)
		}
		ctx, cancel := context.WithCancel(m.ctx)
		call := &MuxCall{ID: req.Call, Req: req, Ctx: ctx, cancel: cancel}
		m.mu.Lock()
		last := m.last
		if call.ID > last {
			m.last = call.ID
			m.calls[call.ID] = cancel
		}
		m.mu.Unlock()
		if call.ID <= last {
			// A client numbers its calls upwards and never reuses an
			// id: an answer must name one call only, even one answered
			// or cancelled already whose handler may still run.
			cancel()
			return nil, fmt.Errorf("%w: call id %d is not above the last one, %d, on the mux stream", ErrMalformed, call.ID, last)
		}
		if size > m.max {
			err := m.Reply(call, ErrorResponse(fmt.Errorf("%w: request of %d bytes, max %d", ErrFrameTooLarge, size, m.max)))
			if err != nil {
				return nil, err
			}
			continue
		}
		return call, nil
	}
}

// read reads one request frame and its body size.
func (m *MuxServer) read() (*Request, int, error) {
	size, err := readHeader(m.r, MuxMaxFrame)
	if err != nil {
		return nil, 0, err
	}
	// Made once a frame arrives: the reader of an idle mux stream, one
	// per idle connection, waits holding no Request.
	req := new(Request)
	if err := readMessageBody(m.r, size, req); err != nil {
		return nil, 0, err
	}
	return req, size, nil
}

// Reply answers call with resp (its Call set to the call's id) unless the
// client cancelled it or the MuxServer's ctx ended (nobody reads the
// answer), and ends the call's Ctx. An error means the answer could not
// be written: the stream is unusable (a *quic.StreamError: the client
// reset it; a timeout: the client did not take the answer in time). An
// answer may go out in the write of another Reply running at the same
// time, whose error then stands for both.
func (m *MuxServer) Reply(call *MuxCall, resp *Response) error {
	m.mu.Lock()
	_, live := m.calls[call.ID]
	delete(m.calls, call.ID)
	m.mu.Unlock()
	call.cancel()
	if !live || m.ctx.Err() != nil {
		return nil
	}
	resp.Call = call.ID
	bp := writeBufs.Get().(*[]byte)
	defer writeBufs.Put(bp)
	frame, err := appendFrame((*bp)[:0], resp)
	if err != nil {
		// Too large to encode: say so instead of leaving the call waiting.
		fail := ErrorResponse(fmt.Errorf("%w: %v", ErrInternal, err))
		fail.Call = call.ID
		frame, err = appendFrame((*bp)[:0], fail)
		if err != nil {
			return err
		}
	}
	if cap(frame) <= maxPooledBuf {
		*bp = frame[:0]
	}
	if m.g.join(frame) {
		// The gatherer writes it; if that fails, the stream is over for
		// every call and the gatherer's Reply says so.
		return nil
	}
	return m.gatherAndWrite(frame)
}

// gatherer collects the frames of the calls (client) or answers (server)
// that are ready while one writer yields, so that they share its stream
// write and so its packets. One writer at a time: the caller of write
// holds the stream's write lock.
type gatherer struct {
	mu      sync.Mutex
	open    bool   // a writer takes frames into pending
	pending []byte // the frames gathered, the writer's first
}

// fits reports whether frame may join the open write; the caller holds
// mu.
func (g *gatherer) fits(frame []byte) bool {
	return g.open && len(g.pending)+len(frame) <= muxGatherMax
}

// join adds frame to the open write, if there is one and it fits.
func (g *gatherer) join(frame []byte) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.fits(frame) {
		return false
	}
	g.pending = append(g.pending, frame...)
	return true
}

// write writes frame with the frames that join it while this goroutine
// yields once (the calls answered in one raft batch are woken together
// and are ready by then). opened, when not nil, is told under mu when the
// write opens and closes for joiners.
func (g *gatherer) write(frame []byte, opened func(bool), write func([]byte) error) error {
	g.mu.Lock()
	g.pending, g.open = append(g.pending[:0], frame...), true
	if opened != nil {
		opened(true)
	}
	g.mu.Unlock()
	runtime.Gosched()
	g.mu.Lock()
	g.open = false
	if opened != nil {
		opened(false)
	}
	buf := g.pending
	g.mu.Unlock()
	err := write(buf)
	g.mu.Lock()
	g.pending = buf[:0]
	if cap(buf) > muxGatherMax {
		g.pending = nil
	}
	g.mu.Unlock()
	return err
}

// muxGatherMax bounds the answers one write gathers (and so what waits in
// memory while a write blocks: the next answer waits for wmu).
const muxGatherMax = 32 << 10

// gatherAndWrite writes frame with the answers that join it while this
// goroutine yields once: the calls answered in the same raft batch are
// woken together and are ready by then.
func (m *MuxServer) gatherAndWrite(frame []byte) error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	return m.g.write(frame, nil, m.write)
}

// write writes frames on the stream, waiting up to the write timeout for
// the client to take them; the caller holds wmu.
func (m *MuxServer) write(frames []byte) error {
	err := m.w.TryWriteAll(frames)
	if !errors.Is(err, quic.ErrWouldBlock) {
		return err
	}
	m.w.SetWriteDeadline(time.Now().Add(m.timeout))
	defer m.w.SetWriteDeadline(time.Time{})
	if _, err := m.w.Write(frames); err != nil {
		return fmt.Errorf("latch: writing an answer on the mux stream: %w", err)
	}
	return nil
}
