package store

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/latch-io/latch/namespace"
)

func limitsCmd(version int64, mod func(*namespace.Limits)) *namespace.Command {
	l := namespace.DefaultLimits()
	mod(&l)
	return &namespace.Command{Op: namespace.OpSetLimits, Version: version, Limits: &l}
}

// TestSetLimits: the settings come from the log, a conditional change
// needs the revision in force, bad settings change nothing, and the
// settings survive a restart and a snapshot.
func TestSetLimits(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	if s.LimitsRevision() != 0 || s.Limits() != namespace.DefaultLimits() {
		t.Fatalf("fresh store: rev %d, %+v", s.LimitsRevision(), s.Limits())
	}
	small := func(l *namespace.Limits) { l.MaxDataBytes, l.DefaultLockDelayMillis = 3, 7 }
	steps := []struct {
		cmd  *namespace.Command
		want error
	}{
		{&namespace.Command{Op: namespace.OpSetLimits}, namespace.ErrBadCommand},                  // 1: no limits
		{limitsCmd(0, func(l *namespace.Limits) { l.MaxLockBatch = 0 }), namespace.ErrBadCommand}, // 2: invalid
		{limitsCmd(5, small), namespace.ErrBadVersion},                                            // 3: not revision 5
		{limitsCmd(0, small), nil}, // 4: bootstrap
		{limitsCmd(0, func(l *namespace.Limits) {}), namespace.ErrBadVersion},                                       // 5: a second bootstrap loses
		{&namespace.Command{Op: namespace.OpCreate, Path: "/big", Data: []byte("1234")}, namespace.ErrDataTooLarge}, // 6
		{&namespace.Command{Op: namespace.OpCreate, Path: "/ok", Data: []byte("123")}, nil},                         // 7
	}
	for i, st := range steps {
		if r := s.Apply(uint64(i+1), 1, st.cmd); !errors.Is(r.Err, st.want) {
			t.Fatalf("step %d: %v, want %v", i+1, r.Err, st.want)
		}
	}
	want := namespace.DefaultLimits()
	small(&want)
	if s.LimitsRevision() != 4 || s.Limits() != want {
		t.Fatalf("after bootstrap: rev %d, %+v", s.LimitsRevision(), s.Limits())
	}
	if r := s.Apply(8, 1, limitsCmd(4, func(l *namespace.Limits) { l.MaxDataBytes = 100 })); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := s.Apply(9, 1, limitsCmd(namespace.AnyVersion, func(l *namespace.Limits) { l.MaxDataBytes = 50 })); r.Err != nil {
		t.Fatal(r.Err)
	}
	if s.LimitsRevision() != 9 || s.Limits().MaxDataBytes != 50 {
		t.Fatalf("after changes: rev %d, %+v", s.LimitsRevision(), s.Limits())
	}
	before := dump(t, s)
	if !strings.Contains(before, "limits rev=9 ") {
		t.Fatalf("dump lacks the settings:\n%s", before)
	}

	// Restart: Config.Limits no longer matter once the log set them.
	s.Close()
	other := namespace.DefaultLimits()
	other.MaxDataBytes = 1
	if s, err = Open(Config{Dir: dir, Limits: other}); err != nil {
		t.Fatal(err)
	}
	if s.LimitsRevision() != 9 || s.Limits().MaxDataBytes != 50 || dump(t, s) != before {
		t.Fatalf("after restart: rev %d, %+v", s.LimitsRevision(), s.Limits())
	}

	// Snapshot into a store configured otherwise.
	state := snapshotBytes(t, s)
	s2, err := Open(Config{Dir: t.TempDir(), Limits: other})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.Restore(bytes.NewReader(state)); err != nil {
		t.Fatal(err)
	}
	if s2.LimitsRevision() != 9 || s2.Limits().MaxDataBytes != 50 || dump(t, s2) != before {
		t.Fatalf("after restore: rev %d, %+v", s2.LimitsRevision(), s2.Limits())
	}
}

// TestSetLimitsInBatch: a change applies to the very next command of the
// same batch, and a batch gives the same state as one-by-one application.
func TestSetLimitsInBatch(t *testing.T) {
	log := []namespace.BatchEntry{
		{Index: 1, Time: 1, Cmd: &namespace.Command{Op: namespace.OpCreate, Path: "/a", Data: []byte("12345")}},
		{Index: 2, Time: 2, Cmd: limitsCmd(0, func(l *namespace.Limits) { l.MaxDataBytes = 4; l.MaxMultiOps = 1 })},
		{Index: 3, Time: 3, Cmd: &namespace.Command{Op: namespace.OpCreate, Path: "/b", Data: []byte("12345")}},
		{Index: 4, Time: 4, Cmd: &namespace.Command{Op: namespace.OpMulti, Ops: []namespace.Command{{Op: namespace.OpCheck, Path: "/a", Version: namespace.AnyVersion}, {Op: namespace.OpCheck, Path: "/a", Version: namespace.AnyVersion}}}},
		{Index: 5, Time: 5, Cmd: limitsCmd(0, func(l *namespace.Limits) {})}, // stale bootstrap: fails, changes nothing
		{Index: 6, Time: 6, Cmd: &namespace.Command{Op: namespace.OpCreate, Path: "/c", Data: []byte("1234")}},
	}
	one, batched := openTestStore(t), openTestStore(t)
	var errs []error
	for _, e := range log {
		errs = append(errs, one.Apply(e.Index, e.Time, e.Cmd).Err)
	}
	rs := batched.ApplyBatch(log)
	wants := []error{nil, nil, namespace.ErrDataTooLarge, namespace.ErrTooManyOps, namespace.ErrBadVersion, nil}
	for i, want := range wants {
		if !errors.Is(errs[i], want) || !errors.Is(rs[i].Err, want) {
			t.Errorf("entry %d: one by one %v, batched %v, want %v", i+1, errs[i], rs[i].Err, want)
		}
	}
	if a, b := dump(t, one), dump(t, batched); a != b {
		t.Fatalf("batched state differs:\n%s\n---\n%s", a, b)
	}
}

// TestLimitsRecordReadsNewSettingsAsDefaults: a record written before a
// setting existed decodes with that setting's default, which is what lets
// a setting be added without a migration.
func TestLimitsRecordReadsNewSettingsAsDefaults(t *testing.T) {
	type oldLimits struct {
		MaxDataBytes int `codec:"data"`
	}
	type oldRecord struct {
		Rev    uint64    `codec:"rev"`
		Limits oldLimits `codec:"lim"`
	}
	var v []byte
	if err := encodeWith(&v, &oldRecord{Rev: 3, Limits: oldLimits{MaxDataBytes: 10}}); err != nil {
		t.Fatal(err)
	}
	r, err := decodeLimitsRecord(v)
	if err != nil {
		t.Fatal(err)
	}
	want := namespace.DefaultLimits()
	want.MaxDataBytes = 10
	if r.Rev != 3 || r.Limits != want {
		t.Fatalf("decoded %+v, want rev 3 and %+v", r, want)
	}
}

func encodeWith(b *[]byte, v any) error {
	return codec.NewEncoderBytes(b, namespace.EntryHandle()).Encode(v)
}
