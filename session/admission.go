package session

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/quic-go/quic-go"
)

// HandshakeEnd is how an admitted connection attempt ended.
type HandshakeEnd int

const (
	// HandshakeFailed: TLS refused the client (no certificate, one of
	// another CA, a bad one): the server made its signature for nothing.
	HandshakeFailed HandshakeEnd = iota
	// HandshakeAbandoned: the handshake ended otherwise (the client went
	// away or went silent, the listener closed).
	HandshakeAbandoned
	// HandshakeFull: a full TLS handshake completed (certificates
	// exchanged, signatures made and checked).
	HandshakeFull
	// HandshakeResumed: the client resumed a TLS session with a ticket.
	HandshakeResumed
)

// Admission decides, before any cryptography is done, whether a new client
// connection attempt may start its handshake. A refusal costs one
// CONNECTION_REFUSED packet (quic-go's ConnContext), which clients treat
// as "busy, back off": it is the cheapest answer a member can give while
// it protects the CPU its raft traffic needs.
type Admission interface {
	// Admit is called for every new connection attempt from remote. On
	// nil error done is called exactly once, when the handshake ended.
	Admit(remote net.Addr) (done func(HandshakeEnd), err error)
}

// admitted is what ConnContext stores in an admitted connection's
// context: Accept reports the handshake's success, the context's end its
// failure, whichever comes first.
type admitted struct {
	once sync.Once
	done func(HandshakeEnd)
}

func (a *admitted) end(how HandshakeEnd) { a.once.Do(func() { a.done(how) }) }

type admittedKey struct{}

// connContext adapts an Admission to quic.Transport.ConnContext.
func connContext(adm Admission) func(context.Context, *quic.ClientInfo) (context.Context, error) {
	return func(ctx context.Context, ci *quic.ClientInfo) (context.Context, error) {
		done, err := adm.Admit(ci.RemoteAddr)
		if err != nil {
			return ctx, err
		}
		a := &admitted{done: done}
		context.AfterFunc(ctx, func() { a.end(handshakeFailure(context.Cause(ctx))) })
		return context.WithValue(ctx, admittedKey{}, a), nil
	}
}

// handshakeFailure classifies why a handshake ended without a connection:
// a TLS alert (QUIC's CRYPTO_ERROR range 0x100-0x1ff) is a refusal of the
// client's credentials; anything else the client abandoning it.
func handshakeFailure(cause error) HandshakeEnd {
	var te *quic.TransportError
	if errors.As(cause, &te) && te.ErrorCode >= 0x100 && te.ErrorCode <= 0x1ff {
		return HandshakeFailed
	}
	return HandshakeAbandoned
}

// acceptedConn tells the admission of qc, if any, that its handshake
// completed.
func acceptedConn(qc *quic.Conn) {
	a, ok := qc.Context().Value(admittedKey{}).(*admitted)
	if !ok {
		return
	}
	how := HandshakeFull
	if qc.ConnectionState().TLS.DidResume {
		how = HandshakeResumed
	}
	a.end(how)
}
