package main

// latch gateway: one HTTPS address serving the HTTP/JSON API and the web
// console for every cell of a cell map. Decisions:
//
//   - A subcommand of the CLI, not a latchd mode: it holds no raft, no
//     data and no member identity, and it routes with what the CLI
//     already has (--cells, client.Cells following the replicated map
//     with --map-cell, the client TLS flags). latchd is a member; a
//     gateway is a client of many clusters.
//   - Stateless: what it keeps (each cell's member API addresses, learnt
//     from the cell's member list over QUIC) is a cache it can rebuild
//     from any member, so several gateways run side by side and a client
//     may use any of them. Session tokens it hands out name their cell
//     ("<cell>/<id>.<secret>"), so a later request finds the session's
//     cell without the gateway remembering it.
//   - Routing: the first component of a request's path names its cell
//     (as client.Cells routes); a multi (or any body naming paths) whose
//     paths lie in two cells is refused with client.ErrCrossCell's message
//     before anything is sent, as the Go client refuses it; a watch on /
//     too. Requests that name no path take ?cell=NAME. The cell's leader
//     is tried first, then every other member (a follower forwards to
//     its leader and waits through an election itself); a member that
//     does not answer is skipped. A request that reached a member and
//     lost its answer is resent only when it reads, else it answers 503
//     UnknownOutcome, as members do. An event stream whose member dies is
//     resumed on another member from the last event id it passed on.
//   - Trust: the gateway presents its own server certificate (--tls-cert)
//     to callers and verifies their client certificates against
//     --tls-client-ca. To members it presents --cert, a certificate of a
//     CA the members trust for gateways (latchd --api-gateway-ca), and
//     names the verified caller in Latch-Identity; members believe that
//     header only from such a peer, so the ACL rules apply to the caller,
//     not to the gateway. A caller without a verified certificate is
//     anonymous, as at a member.
//   - The console: the same files as a member's; its cluster view
//     merges every cell's (members named "<cell>/<id>"), the tree's root
//     lists the cells. The console's live tree watch on / spans cells and
//     is refused, so the tree is read when opened and on a reload.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/session"
)

// defaultGatewayAddr is where latch gateway listens unless --listen says
// otherwise (a member's API is on 7423).
const defaultGatewayAddr = "127.0.0.1:7424"

func init() {
	register(&command{
		name:    "gateway",
		usage:   "--cells FILE --tls-cert FILE --tls-key FILE [--listen ADDR] [--map-cell CELL] [--tls-client-ca FILE]",
		summary: "serve the HTTP/JSON API and the web console of every cell in the --cells map",
		help: `Routes each request to the cell of its path's first component, to that cell's
leader (or any member, which forwards). --ca trusts the members' API and QUIC
certificates (a PEM file may hold several CAs), --cert/--key is the gateway's
client identity on QUIC (member lists, the replicated map) and --api-cert/--api-key
its certificate toward members' APIs (default --cert): members started with
--api-gateway-ca naming its CA act for the identity the gateway verified
(--tls-client-ca). With --map-cell the replicated map of that cell is followed.`,
		maxArgs: 0,
		setup: func(fs *flag.FlagSet) runFunc {
			listen := fs.String("listen", defaultGatewayAddr, "HTTPS address to serve on")
			tlsCert := fs.String("tls-cert", "", "the gateway's server certificate (PEM) for callers")
			tlsKey := fs.String("tls-key", "", "its private key (PEM)")
			clientCA := fs.String("tls-client-ca", "", "CA (PEM) of callers' client certificates: a verified caller's identity is passed on; without it callers are anonymous")
			mapCell := fs.String("map-cell", "", "cell whose replicated cell map to follow")
			apiCert := fs.String("api-cert", "", "the gateway's certificate (PEM) toward members' APIs, issued by the CA they trust with --api-gateway-ca (default: --cert)")
			apiKey := fs.String("api-key", "", "its private key (PEM)")
			hosts := fs.String("hosts", "", `names, comma separated, the gateway answers to in the Host header besides its --listen host, localhost, loopback and its certificate's names ("*": any)`)
			return func(ctx context.Context, e *env, _ []string) error {
				if e.g.cells == "" || *tlsCert == "" || *tlsKey == "" {
					return fmt.Errorf("%w: gateway needs --cells, --tls-cert and --tls-key", errUsage)
				}
				m, err := client.ReadCellMapFile(e.g.cells)
				if err != nil {
					return fmt.Errorf("%w: --cells: %v", errUsage, err)
				}
				cfg, err := e.g.config()
				if err != nil {
					return err
				}
				var apiCerts []tls.Certificate
				if *apiCert != "" || *apiKey != "" {
					c, err := tls.LoadX509KeyPair(*apiCert, *apiKey)
					if err != nil {
						return fmt.Errorf("%w: --api-cert/--api-key: %v", errUsage, err)
					}
					apiCerts = []tls.Certificate{c}
				}
				gw, err := newGateway(ctx, gatewayConfig{
					Client: cfg, APICerts: apiCerts, Map: m, MapCell: *mapCell, ClientCA: *clientCA,
					Logger: slog.New(slog.NewTextHandler(e.stderr, nil)),
				})
				if err != nil {
					return err
				}
				defer gw.Close()
				return gw.serve(ctx, *listen, *tlsCert, *tlsKey, splitComma(*hosts), func(addr string) {
					fmt.Fprintf(e.stdout, "gateway serving https://%s\n", addr)
				})
			}
		},
	})
}

