package server

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	valid := func() Config {
		c := DefaultConfig()
		c.ID, c.DataDir = "n1", "/tmp/x"
		c.MemberCert, c.MemberKey, c.ClusterCA = "/tmp/x/cert.pem", "/tmp/x/key.pem", "/tmp/x/ca.pem"
		return c
	}
	if c := valid(); c.Validate() != nil {
		t.Fatalf("valid config rejected: %v", c.Validate())
	}
	tests := []struct {
		field string
		edit  func(c *Config)
	}{
		{"ID", func(c *Config) { c.ID = "" }},
		{"ID", func(c *Config) { c.ID = "a,b" }},
		{"DataDir", func(c *Config) { c.DataDir = "" }},
		{"RaftAddr", func(c *Config) { c.RaftAddr = "nope" }},
		{"HTTPAddr", func(c *Config) { c.HTTPAddr = "localhost" }},
		{"ClientAddr", func(c *Config) { c.ClientAddr = "" }},
		{"RaftAdvertise", func(c *Config) { c.RaftAdvertise = "0.0.0.0:7421" }},
		{"HTTPAdvertise", func(c *Config) { c.HTTPAdvertise = "10.0.0.1:0" }},
		{"Bootstrap", func(c *Config) { c.Bootstrap = []Peer{{ID: "n2", RaftAddr: "127.0.0.1:1"}} }},
		{"APIHosts", func(c *Config) { c.APIHosts = []string{"https://latch.example"} }},
		{"APIHosts", func(c *Config) { c.APIHosts = []string{""} }},
		{"Cell", func(c *Config) { c.Cell = "a/b" }},
		{"Cell", func(c *Config) { c.Cell = "." }},
		{"Bootstrap", func(c *Config) {
			c.Bootstrap = []Peer{{ID: "n1", RaftAddr: "127.0.0.1:1"}, {ID: "n1", RaftAddr: "127.0.0.1:2"}}
		}},
		{"Bootstrap", func(c *Config) { c.Bootstrap = []Peer{{ID: "n1", RaftAddr: ":7421"}} }},
		{"Bootstrap", func(c *Config) { c.Bootstrap = []Peer{{ID: "n1", RaftAddr: "127.0.0.1:1"}}; c.Dev = true }},
		{"Bootstrap", func(c *Config) { c.Join = "127.0.0.1:7422"; c.Dev = true }},
		{"Join", func(c *Config) { c.Join = "ftp://x:1" }},
		{"Join", func(c *Config) { c.Join = "https://host-without-port" }},
		{"Limits", func(c *Config) { c.Limits.MaxDepth = 0 }},
		{"HeartbeatTimeout", func(c *Config) { c.HeartbeatTimeout = time.Millisecond }},
		{"ElectionTimeout", func(c *Config) { c.ElectionTimeout = c.HeartbeatTimeout / 2 }},
		{"LeaderLeaseTimeout", func(c *Config) { c.LeaderLeaseTimeout = 2 * c.HeartbeatTimeout }},
		{"CommitTimeout", func(c *Config) { c.CommitTimeout = 0 }},
		{"MaxAppendEntries", func(c *Config) { c.MaxAppendEntries = 5000 }},
		{"SnapshotThreshold", func(c *Config) { c.SnapshotThreshold = 0 }},
		{"SnapshotInterval", func(c *Config) { c.SnapshotInterval = 0 }},
		{"TrailingLogs", func(c *Config) { c.TrailingLogs = 0 }},
		{"SnapshotRetain", func(c *Config) { c.SnapshotRetain = 0 }},
		{"ApplyTimeout", func(c *Config) { c.ApplyTimeout = -1 }},
		{"Clock", func(c *Config) { c.Clock = nil }},
		{"MemberCert", func(c *Config) { c.MemberCert, c.MemberKey = "", "" }},
		{"MemberKey", func(c *Config) { c.MemberKey = "" }},
		{"ClusterCA", func(c *Config) { c.ClusterCA = "" }},
		{"Admins", func(c *Config) { c.Admins = []string{"latch://member/n2"} }},
		{"Recover", func(c *Config) { c.Recover = []Peer{{ID: "n2", RaftAddr: "127.0.0.1:1"}} }},
		{"Recover", func(c *Config) { c.Recover = []Peer{{ID: "n1", RaftAddr: "0.0.0.0:1"}} }},
		{"SnapshotMinInterval", func(c *Config) { c.SnapshotMinInterval = -1 }},
		{"TLSKey", func(c *Config) { c.TLSKey = "k" }},
	}
	for _, tt := range tests {
		c := valid()
		tt.edit(&c)
		err := c.Validate()
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tt.field+":") {
			t.Errorf("%s: Validate() = %v, want ErrBadConfig naming %s", tt.field, err, tt.field)
		}
	}
}

func TestNewFillsDefaults(t *testing.T) {
	c := withDefaults(Config{Dev: true, DataDir: "/tmp/d"})
	if c.ID != DevID || c.RaftAddr != DefaultRaftAddr || c.HTTPAddr != DefaultHTTPAddr ||
		c.ClientAddr != DefaultClientAddr || c.Clock == nil || c.Logger == nil || c.MaxAppendEntries != 256 {
		t.Fatalf("withDefaults = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
