package server

import (
	"net"
	"testing"
)

// portDead is the crash detector's sure sign: a refused dial, or one
// reset at once. A listener that accepts and stays silent (a live TLS
// layer waiting for its hello, a stopped process's kernel backlog) is
// alive.
func TestPortDead(t *testing.T) {
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
	if portDead(silent) {
		t.Fatal("a silent live listener counted as dead")
	}

	rst, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := rst.Accept()
			if err != nil {
				return
			}
			c.(*net.TCPConn).SetLinger(0) // close with RST, as a dying kernel does
			c.Close()
		}
	}()
	if !portDead(rst.Addr().String()) {
		t.Fatal("a connection reset at once counted as alive")
	}
	rst.Close()

	ln.Close()
	<-done
	if !portDead(silent) {
		t.Fatal("a closed port counted as alive")
	}
}
