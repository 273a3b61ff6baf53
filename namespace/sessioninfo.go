package namespace

// SessionInfo is a session as recorded in the namespace.
type SessionInfo struct {
	ID        uint64
	Secret    []byte
	TTLMillis int64
	Identity  string
	// Host is the client's IP address, recorded for clients without a
	// certificate (Identity ""), whose session quota is per host.
	Host     string
	OpenRev  uint64 // index of the OpSessionOpen (= ID)
	OpenTime int64  // leader time of the OpSessionOpen
}
