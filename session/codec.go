package session

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// handle is the one msgpack configuration of the wire. It is configured
// here and never written again, so sharing it across goroutines is safe.
var handle = newHandle()

// maxDecodeDepth bounds nesting: our messages nest at most four levels.
const maxDecodeDepth = 16

func newHandle() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{WriteExt: true}
	// A hostile length prefix inside a message must not make the decoder
	// allocate it up front: provision small, grow as bytes really arrive.
	h.MaxInitLen = 1024
	// Our messages nest at most four levels; a bound far below the default
	// keeps a frame of nested array headers from recursing a million deep.
	h.MaxDepth = maxDecodeDepth
	return h
}

type encoder struct {
	buf []byte
	enc *codec.Encoder
}

type decoder struct {
	dec *codec.Decoder
}

// Encoders and decoders carry per-type caches worth keeping: pooling them
// keeps the hot path (one Get request, one response) free of setup work.
var (
	encPool = sync.Pool{New: func() any {
		e := &encoder{buf: make([]byte, 0, 512)}
		e.enc = codec.NewEncoderBytes(&e.buf, handle)
		return e
	}}
	decPool = sync.Pool{New: func() any {
		return &decoder{dec: codec.NewDecoderBytes(nil, handle)}
	}}
)

// maxPooledBuf caps what goes back to a pool, so one large message does not
// pin a large buffer for the life of the process.
const maxPooledBuf = 64 << 10

// appendFrame appends to dst the frame of v: a 4-byte big-endian length and
// the msgpack body.
func appendFrame(dst []byte, v any) ([]byte, error) {
	if frame, ok := appendFrameFast(dst, v); ok {
		return frame, nil
	}
	return appendFrameReflect(dst, v)
}

// appendFrameReflect is appendFrame by go-msgpack's reflection encoder,
// which defines the wire format.
func appendFrameReflect(dst []byte, v any) ([]byte, error) {
	e := encPool.Get().(*encoder)
	e.buf = e.buf[:0]
	e.enc.ResetBytes(&e.buf)
	if err := e.enc.Encode(v); err != nil {
		encPool.Put(e)
		return dst, fmt.Errorf("latch: encode %T: %w", v, err)
	}
	n := len(e.buf)
	if uint64(n) > maxFrameLimit {
		putEncoder(e)
		return dst, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	dst = append(dst, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	dst = append(dst, e.buf...)
	putEncoder(e)
	return dst, nil
}

// appendFrameFast appends v's frame with the hand-written encoder
// (msgcodec.go), or declines: v is of another type or has a field it does
// not write, or the frame would exceed maxFrameLimit (the reflection path
// then reports that).
func appendFrameFast(dst []byte, v any) ([]byte, bool) {
	start := len(dst)
	frame := append(dst, 0, 0, 0, 0)
	ok := false
	switch m := v.(type) {
	case *Request:
		frame, ok = appendRequestFast(frame, m)
	case *Response:
		frame, ok = appendResponseFast(frame, m)
	}
	n := len(frame) - start - frameHeaderLen
	if !ok || uint64(n) > maxFrameLimit {
		return frame[:start], false
	}
	binary.BigEndian.PutUint32(frame[start:], uint32(n))
	return frame, true
}

func putEncoder(e *encoder) {
	if cap(e.buf) > maxPooledBuf {
		e.buf = make([]byte, 0, 512)
	}
	encPool.Put(e)
}

// decodeBody decodes one msgpack value from body into v, which must point
// to a zeroed struct. Trailing bytes and any decoder failure, panics
// included, become ErrMalformed: a peer's bytes never crash us.
func decodeBody(body []byte, v any) error {
	if len(body) == 0 {
		return fmt.Errorf("%w: empty frame", ErrMalformed)
	}
	if decodeFast(body, v) {
		return nil
	}
	return decodeBodyReflect(body, v)
}

// decodeBodyReflect is decodeBody by the cost check and go-msgpack's
// reflection decoder, which define what decodes.
func decodeBodyReflect(body []byte, v any) (err error) {
	if err := checkDecodeCost(body, v); err != nil {
		return err
	}
	d := decPool.Get().(*decoder)
	defer func() {
		if r := recover(); r != nil {
			// The decoder's state is unknown after a panic: drop it.
			err = fmt.Errorf("%w: decoder panic: %v", ErrMalformed, r)
			return
		}
		d.dec.ResetBytes(nil)
		decPool.Put(d)
	}()
	d.dec.ResetBytes(body)
	if err := d.dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if n := d.dec.NumBytesRead(); n != len(body) {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(body)-n)
	}
	return nil
}

// decodeFast decodes body into v with the hand-written decoder
// (msgcodec.go), or declines, leaving v zeroed for the reflection decoder.
func decodeFast(body []byte, v any) bool {
	switch m := v.(type) {
	case *Request:
		if decodeRequestFast(body, m) {
			return true
		}
		*m = Request{}
	case *Response:
		if decodeResponseFast(body, m) {
			return true
		}
		*m = Response{}
	}
	return false
}

// EncodeRequest returns req as one frame (length prefix and body).
func EncodeRequest(req *Request) ([]byte, error) { return appendFrame(nil, req) }

// EncodeResponse returns resp as one frame (length prefix and body).
func EncodeResponse(resp *Response) ([]byte, error) { return appendFrame(nil, resp) }

// DecodeRequest decodes a frame body (without the length prefix). It never
// panics; bad input yields an error wrapping ErrMalformed.
func DecodeRequest(body []byte) (*Request, error) {
	req := new(Request)
	if err := decodeBody(body, req); err != nil {
		return nil, err
	}
	return req, nil
}

// DecodeResponse decodes a frame body (without the length prefix). It never
// panics; bad input yields an error wrapping ErrMalformed.
func DecodeResponse(body []byte) (*Response, error) {
	resp := new(Response)
	if err := decodeBody(body, resp); err != nil {
		return nil, err
	}
	return resp, nil
}
