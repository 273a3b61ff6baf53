package bench

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/client"
)

func TestValidate(t *testing.T) {
	local := client.Config{Endpoints: []string{"127.0.0.1:7420", "localhost:7421", "[::1]:7422"}}
	remote := client.Config{Endpoints: []string{"127.0.0.1:7420", "10.0.0.1:7420"}}
	for _, tc := range []struct {
		name  string
		cfg   Config
		err   error
		field string // named in the message
	}{
		{"defaults", Config{Scenario: ScenarioGet}, nil, ""},
		{"loopback endpoints", Config{Scenario: ScenarioSessions, Client: local, Conns: 5000}, nil, ""},
		{"unknown scenario", Config{Scenario: "nope"}, ErrBadConfig, "Scenario"},
		{"negative ops", Config{Scenario: ScenarioGet, Ops: -1}, ErrBadConfig, "Ops"},
		{"negative window", Config{Scenario: ScenarioSessions, Window: -time.Second}, ErrBadConfig, "Window"},
		{"more conns than sessions", Config{Scenario: ScenarioSessions, Sessions: 10, Conns: 11}, ErrBadConfig, "Conns"},
		{"more conns than goroutines", Config{Scenario: ScenarioGet, Concurrency: 2, Conns: 3}, ErrBadConfig, "Conns"},
		{"more conns than clients", Config{Scenario: ScenarioContended, Concurrency: 2, Conns: 3}, ErrBadConfig, "Conns"},
		{"contended default conns follow few clients", Config{Scenario: ScenarioContended, Concurrency: 2}, nil, ""},
		{"negative reference", Config{Scenario: ScenarioContended, Reference: -1}, ErrBadConfig, "Reference"},
		{"reference outside contended", Config{Scenario: ScenarioLock, Reference: 800}, ErrBadConfig, "Reference"},
		{"reference", Config{Scenario: ScenarioContended, Reference: 800}, nil, ""},
		{"data too large", Config{Scenario: ScenarioCreate, DataSize: 1 << 20}, ErrBadConfig, "DataSize"},
		{"relative prefix", Config{Scenario: ScenarioGet, Prefix: "bench"}, ErrBadConfig, "Prefix"},
		{"trailing slash", Config{Scenario: ScenarioGet, Prefix: "/bench/"}, ErrBadConfig, "Prefix"},
		{"bad client config", Config{Scenario: ScenarioGet, Client: client.Config{Endpoints: []string{"nohost"}}}, ErrBadConfig, "Endpoints"},
		{"remote endpoint", Config{Scenario: ScenarioGet, Client: remote}, ErrNotLoopback, "10.0.0.1"},
		{"remote endpoint allowed", Config{Scenario: ScenarioGet, Client: remote, AllowRemote: true}, nil, ""},
		{"name is not resolved", Config{Scenario: ScenarioGet, Client: client.Config{Endpoints: []string{"latch.example:7420"}}}, ErrNotLoopback, "latch.example"},
		{"remote admin", Config{Scenario: ScenarioSessions, Admin: "192.168.1.1:7422"}, ErrNotLoopback, "192.168.1.1"},
		{"reads spread", Config{Scenario: ScenarioStaleGet, ReadFrom: ReadSpread}, nil, ""},
		{"reads from followers", Config{Scenario: ScenarioStaleGet, ReadFrom: ReadFollowers}, nil, ""},
		{"reads from learners", Config{Scenario: ScenarioStaleGet, ReadFrom: ReadLearners}, nil, ""},
		{"unknown read routing", Config{Scenario: ScenarioStaleGet, ReadFrom: "voters"}, ErrBadConfig, "ReadFrom"},
	} {
		err := tc.cfg.Validate()
		if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s: Validate = %v, want %v", tc.name, err, tc.err)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %q does not name %s", tc.name, err, tc.field)
		}
	}
}

func TestDefaultsDependOnScenario(t *testing.T) {
	for _, tc := range []struct {
		scenario    string
		conc, conns int
	}{
		{ScenarioGet, 1, 1},
		{ScenarioLock, 1, 1},
		{ScenarioContended, DefaultContendedClients, 4},
		{ScenarioSessions, DefaultOpeners, 1},
	} {
		d := Config{Scenario: tc.scenario}.withDefaults()
		if d.Concurrency != tc.conc || d.Conns != tc.conns || d.Ops != DefaultOps || d.DataSize != DefaultDataSize {
			t.Errorf("%s: defaults %+v", tc.scenario, d)
		}
	}
	if d := (Config{Scenario: ScenarioCreate, DataSize: -1}).withDefaults(); d.DataSize != 0 {
		t.Errorf("DataSize -1 became %d, want 0 (no data)", d.DataSize)
	}
}

