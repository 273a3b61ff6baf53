package server

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/latch-io/latch/session"
)

// A client's liveness pings, sent while a call (here a watch) waits, are
// echoed by the member on the connection and counted; the client's
// watchdog then keeps the connection open past many FailureTimeouts.
func TestLivenessPingsEchoed(t *testing.T) {
	s := startDev(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tlsConf, err := session.ClientTLS(filepath.Join(s.cfg.DataDir, devTLSDir, "ca.pem"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	const failure = 80 * time.Millisecond
	conn, err := session.Dial(ctx, s.ClientAddr(), tlsConf, session.Config{FailureTimeout: failure})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := session.Hello(ctx, conn, "liveness-test"); err != nil {
		t.Fatal(err)
	}
	sr, err := session.OpenStreaming(ctx, conn, &session.Request{Type: session.MsgWatch, Path: "/w", Kind: session.WatchRecursive})
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close()
	if _, err := sr.Next(); err != nil { // the acknowledgement
		t.Fatal(err)
	}
	for s.front.quic.Stats().PingsEchoed < 12 { // three FailureTimeouts
		if err := context.Cause(conn.Context()); err != nil {
			t.Fatalf("connection closed after %d pings (%d echoed): %v", conn.Pings(), s.front.quic.Stats().PingsEchoed, err)
		}
		if ctx.Err() != nil {
			t.Fatalf("%d pings sent, %d echoed", conn.Pings(), s.front.quic.Stats().PingsEchoed)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if sent, echoed := conn.Pings(), s.front.quic.Stats().PingsEchoed; echoed > sent {
		t.Fatalf("%d pings echoed, only %d sent", echoed, sent)
	}
}
