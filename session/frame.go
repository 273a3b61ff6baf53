package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

const (
	// DefaultMaxFrameSize bounds one frame's body: the namespace's 1 MiB
	// request limit plus headroom for the envelope.
	DefaultMaxFrameSize = 1<<20 + 64<<10

	// maxFrameLimit is the largest MaxFrameSize a Config may set and the
	// largest frame a writer produces.
	maxFrameLimit = 64 << 20

	frameHeaderLen = 4

	// firstChunk is what a reader allocates before it has seen the body:
	// a peer that announces a large frame and sends nothing costs at most
	// this much; beyond it the buffer grows only as bytes arrive.
	firstChunk = 16 << 10
)

// ReadFrame reads one frame from r and returns its body, reusing buf's
// storage when it is large enough. It returns io.EOF when r ends cleanly
// before a frame starts, an error wrapping io.ErrUnexpectedEOF when r ends
// inside a frame, and ErrFrameTooLarge, without reading or allocating the
// body, when the announced length exceeds max.
func ReadFrame(r io.Reader, max int, buf []byte) ([]byte, error) {
	size, err := readHeader(r, max)
	if err != nil {
		return nil, err
	}
	return readBody(r, size, buf)
}

// readHeader reads a frame header and returns the body size it announces,
// with ReadFrame's errors.
func readHeader(r io.Reader, max int) (int, error) {
	var hdr [frameHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, fmt.Errorf("latch: truncated frame header: %w", err)
		}
		return 0, err // io.EOF: no frame at all
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(max) {
		return 0, fmt.Errorf("%w: %d bytes, max %d", ErrFrameTooLarge, n, max)
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: empty frame", ErrMalformed)
	}
	return int(n), nil
}

// readBody reads a body of size bytes into buf when it is large enough;
// else it grows a buffer only as bytes arrive (firstChunk).
func readBody(r io.Reader, size int, buf []byte) ([]byte, error) {
	if cap(buf) >= size {
		buf = buf[:size]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, truncated(err, size)
		}
		return buf, nil
	}
	buf = make([]byte, min(size, firstChunk))
	got := 0
	for {
		m, err := io.ReadFull(r, buf[got:])
		got += m
		if err != nil {
			return nil, truncated(err, size)
		}
		if got == size {
			return buf, nil
		}
		grown := make([]byte, min(size, 2*len(buf)))
		copy(grown, buf)
		buf = grown
	}
}

func truncated(err error, size int) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("latch: truncated frame of %d bytes: %w", size, io.ErrUnexpectedEOF)
	}
	return err
}

// frameBufs holds read buffers for bodies: decoding copies every byte
// slice and string out of the body, so a body never outlives its read.
var frameBufs = &sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// readMessage reads one frame of at most max bytes and decodes it into v,
// returning the body's size. The body goes to a pooled buffer taken once
// the header has arrived: a reader waiting for its next frame, as every
// idle mux stream's reader does on both sides, holds no buffer (4 KiB per
// idle connection before).
func readMessage(r io.Reader, max int, v any) (int, error) {
	size, err := readHeader(r, max)
	if err != nil {
		return 0, err
	}
	return size, readMessageBody(r, size, v)
}

// readMessageBody reads the body of size bytes whose header was read and
// decodes it into v.
func readMessageBody(r io.Reader, size int, v any) error {
	bp := frameBufs.Get().(*[]byte)
	defer frameBufs.Put(bp)
	body, err := readBody(r, size, *bp)
	if err != nil {
		return err
	}
	if cap(body) <= maxPooledBuf && cap(body) > cap(*bp) {
		*bp = body[:0]
	}
	return decodeBody(body, v)
}

// ReadRequest reads a request stream: one request frame of at most max
// bytes and then the end of the stream (the client closes its side right
// after the frame, so this does not wait). Having read to the end, the
// server's receive side is finished and quic-go can retire the stream once
// the answer is sent. A MsgMux or MsgCache frame is returned at once: that
// stream stays open (serve it with NewMuxServer; read a cache stream's
// further frames with ReadNextRequest). Errors: io.EOF (no frame), io.ErrUnexpectedEOF
// (wrapped; truncated), ErrFrameTooLarge, ErrMalformed (also for bytes
// after the frame), or the reader's own error.
func ReadRequest(r io.Reader, max int) (*Request, error) {
	req := new(Request)
	if _, err := readMessage(r, max, req); err != nil {
		return nil, err
	}
	if req.Type == MsgMux || req.Type == MsgCache {
		return req, nil
	}
	if err := expectEnd(r); err != nil {
		return nil, err
	}
	return req, nil
}

// expectEnd reads the end of r, failing with ErrMalformed if any byte
// comes first.
func expectEnd(r io.Reader) error {
	var b [1]byte
	for {
		n, err := r.Read(b[:])
		if n > 0 {
			return fmt.Errorf("%w: data after the frame", ErrMalformed)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ReadResponse reads and decodes one response frame of at most max bytes,
// with the errors of ReadRequest. A response carrying an error code is not
// an error here: see Response.Err.
func ReadResponse(r io.Reader, max int) (*Response, error) {
	resp := new(Response)
	if _, err := readMessage(r, max, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// writeBufs holds whole frames on their way out, so each message goes to
// the stream in one Write.
var writeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1<<10); return &b }}

func writeMessage(w io.Writer, v any) error {
	bp := writeBufs.Get().(*[]byte)
	frame, err := appendFrame((*bp)[:0], v)
	if err == nil {
		_, err = w.Write(frame)
	}
	if cap(frame) <= maxPooledBuf {
		*bp = frame[:0]
	}
	writeBufs.Put(bp)
	return err
}

// WriteRequest writes req to w as one frame in one Write.
func WriteRequest(w io.Writer, req *Request) error { return writeMessage(w, req) }

// WriteResponse writes resp to w as one frame in one Write. The reader
// rejects frames above its MaxFrameSize, so servers keep answers bounded
// (pages, batches) rather than relying on the limit.
func WriteResponse(w io.Writer, resp *Response) error { return writeMessage(w, resp) }
