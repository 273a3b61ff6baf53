package session

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// Duplex is a stream both sides keep writing to: the client cache stream
// (MsgCache), where the server sends invalidations and lease grants and
// the client answers with acks and renewals. Next reads the server's
// frames (one goroutine); Send may be called from any goroutine.
type Duplex struct {
	*StreamReader
	mu sync.Mutex // serializes Send
}

// OpenDuplex sends req on a new stream of conn and leaves the stream's
// write side open for Send. The stream does not count as a call waiting on
// the member (see OpenSubscription). It lives until the server ends it, ctx
// ends, or Close.
func OpenDuplex(ctx context.Context, conn *Conn, req *Request) (*Duplex, error) {
	frame, err := appendFrame(nil, req)
	if err != nil {
		return nil, err
	}
	str, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	stop := context.AfterFunc(ctx, func() { abort(str, StreamCanceled) })
	if _, err := str.Write(frame); err != nil {
		stop()
		abort(str, StreamCanceled)
		return nil, ctxErr(ctx, err)
	}
	return &Duplex{StreamReader: &StreamReader{ctx: ctx, str: str, stop: stop, dog: conn.dog, max: conn.maxFrame}}, nil
}

// Send writes req on the stream.
func (d *Duplex) Send(req *Request) error {
	frame, err := appendFrame(nil, req)
	if err != nil {
		return err
	}
	if n := len(frame) - frameHeaderLen; n > d.max {
		return fmt.Errorf("%w: request of %d bytes, max %d", ErrFrameTooLarge, n, d.max)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err = d.str.Write(frame)
	return err
}

// ReadNextRequest reads the next request frame of a stream that stays
// open (the cache stream), without waiting for the stream's end.
func ReadNextRequest(r io.Reader, max int) (*Request, error) {
	req := new(Request)
	if _, err := readMessage(r, max, req); err != nil {
		return nil, err
	}
	return req, nil
}
