package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// zkLock is ZooKeeper's lock recipe written against the public client API
// only: each contender creates an ephemeral sequential child of dir; the
// lowest holds; every other watches only the child just before its own
// (no herd) and looks again when that one goes. It proves the namespace
// primitives suffice for custom recipes.
type zkLock struct {
	c       *client.Client
	s       *client.Session
	dir     string
	node    string
	wakeups *atomic.Int64 // predecessor watches that fired
}

func (l *zkLock) lock(ctx context.Context) error {
	node, err := l.s.Create(ctx, l.dir+"/lock-", nil, client.Ephemeral(), client.Sequential())
	if err != nil {
		return err
	}
	mine := node[strings.LastIndexByte(node, '/')+1:]
	for {
		names, err := l.c.Children(ctx, l.dir)
		if err != nil {
			return err
		}
		i := slices.Index(names, mine)
		if i < 0 {
			return fmt.Errorf("our node %s vanished", node)
		}
		if i == 0 {
			l.node = node
			return nil
		}
		pred := l.dir + "/" + names[i-1]
		w, err := l.c.Watch(ctx, pred, client.Exists(), client.OneShot())
		if err != nil {
			return err
		}
		// The predecessor may have gone before the watch started.
		if ok, _, err := l.c.Exists(ctx, pred); err != nil || !ok {
			w.Close()
			if err != nil {
				return err
			}
			continue
		}
		select {
		case <-w.Events():
			l.wakeups.Add(1)
		case <-ctx.Done():
			w.Close()
			return ctx.Err()
		}
		w.Close()
	}
}

func (l *zkLock) unlock(ctx context.Context) error {
	err := l.c.Delete(ctx, l.node)
	l.node = ""
	return err
}

func TestZooKeeperStyleLockRecipe(t *testing.T) {
	cluster := servertest.StartCluster(t, 3, nil)
	cluster.WaitLeader()
	cluster.WaitMembers()
	tlsConf, err := session.ClientTLS(cluster.Certs().CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var endpoints []string
	for i := range cluster.N() {
		endpoints = append(endpoints, cluster.Server(i).ClientAddr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), servertest.WaitTimeout)
	defer cancel()

	const contenders, rounds = 5, 4
	clients := make([]*client.Client, contenders)
	for i := range clients {
		c, err := client.Dial(ctx, client.Config{Endpoints: endpoints, TLS: tlsConf, SessionTTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}
	c0 := clients[0]
	for _, p := range []string{"/zk", "/zk/lock", "/zk/counter"} {
		if _, err := c0.Create(ctx, p, []byte("0")); err != nil {
			t.Fatal(err)
		}
	}
	var wakeups, waits atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, contenders)
	for _, c := range clients {
		wg.Go(func() {
			l := &zkLock{c: c, s: c.Session(), dir: "/zk/lock", wakeups: &wakeups}
			for range rounds {
				if err := l.lock(ctx); err != nil {
					errs <- err
					return
				}
				// Read-modify-write guarded only by the recipe: a second
				// holder would make a versioned Set fail.
				data, st, err := c.Get(ctx, "/zk/counter")
				if err == nil {
					n, _ := strconv.Atoi(string(data))
					_, err = c.Set(ctx, "/zk/counter", []byte(strconv.Itoa(n+1)), client.WithVersion(st.Version))
				}
				if err != nil {
					errs <- fmt.Errorf("counter update under the lock: %w", err)
					return
				}
				if names, err := c.Children(ctx, "/zk/lock"); err == nil && len(names) > 1 {
					waits.Add(1) // someone is queued behind us
				}
				if err := l.unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	data, _, err := c0.Get(ctx, "/zk/counter")
	if err != nil || string(data) != strconv.Itoa(contenders*rounds) {
		t.Fatalf("counter %q (%v), want %d: increments were lost", data, err, contenders*rounds)
	}
	// No herd: each wakeup is one waiter seeing its own predecessor go,
	// so there are at most as many as acquisitions.
	if w := wakeups.Load(); w > contenders*rounds {
		t.Fatalf("%d wakeups for %d acquisitions: waiters woke for others' releases", w, contenders*rounds)
	}
	if names, err := c0.Children(ctx, "/zk/lock"); err != nil || len(names) != 0 {
		t.Fatalf("lock dir left with %v (%v)", names, err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("ran out of time")
	}
	t.Logf("%d acquisitions, %d predecessor wakeups, %d releases with a queue", contenders*rounds, wakeups.Load(), waits.Load())
}