// gatewayConfig configures a gateway.
type gatewayConfig struct {
	// Client is the client configuration toward every cell: its TLS
	// trusts the members and presents the gateway's certificate.
	Client client.Config
	// APICerts, when set, is the certificate presented to members' APIs
	// (else Client's): one of the CA members trust for gateways, while
	// Client's certificate is a client identity their QUIC front accepts.
	APICerts []tls.Certificate
	Map      client.CellMap
	MapCell  string
	// ClientCA, when set, is a PEM file of the CA that issues callers'
	// client certificates.
	ClientCA string
	Logger   *slog.Logger
}

// serve listens on addr with the gateway's certificate until ctx ends;
// ready is told the address once it listens.
func (g *gateway) serve(ctx context.Context, addr, certFile, keyFile string, extraHosts []string, ready func(string)) error {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("%w: --tls-cert/--tls-key: %v", errUsage, err)
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	if g.callerCAs != nil {
		conf.ClientCAs, conf.ClientAuth = g.callerCAs, tls.VerifyClientCertIfGiven
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	g.hostOK = gatewayHosts(ln.Addr().String(), cert, extraHosts)
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	if ready != nil {
		ready(ln.Addr().String())
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(tls.NewListener(ln, conf)) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-done
	return nil
}

// loadCallerCAs reads --tls-client-ca.
func loadCallerCAs(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: --tls-client-ca: %v", errUsage, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%w: --tls-client-ca %s holds no PEM certificate", errUsage, file)
	}
	return pool, nil
}

// callerIdentity is the identity of r's verified client certificate, ""
// when it has none or none is verified.
func (g *gateway) callerIdentity(r *http.Request) string {
	if g.callerCAs == nil || r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return ""
	}
	return session.Identity(*r.TLS)
}

var errNoCell = errors.New("latch: the request names no cell")

// gatewayHosts is the Host check of the browser guard (DNS rebinding):
// the host of the listen address (any IP when it is unspecified),
// localhost, loopback, the names and addresses of the certificate, and
// extra ("*": any).
func gatewayHosts(listen string, cert tls.Certificate, extra []string) func(string) bool {
	names := map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}
	anyIP, anyHost := false, false
	norm := func(h string) string { return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".") }
	if h, _, err := net.SplitHostPort(listen); err == nil {
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			anyIP = true
		}
		names[norm(h)] = true
	}
	if len(cert.Certificate) > 0 {
		if leaf, err := x509.ParseCertificate(cert.Certificate[0]); err == nil {
			for _, n := range leaf.DNSNames {
				names[norm(n)] = true
			}
			for _, ip := range leaf.IPAddresses {
				names[ip.String()] = true
			}
		}
	}
	for _, h := range extra {
		anyHost = anyHost || h == "*"
		names[norm(h)] = true
	}
	return func(host string) bool {
		if anyHost {
			return true
		}
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = norm(host)
		if ip := net.ParseIP(host); ip != nil {
			return anyIP || names[ip.String()]
		}
		return names[host]
	}
}

func splitComma(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
