package msgp

import "testing"

// TestSortedKey: keys in sorted order read; a repeated or unsorted one
// fails the reader (the decoders then decline the body).
func TestSortedKey(t *testing.T) {
	for _, tc := range []struct {
		keys []string
		ok   bool
	}{
		{[]string{"a", "cid", "cn", "d"}, true},
		{[]string{"t", "to", "try", "ttl"}, true},
		{[]string{"t", "t"}, false},
		{[]string{"cn", "cid"}, false},
		{[]string{""}, false},
	} {
		var b []byte
		for _, k := range tc.keys {
			b = AppendKey(b, k)
		}
		r := NewReader(b)
		var prev []byte
		for range tc.keys {
			prev = r.SortedKey(prev)
		}
		if r.Done() != tc.ok {
			t.Errorf("keys %q: read ok %v, want %v", tc.keys, r.Done(), tc.ok)
		}
	}
}
