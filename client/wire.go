package client

import (
	"errors"

	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/session"
)

// isWire reports whether err is an answer of the server (an error frame)
// rather than a failure to get one.
func isWire(err error) bool {
	var e *session.Error
	return errors.As(err, &e) || errors.Is(err, ErrUnknownCode)
}

// isStreamErr reports whether err ended one stream only (the peer reset
// it) while the connection may be fine.
func isStreamErr(err error) bool {
	var se *quic.StreamError
	return errors.As(err, &se)
}
