package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/proc"
)

// TestSubtreeLocksAndPathSpellingProcess replays two findings of issue 27
// against 3 real latchd processes with mutual TLS and ACLs: a lock on a
// parent taken by an identity denied part of its subtree, and look-alike
// spellings of one name.
func TestSubtreeLocksAndPathSpellingProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	ca := newClientCA(t)
	c := proc.StartCluster(t, 3, "--tls-client-ca", ca.File, "--admins", "ops")
	c.WaitLeader(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	ops := mustDialAs(t, c, ca, "ops")
	waitEnforced(t, ops)
	// alice may do anything in /team but in /team/secret, which is bob's.
	if err := ops.SetACL(ctx,
		ACLRule{Identity: "alice", Prefix: "/team", Perms: namespace.PermRWCD},
		ACLRule{Identity: "alice", Prefix: "/team/secret", Perms: namespace.PermNone},
		ACLRule{Identity: "bob", Prefix: "/team/secret", Perms: namespace.PermRWCD},
	); err != nil {
		t.Fatal(err)
	}
	alice := mustDialAs(t, c, ca, "alice")
	bob := mustDialAs(t, c, ca, "bob")
	mkdir(t, ops, "/team")
	mkdir(t, ops, "/team/secret")

	t.Run("parent lock over a denied subtree", func(t *testing.T) {
		// alice's lock on /team would queue ahead of, then block, every
		// lock in /team/secret: refused in either mode, naming the part.
		rw := NewRWMutex(alice.Session(), "/team")
		for _, try := range []func(context.Context) error{NewMutex(alice.Session(), "/team").TryLock, rw.TryRLock, rw.Lock} {
			err := try(ctx)
			if !errors.Is(err, ErrPermissionDenied) || !strings.Contains(err.Error(), "/team/secret") {
				t.Fatalf("alice locks /team = %v, want ErrPermissionDenied naming /team/secret", err)
			}
		}
		// Nothing of alice's is in the way of bob's lock in his subtree.
		mb := NewMutex(bob.Session(), "/team/secret")
		if err := mb.TryLock(ctx); err != nil {
			t.Fatalf("bob's lock on /team/secret: %v", err)
		}
		if err := mb.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// alice still locks what she may, beside the carve-out.
		ma := NewMutex(alice.Session(), "/team/open")
		if err := ma.TryLock(ctx); err != nil {
			t.Fatalf("alice's lock on /team/open: %v", err)
		}
		if err := ma.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("look-alike paths", func(t *testing.T) {
		const nfc, nfd = "/team/\u00e9", "/team/e\u0301"
		if _, err := alice.Create(ctx, nfc, []byte("composed")); err != nil && !errors.Is(err, ErrNodeExists) {
			t.Fatal(err)
		}
		_, err := alice.Create(ctx, nfd, []byte("decomposed"))
		if !errors.Is(err, ErrBadPath) || !strings.Contains(err.Error(), "NFC") {
			t.Fatalf("create of the NFD spelling of /é = %v, want ErrBadPath naming NFC", err)
		}
		if _, _, err := alice.Get(ctx, nfd); !errors.Is(err, ErrBadPath) {
			t.Fatalf("get of the NFD spelling = %v, want ErrBadPath", err)
		}
		if err := NewMutex(alice.Session(), nfd).TryLock(ctx); !errors.Is(err, ErrBadPath) {
			t.Fatalf("lock of the NFD spelling = %v, want ErrBadPath", err)
		}
		for name, p := range map[string]string{
			"zero-width space":       "/team/a\u200bb",
			"right-to-left override": "/team/a\u202eb",
			"byte-order mark":        "/team/\ufeffa",
			"Latin with Cyrillic":    "/team/p\u0430ypal",
		} {
			if _, err := alice.Create(ctx, p, nil); !errors.Is(err, ErrBadPath) {
				t.Fatalf("create with a %s = %v, want ErrBadPath", name, err)
			}
		}
		data, _, err := alice.Get(ctx, nfc)
		if err != nil || string(data) != "composed" {
			t.Fatalf("get %s = %q, %v", nfc, data, err)
		}
		names, err := alice.Children(ctx, "/team")
		if err != nil {
			t.Fatal(err)
		}
		var accented []string
		for _, n := range names {
			if strings.ContainsRune(n, '\u00e9') || strings.ContainsRune(n, '\u0301') {
				accented = append(accented, n)
			}
		}
		if !slices.Equal(accented, []string{"\u00e9"}) {
			t.Fatalf("children of /team spelling é: %+q, want just the NFC one", accented)
		}
	})
}
