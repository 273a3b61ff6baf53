package client

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// TestDiskFullRefusesWritesAndResumes runs a real latchd on a small tmpfs
// and fills the file system: writes are refused with ErrNoSpace ("no
// space left") while the member stays up and serves reads, and they
// succeed again once space is freed. Before, badger's memtable flush died
// with SIGBUS on a full disk. Needs root to mount the tmpfs (CI runs as
// root); skipped otherwise.
func TestDiskFullRefusesWritesAndResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=320m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root; CI runs as root): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })

	certs, err := session.EnsureDevCerts(filepath.Join(t.TempDir(), "tls"))
	if err != nil {
		t.Fatal(err)
	}
	n := proc.NewNode(t, proc.Options{ID: "n1", DataDir: filepath.Join(mnt, "n1")})
	member, err := proc.MemberArgs(certs, "n1")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := proc.AdminTLS(certs)
	if err != nil {
		t.Fatal(err)
	}
	n.SetAdminTLS(admin)
	n.Args = append(append([]string{"--bootstrap", "n1=" + n.RaftAddr}, member...), "--min-free-mib", "96")
	n.Start(t)
	n.WaitHealthy(t)
	c := &proc.Cluster{Nodes: []*proc.Node{n}, Certs: certs}
	c.WaitLeader(t)
	cl := dialProcCluster(t, c, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*proc.WaitTimeout)
	defer cancel()
	if _, err := cl.Create(ctx, "/before", []byte("x")); err != nil {
		t.Fatal(err)
	}

	// Leave less than the reserve free.
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	filler := filepath.Join(mnt, "filler")
	fillFile(t, filler, free-64<<20)

	var refused error
	last := "x" // the last acknowledged value
	deadline := time.Now().Add(proc.WaitTimeout)
	for time.Now().Before(deadline) {
		_, refused = cl.Set(ctx, "/before", []byte("y"))
		if errors.Is(refused, ErrNoSpace) {
			break
		}
		if refused == nil {
			last = "y" // accepted before the member looked at its disk again
		}
		time.Sleep(50 * time.Millisecond) // the member looks at its free space every 250ms
	}
	if !errors.Is(refused, ErrNoSpace) {
		t.Fatalf("write on a full disk: %v, want ErrNoSpace", refused)
	}
	if !n.Running() {
		t.Fatal("the member died on a full disk")
	}
	if data, _, err := cl.Get(ctx, "/before"); err != nil || string(data) != last {
		t.Fatalf("read on a full disk: %q %v, want %q", data, err, last)
	}
	waitMetric(t, n, `latch_storage_no_space{member="n1"} 1`)

	// Now fill the disk to the last megabyte: the member, refusing
	// writes, keeps running and reading.
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	rest := filepath.Join(mnt, "rest")
	fillFile(t, rest, int64(st.Bavail)*int64(st.Bsize)-1<<20)
	if _, err := cl.Create(ctx, "/more", make([]byte, 32<<10)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("write on a completely full disk: %v, want ErrNoSpace", err)
	}
	if data, _, err := cl.Get(ctx, "/before"); err != nil || string(data) != last || !n.Running() {
		t.Fatalf("read on a completely full disk: %q %v (running %v)", data, err, n.Running())
	}

	for _, f := range []string{filler, rest} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(proc.WaitTimeout)
	for {
		_, err := cl.Set(ctx, "/before", []byte("z"))
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNoSpace) || time.Now().After(deadline) {
			t.Fatalf("write after space was freed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if data, _, err := cl.Get(ctx, "/before"); err != nil || string(data) != "z" {
		t.Fatalf("after space returned: %q %v", data, err)
	}
}

// fillFile writes size bytes of real data (tmpfs has no holes to cheat).
func fillFile(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for size > 0 {
		n := int64(len(buf))
		if n > size {
			n = size
		}
		if _, err := f.Write(buf[:n]); err != nil {
			t.Fatal(err)
		}
		size -= n
	}
}
