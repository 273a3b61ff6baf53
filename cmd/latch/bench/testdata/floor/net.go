package main

// The network floors: a UDP round trip and a quic-go round trip and
// connection set-up between two processes.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

func udpEcho() error {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	fmt.Println(conn.LocalAddr())
	b := make([]byte, 2048)
	for {
		n, a, err := conn.ReadFromUDP(b)
		if err != nil {
			return err
		}
		conn.WriteToUDP(b[:n], a)
	}
}

func udpRTT() (time.Duration, error) {
	srv, err := startChild("udp-echo")
	if err != nil {
		return 0, err
	}
	defer srv.stop()
	raddr, err := net.ResolveUDPAddr("udp", srv.addr)
	if err != nil {
		return 0, err
	}
	conn, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	b := make([]byte, 64)
	ds := make([]time.Duration, 0, 3000)
	for range 3000 {
		t := time.Now()
		conn.SetReadDeadline(t.Add(time.Second))
		if _, err := conn.Write(b); err != nil {
			return 0, err
		}
		if _, err := conn.Read(b); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t))
	}
	return p50(ds), nil
}

// quicEcho echoes 64-byte messages on every stream of every connection.
func quicEcho(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: quic-echo CERTDIR")
	}
	stls, _, err := tlsConfigs(args[0])
	if err != nil {
		return err
	}
	ln, err := quic.ListenAddr("127.0.0.1:0", stls, &quic.Config{})
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr())
	ctx := context.Background()
	for {
		conn, err := ln.Accept(ctx)
		if err != nil {
			return err
		}
		go func() {
			for {
				s, err := conn.AcceptStream(ctx)
				if err != nil {
					return
				}
				go func() {
					b := make([]byte, 64)
					for {
						if _, err := io.ReadFull(s, b); err != nil {
							return
						}
						if _, err := s.Write(b); err != nil {
							return
						}
					}
				}()
			}
		}()
	}
}

type quicResult struct {
	rtt      time.Duration
	dialRate float64
}

func quicFloor(certs string) (quicResult, error) {
	var res quicResult
	srv, err := startChild("quic-echo", certs)
	if err != nil {
		return res, err
	}
	defer srv.stop()
	_, ctls, err := tlsConfigs(certs)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// echo opens a connection (resuming TLS when it can) and makes n
	// round trips on one stream; it returns the connection.
	echo := func(n int, ds []time.Duration) (*quic.Conn, []time.Duration, error) {
		conn, err := quic.DialAddr(ctx, srv.addr, ctls, &quic.Config{})
		if err != nil {
			return nil, ds, err
		}
		s, err := conn.OpenStreamSync(ctx)
		if err != nil {
			conn.CloseWithError(0, "")
			return nil, ds, err
		}
		b := make([]byte, 64)
		for range n {
			t := time.Now()
			_, err := s.Write(b)
			if err == nil {
				_, err = io.ReadFull(s, b)
			}
			if err != nil {
				conn.CloseWithError(0, "")
				return nil, ds, err
			}
			ds = append(ds, time.Since(t))
		}
		return conn, ds, nil
	}
	conn, ds, err := echo(3000, make([]time.Duration, 0, 3000))
	if err != nil {
		return res, err
	}
	res.rtt = p50(ds)
	conn.CloseWithError(0, "")

	const total, dialers = 5000, 64
	var (
		next  atomic.Int64
		mu    sync.Mutex
		held  []*quic.Conn
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	for range dialers {
		wg.Go(func() {
			for next.Add(1) <= total {
				conn, _, err := echo(1, nil)
				mu.Lock()
				if err != nil {
					first = cmpOr(first, err)
				} else {
					held = append(held, conn)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, c := range held {
		c.CloseWithError(0, "")
	}
	if first != nil {
		return res, fmt.Errorf("quic-go connection %d: %w", len(held)+1, first)
	}
	res.dialRate = total / elapsed.Seconds()
	return res, nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
