package chaos

import "strings"

// The namespace and store layout the workloads share.
const (
	RootPath     = "/chaos"
	KVRoot       = "/chaos/kv"
	LocksRoot    = "/chaos/locks"
	ElectionPath = "/chaos/election"
	// ElectionKey is the fencedstore key the elected leader writes its
	// term to.
	ElectionKey = "election"
)

// Lock modes as recorded in histories.
const (
	ModeExclusive = "exclusive"
	ModeShared    = "shared"
)

// kvKeys are the registers of the kv workload.
var kvKeys = []string{KVRoot + "/k0", KVRoot + "/k1", KVRoot + "/k2"}

// lockPaths are the locks of the locks workload: a small hierarchy, so a
// lock on a covers a/x.
var lockPaths = []string{LocksRoot + "/a", LocksRoot + "/a/x", LocksRoot + "/b"}

// counterKeys are the fencedstore keys the locks workload increments: key
// k is guarded by the lock LocksRoot/k and by every ancestor lock.
var counterKeys = []string{"a", "a/x", "b"}

// setupPaths are the persistent nodes made before workers start, parents
// first.
var setupPaths = []string{RootPath, KVRoot, LocksRoot, LocksRoot + "/a", LocksRoot + "/a/x", LocksRoot + "/b", ElectionPath}

// keyPath is the lock path that matches store key k.
func keyPath(k string) string { return LocksRoot + "/" + k }

// covers reports whether a lock on lockPath guards store key k.
func covers(lockPath, k string) bool {
	p := keyPath(k)
	return p == lockPath || strings.HasPrefix(p, lockPath+"/")
}

// keysUnder returns the counter keys a lock on lockPath guards.
func keysUnder(lockPath string) []string {
	var out []string
	for _, k := range counterKeys {
		if covers(lockPath, k) {
			out = append(out, k)
		}
	}
	return out
}
