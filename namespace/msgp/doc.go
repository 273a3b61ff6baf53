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
// It sits under namespace, a leaf that imports no latch package: the raft
// entry codec (namespace), the lock history records (namespace/store) and
// session's wire codec use it. It is latch's own: no compatibility promise
// to other modules.
package msgp
