package proc

import "testing"

// Ports are handed out once per process: members picked one after another
// (each before any of them binds) never share a port.
func TestPickAddrsNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 125 { // 500 ports: without the rule, two would share one 99.7% of the time
		addrs, err := PickAddrs(4)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if seen[a] {
				t.Fatalf("%s handed out twice", a)
			}
			seen[a] = true
		}
	}
}
