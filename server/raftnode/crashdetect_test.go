package raftnode

import (
	"net"
	"testing"

	"github.com/hashicorp/raft"
)

// portDead is the crash detector's sure sign: a refused dial, or one
// reset at once. A listener that accepts and stays silent (a live TLS
// layer waiting for its hello, a stopped process's kernel backlog) is
// alive.
func TestPortDead(t *testing.T) {
	var tcp TCPLayer
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	silent := ln.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, silent, until the listener closes
		}
	}()
	if portDead(tcp.Dial, raft.ServerAddress(silent)) {
		t.Fatal("a silent live listener counted as dead")
	}

	// The reset case is judged on a connection whose peer has already
	// reset it, so the test does not depend on how soon a goroutine runs.
	rst, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rst.Close()
	c, err := net.Dial("tcp", rst.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer, err := rst.Accept()
	if err != nil {
		t.Fatal(err)
	}
	peer.(*net.TCPConn).SetLinger(0) // close with RST, as a dying kernel does
	peer.Close()
	if !closedAtOnce(c) {
		t.Fatal("a connection reset at once counted as alive")
	}

	ln.Close()
	<-done
	if !portDead(tcp.Dial, raft.ServerAddress(silent)) {
		t.Fatal("a closed port counted as alive")
	}
}
