package lease

import (
	"errors"
	"testing"
	"time"

	"github.com/latch-io/latch/session"
)

// A session whose open committed counts once against its cap from the
// moment the leader applies it, even while the open's handler has not
// returned yet (it still holds its reservation then): the flood test saw
// the cap refuse opens early when both were counted.
func TestSessionReservationCountedOnce(t *testing.T) {
	k, _ := newTestKeeper(Config{MaxSessions: 100, MaxSessionsPerIdentity: 2, MaxAnonymousSessions: 2})
	a, b := []byte("secret-a"), []byte("secret-b")
	releaseA, err := k.Reserve("alice", "", a)
	if err != nil {
		t.Fatal(err)
	}
	releaseB, err := k.Reserve("alice", "", b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Reserve("alice", "", []byte("secret-c")); !errors.Is(err, session.ErrTooManySessions) {
		t.Fatalf("a third open of a cap of 2: %v", err)
	}
	k.Opened(1, time.Minute, "alice", a) // applied: A is open; its handler has not returned
	releaseB()                           // B failed: its slot comes back
	if total, busiest, _ := k.SessionUse(); total != 1 || busiest != 1 {
		t.Fatalf("one open session and nothing in flight counted as %d (busiest %d)", total, busiest)
	}
	releaseC, err := k.Reserve("alice", "", []byte("secret-c"))
	if err != nil {
		t.Fatalf("the second slot while A's handler still runs: %v", err)
	}
	k.Opened(1, time.Minute, "alice", a) // A's handler: nothing more to count
	releaseA()                           // nor to give back
	releaseC()
	if total, busiest, _ := k.SessionUse(); total != 1 || busiest != 1 {
		t.Fatalf("after every handler returned: %d sessions counted (busiest %d), want 1", total, busiest)
	}
}
