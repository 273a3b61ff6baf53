// Package msgp writes and reads msgpack in exactly the forms go-msgpack's
// reflection codec (MsgpackHandle{WriteExt: true}) uses, for hand-written
// codecs of hot messages that must stay byte-identical to it: reflection
// costs an encode or decode per message on every request, and the wire and
// log formats are what go-msgpack made of them.
//
// The writers append the form go-msgpack's encoder picks for a value. The
// Reader is deliberately narrower than go-msgpack's decoder: it takes the
// forms that encoder writes (any header width) and fails on anything else
// (nil, the other string family, an integer that does not fit its field,
// a length larger than what is left). A codec built on it declines a
// message the Reader fails on and hands it to the reflection decoder, so
// every message decodes, and fails, exactly as before.
//
// It sits under session, which owns the wire codec; namespace's raft
// entry codec and lock history use it too (it imports neither package,
// so neither import cycles). It is latch's own: no compatibility promise
// to other modules.
package msgp
