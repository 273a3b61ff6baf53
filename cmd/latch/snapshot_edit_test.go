package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/server/proc"
)

// backupRecord is one key and value of a backup's namespace snapshot.
type backupRecord struct{ k, v []byte }

// editBackup rewrites the backup at src with its namespace records passed
// through edit (nil: unchanged) and its bytes through flip (nil:
// unchanged), and then recomputes both checksums the file carries (the
// namespace snapshot's CRC-32C, unless flip ran after it, and the backup's
// SHA-256), as the hostile tester of issue 27 did: the file is well formed
// and only latch's checks of its content can refuse it.
func editBackup(t *testing.T, src string, edit func([]backupRecord) []backupRecord, flip func([]byte)) string {
	t.Helper()
	info, data, err := adminapi.ReadBackup(src)
	if err != nil {
		t.Fatal(err)
	}
	const magic = "latch-namespace-snapshot-1\n"
	br := bufio.NewReader(data)
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(br, head); err != nil || string(head) != magic {
		t.Fatalf("not a namespace snapshot: %q %v", head, err)
	}
	var recs []backupRecord
	for {
		klen, err := binary.ReadUvarint(br)
		if err != nil {
			t.Fatal(err)
		}
		if klen == 0 {
			break
		}
		k := make([]byte, klen)
		if _, err := io.ReadFull(br, k); err != nil {
			t.Fatal(err)
		}
		vlen, _ := binary.ReadUvarint(br)
		v := make([]byte, vlen)
		if _, err := io.ReadFull(br, v); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, backupRecord{k, v})
	}
	data.Close()
	if edit != nil {
		recs = edit(recs)
	}
	snap := []byte(magic)
	for _, r := range recs {
		snap = binary.AppendUvarint(snap, uint64(len(r.k)))
		snap = append(snap, r.k...)
		snap = binary.AppendUvarint(snap, uint64(len(r.v)))
		snap = append(snap, r.v...)
	}
	snap = append(snap, 0)
	snap = binary.BigEndian.AppendUint32(snap, crc32.Checksum(snap, crc32.MakeTable(crc32.Castagnoli)))
	if flip != nil {
		flip(snap)
	}
	var out bytes.Buffer
	bw, err := adminapi.NewBackupWriter(&out, info)
	if err != nil {
		t.Fatal(err)
	}
	bw.Write(snap)
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "edited.backup")
	if err := os.WriteFile(file, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestRestoreRefusesEditedBackups reproduces issue 27's snapshot findings
// on real processes: a backup of a cluster where one session holds a lock
// and another waits, edited and re-checksummed four ways (metadata key
// removed, sessions removed, a duplicate lock request, a flipped byte).
// Before, the first made the restoring leader panic in raft's restore and
// its data dir no longer started, and the others were accepted. Now each
// is refused with a message naming what is wrong; the member keeps its
// state, serves, and starts again from its data dir; and the intact backup
// restores afterwards.
func TestRestoreRefusesEditedBackups(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 1)
	c.WaitLeader(t)
	useCluster(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*proc.WaitTimeout)
	defer cancel()
	cl := dialProc(t, c)
	payload := []byte("the-payload-of-data-that-a-byte-flip-damages")
	if _, err := cl.Create(ctx, "/data", payload); err != nil {
		t.Fatal(err)
	}
	holder, err := cl.NewSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.NewMutex(holder, "/jobs/nightly").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiter, err := cl.NewSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	waitDone := make(chan error, 1)
	go func() { waitDone <- client.NewMutex(waiter, "/jobs/nightly").Lock(waitCtx) }()
	waitQueued(t, ctx, cl, "/jobs/nightly", 2)
	good := filepath.Join(t.TempDir(), "good.backup")
	if code, _, errOut := runCLI("snapshot", "save", good); code != 0 {
		t.Fatalf("snapshot save: exit %d: %s", code, errOut)
	}
	stopWaiting()
	<-waitDone

	keep := func(drop func(backupRecord) bool) func([]backupRecord) []backupRecord {
		return func(recs []backupRecord) []backupRecord {
			var out []backupRecord
			for _, r := range recs {
				if !drop(r) {
					out = append(out, r)
				}
			}
			return out
		}
	}
	duplicate := func(recs []backupRecord) []backupRecord {
		// The waiter's request record becomes a copy of the holder's:
		// two requests on one node.
		var first []byte
		for i, r := range recs {
			if r.k[0] != 'l' {
				continue
			}
			if first == nil {
				first = r.v
			} else {
				recs[i].v = first
			}
		}
		return recs
	}
	flip := func(b []byte) { b[bytes.Index(b, payload)+7] ^= 0x01 }

	// The restore target: a fresh cluster.
	c2 := proc.StartCluster(t, 1)
	c2.WaitLeader(t)
	useCluster(t, c2)
	target := c2.Nodes[0]
	before, err := target.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		file string
		want string
	}{
		{"metadata key removed", editBackup(t, good, keep(func(r backupRecord) bool { return string(r.k) == "xapplied" }), nil), "metadata key"},
		{"sessions removed", editBackup(t, good, keep(func(r backupRecord) bool { return r.k[0] == 's' }), nil), "which the snapshot does not hold"},
		{"duplicate lock request", editBackup(t, good, duplicate, nil), "are both on node"},
		{"flipped byte", editBackup(t, good, nil, flip), "checksum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI("snapshot", "restore", tc.file)
			if code == 0 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("restore of an edited backup: exit %d %q, want a refusal saying %q", code, errOut, tc.want)
			}
			st, err := target.Status()
			if err != nil {
				t.Fatalf("the member after a refused restore: %v", err)
			}
			if st.SnapshotRestores != before.SnapshotRestores || st.State != "Leader" {
				t.Fatalf("a refused restore changed the member: %+v, was %+v", st, before)
			}
		})
	}
	// The data dir still starts, and the intact backup restores.
	if code := target.Stop(t); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	target.Start(t)
	target.WaitHealthy(t)
	c2.WaitLeader(t)
	if code, _, errOut := runCLI("snapshot", "restore", good); code != 0 {
		t.Fatalf("restore of the intact backup: exit %d: %s", code, errOut)
	}
	if code, out, errOut := runCLI("get", "/data"); code != 0 || out != string(payload)+"\n" {
		t.Fatalf("get /data after the restore: %d %q %s", code, out, errOut)
	}
}
