package main

import (
	"context"
	"crypto/tls"
	"errors"

	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/session"
)

// adminTLS is the TLS config of admin HTTPS calls: the same CA and client
// certificate as the QUIC connection (--ca, --cert, --key, else dev
// discovery), without the QUIC ALPN. The admin endpoint serves the
// members' certificates: --ca must be the cluster CA.
func (g *globals) adminTLS() (*tls.Config, error) {
	cfg, err := g.config()
	if err != nil {
		return nil, err
	}
	conf := cfg.TLS
	if conf == nil {
		return session.AdminTLS("", "", "")
	}
	conf = conf.Clone()
	conf.NextProtos = nil
	return conf, nil
}

// adminClient returns a client of the admin endpoints and the address of
// the member to ask: --admin, else the leader's published admin address
// (asked over the client connection), else any member's.
func (e *env) adminClient(ctx context.Context) (*adminapi.Client, string, error) {
	conf, err := e.g.adminTLS()
	if err != nil {
		return nil, "", err
	}
	ac := adminapi.NewClient(conf, 0)
	if e.g.admin != "" {
		return ac, e.g.admin, nil
	}
	c, err := e.client(ctx)
	if err != nil {
		return nil, "", err
	}
	members, err := c.Members(ctx)
	if err != nil {
		return nil, "", err
	}
	addr := ""
	for _, m := range members {
		if m.HTTPAddr != "" && (addr == "" || m.Leader) {
			addr = m.HTTPAddr
		}
	}
	if addr == "" {
		return nil, "", errors.New("latch: no member publishes an admin address: give --admin HOST:PORT")
	}
	return ac, addr, nil
}

// adminCall bounds an admin command by --timeout and hands it the admin
// client and address.
func adminCall(run func(ctx context.Context, e *env, ac *adminapi.Client, addr string, args []string) error) runFunc {
	return func(ctx context.Context, e *env, args []string) error {
		ctx, cancel := e.withTimeout(ctx)
		defer cancel()
		ac, addr, err := e.adminClient(ctx)
		if err != nil {
			return err
		}
		defer ac.CloseIdleConnections()
		return run(ctx, e, ac, addr, args)
	}
}
