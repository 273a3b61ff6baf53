package store

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"

	"github.com/latch-io/latch/namespace"
)

// TestApplyRejectsBadCommands covers malformed commands the script
// language cannot express; each must fail cleanly and advance only the
// applied index.
func TestApplyRejectsBadCommands(t *testing.T) {
	s := openTestStore(t)
	tests := []struct {
		name string
		cmd  *namespace.Command
		want error
	}{
		{"nil command", nil, namespace.ErrBadCommand},
		{"unknown create flags", &namespace.Command{Op: namespace.OpCreate, Path: "/a", Flags: 0x80}, namespace.ErrBadCommand},
		{"set-member without member", &namespace.Command{Op: namespace.OpSetMember}, namespace.ErrBadCommand},
		{"set-member without id", &namespace.Command{Op: namespace.OpSetMember, Member: &namespace.Member{RaftAddr: "x"}}, namespace.ErrBadCommand},
		{"remove-member without member", &namespace.Command{Op: namespace.OpRemoveMember}, namespace.ErrBadCommand},
		{"sequential path too long after suffix", &namespace.Command{Op: namespace.OpCreate, Path: "/" + string(bytes.Repeat([]byte("x"), 1020)), Flags: namespace.FlagSequential}, namespace.ErrBadPath},
		{"ephemeral of session 0", &namespace.Command{Op: namespace.OpCreate, Path: "/e", Flags: namespace.FlagEphemeral}, namespace.ErrNoSession},
	}
	before := dump(t, s)
	for i, tt := range tests {
		idx := uint64(i + 1)
		r := s.Apply(idx, 1, tt.cmd)
		if !errors.Is(r.Err, tt.want) || len(r.Events) != 0 {
			t.Errorf("%s: Err = %v, %d events; want %v", tt.name, r.Err, len(r.Events), tt.want)
		}
		if s.AppliedIndex() != idx {
			t.Errorf("%s: AppliedIndex = %d, want %d", tt.name, s.AppliedIndex(), idx)
		}
	}
	after := dump(t, s)
	// Only the applied= header may differ.
	if dropHeader(before) != dropHeader(after) {
		t.Fatalf("failed commands changed the state:\n%s\n---\n%s", before, after)
	}
}

func dropHeader(d string) string {
	_, rest, _ := bytes.Cut([]byte(d), []byte("\n"))
	return string(rest)
}

func TestOpenWithLoggerAndInMemory(t *testing.T) {
	var logs bytes.Buffer
	s, err := Open(Config{InMemory: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r := s.Apply(1, 5, &namespace.Command{Op: namespace.OpCreate, Path: "/x", Data: []byte("y")}); r.Err != nil {
		t.Fatal(r.Err)
	}
	data, st, err := s.Get("/x")
	if err != nil || string(data) != "y" || st.CreateRev != 1 || st.Ctime != 5 {
		t.Fatalf("Get = %q, %+v, %v", data, st, err)
	}
	if s.Limits() != namespace.DefaultLimits() {
		t.Fatalf("zero Limits gave %+v, want defaults", s.Limits())
	}
}
