//go:build !linux

package main

import "syscall"

// childAttr: outside Linux there is no parent-death signal; the command
// runs in its own process group, which latch's signals reach.
func childAttr() (*syscall.SysProcAttr, bool) { return &syscall.SysProcAttr{Setpgid: true}, false }

func reclaimTerminal() {}
