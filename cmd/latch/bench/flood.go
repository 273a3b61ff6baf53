package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latch-io/latch/session"
)

// ScenarioFlood is the flood alone, meant to run in a process of its own:
// storm --flood starts it that way (Config.FloodCommand), so that the
// flood's client-side handshakes do not starve the storm's own
// measuring client, and the figures are the member's.
const ScenarioFlood = "flood"

// Flood senders: goroutines opening handshakes and sending probes.
const (
	floodDialers = 64
	floodProbers = 8
)

// Flood opens QUIC handshakes with no client certificate at target from
// floodDialers goroutines (each closed as soon as it is up), and sends
// leader probes from floodProbers, as fast as it can for d or until ctx
// ends. It does not verify the server, as an attacker need not. It
// returns the handshakes attempted and the probes sent.
func Flood(ctx context.Context, target string, d time.Duration) (attempts, probes int64) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	noCert := &tls.Config{InsecureSkipVerify: true}
	var wg sync.WaitGroup
	var na, np atomic.Int64
	for range floodDialers {
		wg.Go(func() {
			for ctx.Err() == nil {
				dctx, dcancel := context.WithTimeout(ctx, time.Second)
				if c, err := session.Dial(dctx, target, noCert, session.Config{}); err == nil {
					c.Close()
				}
				dcancel()
				na.Add(1)
			}
		})
	}
	for range floodProbers {
		wg.Go(func() {
			for ctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(ctx, 20*time.Millisecond)
				session.Probe(pctx, target, 0)
				pcancel()
				np.Add(1)
			}
		})
	}
	wg.Wait()
	return na.Load(), np.Load()
}

// floodReport is the line a flood process ends with; floodProcess reads
// it back.
const floodReport = "flood: %d handshake attempts, %d probes\n"

// FormatFlood is the flood scenario's output.
func FormatFlood(attempts, probes int64) string { return fmt.Sprintf(floodReport, attempts, probes) }

// floodProcess runs the flood as cmd (Config.FloodCommand) followed by
// --flood-target target --duration d, and returns what it reports.
func floodProcess(ctx context.Context, cmd []string, target string, d time.Duration) (attempts, probes int64, err error) {
	args := append(append([]string(nil), cmd[1:]...), "--flood-target", target, "--duration", d.String(), ScenarioFlood)
	c := exec.CommandContext(ctx, cmd[0], args...)
	var out, stderr strings.Builder
	c.Stdout, c.Stderr = &out, &stderr
	if err := c.Run(); err != nil {
		return 0, 0, fmt.Errorf("flood process: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if _, err := fmt.Sscanf(out.String(), floodReport, &attempts, &probes); err != nil {
		return 0, 0, fmt.Errorf("flood process: its report %q: %w", out.String(), err)
	}
	return attempts, probes, nil
}
