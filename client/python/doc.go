// Package python holds latch's Python client (the latch package next to
// this file, standard library only) and the Go tests that run its unittest
// suite against real latchd processes: a three-member TLS cluster with
// client certificates (python_test.go), and the README's Python example
// against `latchd --dev`. No Go code of the client lives here.
package python
