package store

import (
	"testing"

	"github.com/latch-io/latch/namespace"
)

// BenchmarkACLCheck is the cost Apply adds to a create: one rule lookup
// per ancestor of the path.
func BenchmarkACLCheck(b *testing.B) {
	t := (&aclTable{enforced: true}).with([]namespace.ACLRule{
		{Identity: "ops", Prefix: "/", Perms: namespace.PermAll},
		{Identity: "alice", Prefix: "/jobs", Perms: namespace.PermRWCD},
		{Identity: "*", Prefix: "/public", Perms: namespace.PermRead},
	}, nil)
	for b.Loop() {
		if err := t.check("alice", "/jobs/nightly/lock-x-0000000001", namespace.PermCreate); err != nil {
			b.Fatal(err)
		}
	}
}
