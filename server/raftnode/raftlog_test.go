package raftnode

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogAdapter(t *testing.T) {
	var buf bytes.Buffer
	l := NewHCLog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), "raft")
	l.Debug("hidden", "k", 1)
	l.Info("initial configuration", "servers", hclog.Fmt("%d servers", 3))
	l.Named("net").With("peer", "n2").Warn("slow", "rtt", "5ms")
	l.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[ERR] raft: boom")
	out := buf.String()
	for _, want := range []string{
		`level=INFO msg="initial configuration" component=raft servers="3 servers"`,
		`level=WARN msg=slow component=raft subsystem=raft.net peer=n2 rtt=5ms`,
		`level=ERROR msg="raft: boom"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hidden") {
		t.Errorf("debug line passed an info handler:\n%s", out)
	}
	if !l.IsInfo() || l.IsDebug() {
		t.Errorf("IsInfo/IsDebug do not follow the slog level")
	}
}
