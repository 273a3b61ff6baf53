package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/latch-io/latch/server/proc"
)

// TestLimitsCommand shows and changes the cluster settings of real latchd
// processes through latch limits; every member then reports the change.
func TestLimitsCommand(t *testing.T) {
	c := proc.StartCluster(t, 3, "--lock-delay", "3s")
	c.WaitLeader(t)
	useCluster(t, c) // changing the settings needs an admin identity

	get := func(args ...string) limitsReply {
		t.Helper()
		code, out, errOut := runCLI(append([]string{"limits", "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("latch limits %v: exit %d: %s", args, code, errOut)
		}
		var r limitsReply
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("latch limits %v: %v\n%s", args, err, out)
		}
		return r
	}
	before := get()
	if before.Limits["default_lock_delay_ms"] != 3000 || before.Revision == 0 ||
		before.Limits["min_session_ttl_ms"] != 1000 || before.Limits["max_session_ttl_ms"] != 600_000 {
		t.Fatalf("bootstrapped settings: %+v", before)
	}
	after := get("set", "default_lock_delay_ms=1500", "max_lock_batch=10", "max_session_ttl_ms=120000")
	if after.Limits["default_lock_delay_ms"] != 1500 || after.Limits["max_lock_batch"] != 10 || after.Limits["max_session_ttl_ms"] != 120_000 ||
		after.Limits["max_data_bytes"] != before.Limits["max_data_bytes"] || after.Revision <= before.Revision {
		t.Fatalf("after set: %+v (before %+v)", after, before)
	}
	if code, _, errOut := runCLI("limits", "set", "no_such_setting=1"); code == 0 || !strings.Contains(errOut, "no setting") {
		t.Fatalf("unknown setting: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runCLI("limits", "set", "max_lock_batch=0"); code == 0 {
		t.Fatalf("invalid value accepted: %s", errOut)
	}
	if code, _, errOut := runCLI("limits", "set", "min_session_ttl_ms=200000"); code == 0 || !strings.Contains(errOut, "MaxSessionTTLMillis") {
		t.Fatalf("a min TTL above the max accepted: exit %d %s", code, errOut)
	}
	for _, nd := range c.Nodes {
		code, out, errOut := runCLI("limits", "-o", "json", "--admin", nd.HTTPAddr)
		if code != 0 || !strings.Contains(out, `"default_lock_delay_ms":1500`) {
			t.Errorf("%s: exit %d %s %s", nd.ID, code, out, errOut)
		}
	}
}
