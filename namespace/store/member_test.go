package store

import (
	"testing"

	"github.com/latch-io/latch/namespace"
)

// A member record written before APIAddr existed (format 1) still
// decodes; a current one round-trips with it.
func TestMemberFormats(t *testing.T) {
	m := namespace.Member{ID: "n1", RaftAddr: "a:1", ClientAddr: "b:2", HTTPAddr: "c:3", APIAddr: "d:4"}
	got, err := decodeMember("n1", appendMember(nil, &m))
	if err != nil || got != m {
		t.Fatalf("format 2: %+v, %v", got, err)
	}
	v1 := appendString(appendString(appendString([]byte{1}, "a:1"), "b:2"), "c:3")
	got, err = decodeMember("n1", v1)
	if want := (namespace.Member{ID: "n1", RaftAddr: "a:1", ClientAddr: "b:2", HTTPAddr: "c:3"}); err != nil || got != want {
		t.Fatalf("format 1: %+v, %v", got, err)
	}
	if _, err := decodeMember("n1", []byte{9}); err == nil {
		t.Fatal("format 9 decoded")
	}
}
