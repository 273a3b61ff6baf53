package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/namespace/store"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// TestSnapshotSaveUnderLoadAndRestore saves a backup of a 3-member cluster
// of real processes while a client keeps writing and sessions hold an
// ephemeral node, a lock and a waiter; checks the file (and refuses a
// damaged copy); restores it into a fresh 3-member cluster; and compares
// every new member's state with the backup's: identical apart from what
// the restore documents as changed (member records, the applied index and
// leader clock).
func TestSnapshotSaveUnderLoadAndRestore(t *testing.T) {
	c := proc.StartCluster(t, 3)
	c.WaitLeader(t)
	useCluster(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*proc.WaitTimeout)
	defer cancel()

	cl := dialProc(t, c)
	for i := range 20 {
		if _, err := cl.Create(ctx, fmt.Sprintf("/pre-%02d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := cl.NewSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Create(ctx, "/alive", []byte("eph"), client.Ephemeral()); err != nil {
		t.Fatal(err)
	}
	m := client.NewMutex(holder, "/jobs/nightly")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiter, err := cl.NewSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, stopWaiting := context.WithCancel(ctx)
	waitDone := make(chan error, 1)
	go func() { waitDone <- client.NewMutex(waiter, "/jobs/nightly").Lock(waitCtx) }()
	waitQueued(t, ctx, cl, "/jobs/nightly", 2)

	// Load: creates that keep going while the backup is taken.
	var mu sync.Mutex
	var acked []string
	loadCtx, stopLoad := context.WithCancel(ctx)
	var load sync.WaitGroup
	load.Go(func() {
		for i := 0; loadCtx.Err() == nil; i++ {
			p := fmt.Sprintf("/load-%05d", i)
			if _, err := cl.Create(loadCtx, p, []byte("x")); err == nil {
				mu.Lock()
				acked = append(acked, p)
				mu.Unlock()
			}
		}
	})
	waitFor(t, "load running", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 20 })
	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()

	file := filepath.Join(t.TempDir(), "latch.backup")
	code, out, errOut := runCLI("snapshot", "save", file)
	if code != 0 {
		t.Fatalf("snapshot save: exit %d: %s", code, errOut)
	}
	stopLoad()
	load.Wait()
	mu.Lock()
	t.Logf("save: %d creates acknowledged before the save began, %d in all\n%s", len(before), len(acked), out)
	mu.Unlock()

	code, out, errOut = runCLI("snapshot", "status", file, "-o", "json")
	var info adminapi.BackupInfo
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.Index == 0 || len(info.Members) != 3 {
		t.Fatalf("snapshot status: exit %d %q %s", code, out, errOut)
	}
	// A damaged or truncated copy is refused, naming why.
	raw, _ := os.ReadFile(file)
	for name, b := range map[string][]byte{
		"flipped":   flipByte(raw, len(raw)/2),
		"truncated": raw[:len(raw)-100],
	} {
		bad := filepath.Join(t.TempDir(), name)
		os.WriteFile(bad, b, 0o600)
		if code, _, errOut := runCLI("snapshot", "status", bad); code != 1 || !strings.Contains(errOut, "bad backup file") {
			t.Errorf("%s copy: exit %d %q", name, code, errOut)
		}
	}

	want := dumpBackup(t, file)
	for _, p := range before {
		if !strings.Contains(want, p+" ") {
			t.Fatalf("acknowledged %s before the save began, missing from the backup", p)
		}
	}
	for _, s := range []string{"/alive", "lock", "/jobs/nightly"} {
		if !strings.Contains(want, s) {
			t.Fatalf("backup lacks %q:\n%s", s, want)
		}
	}

	// Restore into a fresh cluster.
	c2 := proc.StartCluster(t, 3)
	c2.WaitLeader(t)
	useCluster(t, c2)
	code, _, errOut = runCLI("snapshot", "restore", file)
	if code != 0 {
		t.Fatalf("snapshot restore: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI("snapshot", "restore", file); code != 1 || !strings.Contains(errOut, "not_fresh") {
		t.Fatalf("second restore into a cluster with data: exit %d %q", code, errOut)
	}
	code, out, errOut = runCLI("get", "/alive")
	if code != 0 || out != "eph\n" {
		t.Fatalf("get /alive in the restored cluster: %d %q %s", code, out, errOut)
	}
	code, out, errOut = runCLI("member", "list", "-o", "json")
	var ml adminapi.MembersReply
	if code != 0 || json.Unmarshal([]byte(out), &ml) != nil || len(ml.Members) != 3 {
		t.Fatalf("member list after restore: %d %q %s", code, out, errOut)
	}
	for _, mem := range ml.Members {
		if mem.Suffrage != "voter" {
			t.Fatalf("after restore, the old cluster's member records remain: %+v", ml.Members)
		}
	}
	stopWaiting()
	<-waitDone

	// Every new member holds the backup's state.
	leader := c2.Nodes[c2.WaitLeader(t)]
	ls, err := leader.Status()
	if err != nil {
		t.Fatal(err)
	}
	if ls.CommitIndex <= info.Index {
		t.Fatalf("the restored cluster's index %d is not above the backup's %d", ls.CommitIndex, info.Index)
	}
	for _, nd := range c2.Nodes {
		waitFor(t, nd.ID+" applied the restore", func() bool {
			st, err := nd.Status()
			return err == nil && st.AppliedIndex >= ls.CommitIndex
		})
	}
	for _, nd := range c2.Nodes {
		if code := nd.Stop(t); code != 0 {
			t.Fatalf("stop %s: exit %d", nd.ID, code)
		}
		if got := dumpDir(t, filepath.Join(nd.DataDir, "fsm")); comparable(got) != comparable(want) {
			t.Fatalf("%s's state differs from the backup's:\n%s", nd.ID, lineDiff(comparable(want), comparable(got)))
		}
	}
}

// useCluster points the CLI's environment at c, as the admin identity
// (backups, restores, settings and membership changes need it), and waits
// until every member has published its client address.
func useCluster(t *testing.T, c *proc.Cluster) {
	t.Helper()
	t.Setenv("LATCH_ENDPOINTS", strings.Join(c.ClientAddrs(), ","))
	t.Setenv("LATCH_CA", c.Certs.CA)
	cert, key, err := c.Certs.Client(proc.AdminName)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LATCH_CERT", cert)
	t.Setenv("LATCH_KEY", key)
	waitMembersPublished(t, len(c.Nodes))
}

func dialProc(t *testing.T, c *proc.Cluster) *client.Client {
	t.Helper()
	tlsConf, err := session.ClientTLS(c.Certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
	defer cancel()
	cl, err := client.Dial(ctx, client.Config{Endpoints: c.ClientAddrs(), TLS: tlsConf, SessionTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func waitQueued(t *testing.T, ctx context.Context, cl *client.Client, path string, n int) {
	t.Helper()
	waitFor(t, "lock queue", func() bool {
		names, err := cl.Children(ctx, path)
		return err == nil && len(names) >= n
	})
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(proc.WaitTimeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling interval of a condition with a deadline
	}
}

func flipByte(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x40
	return c
}

// dumpBackup loads the backup's state into a scratch store and dumps it.
func dumpBackup(t *testing.T, file string) string {
	t.Helper()
	_, data, err := adminapi.ReadBackup(file)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	dir := t.TempDir()
	st, err := store.Open(store.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Restore(data); err != nil {
		t.Fatal(err)
	}
	st.Close()
	return dumpDir(t, dir)
}

func dumpDir(t *testing.T, dir string) string {
	t.Helper()
	st, err := store.Open(store.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var b bytes.Buffer
	if err := st.Dump(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// comparable drops what a restore changes by design: the applied index and
// leader clock line, and member records.
func comparable(dump string) string {
	var keep []string
	for _, line := range strings.Split(dump, "\n") {
		if strings.HasPrefix(line, "applied=") || strings.HasPrefix(line, "member ") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n")
}

// lineDiff lists the lines only in a (-) and only in b (+).
func lineDiff(a, b string) string {
	count := map[string]int{}
	for _, l := range strings.Split(a, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(b, "\n") {
		count[l]--
	}
	var out []string
	for l, n := range count {
		switch {
		case n > 0:
			out = append(out, "- "+l)
		case n < 0:
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// TestRestoredSessionsExpire: a restored cluster loads the backup's
// sessions into its leader's lease table, so with no client of theirs
// connected they expire after their TTL, as the README says: the ephemeral
// node goes and the held lock ends with session-expired.
func TestRestoredSessionsExpire(t *testing.T) {
	c := proc.StartCluster(t, 1, "--lock-delay", "0s")
	c.WaitLeader(t)
	useCluster(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
	defer cancel()
	cl := dialProc(t, c)
	s, err := cl.NewSession(ctx, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "/eph", nil, client.Ephemeral()); err != nil {
		t.Fatal(err)
	}
	if err := client.NewMutex(s, "/held").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "b.latch")
	if code, _, errOut := runCLI("snapshot", "save", file); code != 0 {
		t.Fatalf("save: %s", errOut)
	}

	c2 := proc.StartCluster(t, 1, "--lock-delay", "0s")
	c2.WaitLeader(t)
	useCluster(t, c2)
	if code, _, errOut := runCLI("snapshot", "restore", file); code != 0 {
		t.Fatalf("restore: %s", errOut)
	}
	if code, _, errOut := runCLI("get", "/eph"); code != 0 {
		t.Fatalf("the restored ephemeral is missing right after the restore: %s", errOut)
	}
	waitFor(t, "the backup's session to expire in the new cluster", func() bool {
		code, _, errOut := runCLI("get", "/eph")
		return code == 1 && strings.Contains(errOut, "no node")
	})
	code, out, _ := runCLI("locks", "--history", "/held")
	if code != 0 || !strings.Contains(out, "session-expired") {
		t.Fatalf("history of /held in the new cluster: %q", out)
	}
}