// TestReadFromRoutesEachConnection: spread starts connection i at
// endpoint i mod n (so 64 connections over 5 members put 12 or 13 on
// each), nearest leaves the choice to the client, leader sends every
// stale read to the leader.
func TestReadFromRoutesEachConnection(t *testing.T) {
	eps := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	r := &runner{cfg: Config{Client: client.Config{Endpoints: eps, ReadEndpoints: eps}}}
	if got := r.connConfig(4).ReadEndpoints; strings.Join(got, ",") != strings.Join(eps, ",") {
		t.Errorf("default: connection 4 reads from %v, want the endpoints in order", got)
	}
	r.cfg.ReadFrom = ReadSpread
	for i, want := range []string{"127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "127.0.0.1:2,127.0.0.1:3,127.0.0.1:1", "127.0.0.1:3,127.0.0.1:1,127.0.0.1:2", "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"} {
		if got := strings.Join(r.connConfig(i).ReadEndpoints, ","); got != want {
			t.Errorf("spread: connection %d reads from %s, want %s", i, got, want)
		}
	}
	if eps[0] != "127.0.0.1:1" {
		t.Fatalf("spread reordered the configured endpoints: %v", eps)
	}
	r.cfg.ReadFrom = ReadNearest
	if got := r.connConfig(1); got.ReadEndpoints != nil || got.LeaderReads {
		t.Errorf("nearest: %v, leader reads %v; want no read endpoints", got.ReadEndpoints, got.LeaderReads)
	}
	r.cfg.ReadFrom = ReadLeader
	if !r.connConfig(1).LeaderReads {
		t.Error("leader: LeaderReads not set")
	}
	// followers and learners spread over the members resolveReadFrom
	// found, not over the configured endpoints.
	r.cfg.ReadFrom, r.readOver = ReadLearners, []string{"127.0.0.1:4", "127.0.0.1:5"}
	for i, want := range []string{"127.0.0.1:4,127.0.0.1:5", "127.0.0.1:5,127.0.0.1:4", "127.0.0.1:4,127.0.0.1:5"} {
		if got := r.connConfig(i); strings.Join(got.ReadEndpoints, ",") != want || got.LeaderReads {
			t.Errorf("learners: connection %d reads from %v (leader reads %v), want %s", i, got.ReadEndpoints, got.LeaderReads, want)
		}
	}
}

// TestMemberAddresses: members bound to every interface are reached at a
// host that works from here.
func TestMemberAddresses(t *testing.T) {
	for _, tc := range []struct {
		m           client.MemberInfo
		admin, cli  string
		adminFailed bool
	}{
		{client.MemberInfo{ID: "n1", HTTPAddr: "127.0.0.1:7622", ClientAddr: "127.0.0.1:7421"}, "127.0.0.1:7622", "127.0.0.1:7421", false},
		{client.MemberInfo{ID: "n2", HTTPAddr: ":7622", ClientAddr: "10.0.0.2:7421"}, "10.0.0.2:7622", "10.0.0.2:7421", false},
		{client.MemberInfo{ID: "n3", HTTPAddr: "0.0.0.0:7622", ClientAddr: "[::]:7421"}, "127.0.0.1:7622", "[::1]:7421", false},
		{client.MemberInfo{ID: "n4", ClientAddr: "0.0.0.0:7421"}, "", "[::1]:7421", true},
	} {
		admin, err := memberAdmin(tc.m)
		if admin != tc.admin || (err != nil) != tc.adminFailed {
			t.Errorf("%s: admin %q, %v; want %q", tc.m.ID, admin, err, tc.admin)
		}
		if cli, err := memberClientAddr(tc.m, []string{"[::1]:1"}); cli != tc.cli || err != nil {
			t.Errorf("%s: client address %q, %v; want %q", tc.m.ID, cli, err, tc.cli)
		}
	}
	if _, err := memberClientAddr(client.MemberInfo{ID: "n5", ClientAddr: "nohost"}, nil); !errors.Is(err, ErrBadConfig) {
		t.Errorf("a client address without a port: %v", err)
	}
}
