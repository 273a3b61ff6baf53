package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/server/servertest"
)

// fanOutCachers is how many connections cache the node in
// TestCachedWriteFanOut: enough that one write's invalidations are a burst
// of work for the leader and the clients (all in this process, on the
// test machine's cores), small enough to dial quickly on 2 busy cores.
const fanOutCachers = 100

// TestCachedWriteFanOut: writes of a node cached by hundreds of
// connections all succeed, with no "member silent" or unknown outcome on
// the writer's connection while the leader invalidates every copy, and
// every cacher reads each write once it returned. The leader, the
// cachers and the writer share one process here: before the fan-out was
// paced, a write's burst of invalidations (every caching connection
// written, and its acknowledgement read, at once) queued the writer's
// liveness pings behind it for longer than the client's FailureTimeout,
// and the writer gave its connection up with the write in flight.
func TestCachedWriteFanOut(t *testing.T) {
	if testing.Short() {
		t.Skip("dials hundreds of connections")
	}
	tc := startCluster(t, 3, clusterOptions{})
	writer := tc.dial(5 * time.Second)
	// Dialing hundreds of clients on 2 busy cores takes longer than one
	// servertest wait.
	ctx, cancel := context.WithTimeout(context.Background(), 10*servertest.WaitTimeout)
	defer cancel()
	if _, err := writer.Create(ctx, "/fan", []byte("v0")); err != nil {
		t.Fatal(err)
	}
	cachers := make([]*Client, fanOutCachers)
	errs := make([]error, len(cachers))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range cachers {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := Dial(ctx, Config{Endpoints: tc.endpoints(), TLS: tc.tls, SessionTTL: 5 * time.Second, Logger: servertest.Logger()})
			if err != nil {
				errs[i] = err
				return
			}
			cachers[i] = c
			errs[i] = warmCached(ctx, c, "/fan")
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range cachers {
			if c != nil {
				c.Close()
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d cachers dialed and caching %s", len(cachers), "/fan")
	var took []time.Duration // logged, not asserted: speed is for benchmarks
	defer func() { t.Logf("write latencies: %v", took) }()
	for i := 1; i <= 10; i++ {
		// Every cacher caches the node again, so each write invalidates
		// every copy.
		if err := eachCacher(ctx, cachers, func(c *Client) error {
			_, _, err := c.Get(ctx, "/fan", Cached())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("v%d", i)
		start := time.Now()
		_, err := writer.Set(ctx, "/fan", []byte(want))
		for retry := 0; err != nil && errors.Is(err, ErrUnknownOutcome) && strings.Contains(err.Error(), "leadership moved") && retry < 3; retry++ {
			// An election in this one process (3 members and 100 clients on
			// the test machine's cores) is not what this test is about; the
			// write is the same value, so writing it again is safe. A
			// connection the writer gave up ("member silent") still fails.
			t.Logf("write %d: %v; writing it again", i, err)
			_, err = writer.Set(ctx, "/fan", []byte(want))
		}
		took = append(took, time.Since(start))
		if err != nil {
			t.Fatalf("write %d on a node cached by %d connections: %v", i, len(cachers), err)
		}
		if err := eachCacher(ctx, cachers, func(c *Client) error {
			got, _, err := c.Get(ctx, "/fan", Cached())
			if err == nil && string(got) != want {
				err = fmt.Errorf("a cached read after Set(%s) returned answered %q", want, got)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	var inval uint64
	for _, c := range cachers {
		inval += c.CacheStats().Invalidations
	}
	if inval == 0 {
		t.Fatal("no cacher received an invalidation: the node was never cached")
	}
}

// warmCached reads path Cached until c answers it from its cache (the
// lease is granted in the background after the first fill).
func warmCached(ctx context.Context, c *Client, path string) error {
	for {
		before := c.CacheStats().Hits
		if _, _, err := c.Get(ctx, path, Cached()); err != nil {
			return err
		}
		if c.CacheStats().Hits > before {
			return nil
		}
		select {
		case <-time.After(time.Millisecond): // the lease grant is on its way
		case <-ctx.Done():
			return fmt.Errorf("%s never answered from the cache: %w", path, ctx.Err())
		}
	}
}

// eachCacher runs fn on every client, 32 at a time.
func eachCacher(ctx context.Context, cs []*Client, fn func(*Client) error) error {
	errs := make([]error, len(cs))
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i, c := range cs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = fn(c)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
