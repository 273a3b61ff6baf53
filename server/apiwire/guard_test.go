package apiwire

import "testing"

// The Host names an API answers to: its own address, localhost and the
// loopback addresses, its certificate's names, the configured ones;
// every IP address when it listens on all of them; anything with "*".
func TestAPIHostSet(t *testing.T) {
	own := HostSet{names: map[string]bool{"localhost": true, "latch.example": true}, ipNames: map[string]bool{"127.0.0.1": true, "::1": true, "10.0.0.5": true}}
	all := HostSet{names: map[string]bool{"localhost": true}, ipNames: map[string]bool{}, anyIP: true}
	star := HostSet{any: true}
	for _, tc := range []struct {
		hs   HostSet
		host string
		want bool
	}{
		{own, "127.0.0.1:7423", true},
		{own, "[::1]:7423", true},
		{own, "localhost", true},
		{own, "LOCALHOST:7423", true},
		{own, "latch.example.:7423", true},
		{own, "10.0.0.5:7423", true},
		{own, "10.0.0.6:7423", false},
		{own, "evil.example:7423", false},
		{own, "latch.example.evil.example", false},
		{own, "", false},
		{all, "192.168.1.9:7423", true},
		{all, "[fe80::1]:7423", true},
		{all, "evil.example", false},
		{star, "evil.example", true},
	} {
		if got := tc.hs.Allows(tc.host); got != tc.want {
			t.Errorf("%+v allows %q = %v, want %v", tc.hs, tc.host, got, tc.want)
		}
	}
}
