package namespace

import "github.com/hashicorp/go-msgpack/v2/codec"

// EntryHandle returns the msgpack handle of the raft log entries
// (EncodeEntry), which the store also writes its settings and lock history
// records with. It is shared: callers must not change it.
func EntryHandle() *codec.MsgpackHandle { return entryHandle }
