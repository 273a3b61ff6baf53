package main

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// childAttr is how `latch lock` starts its command: in a process group of
// its own (so that signals reach everything it started), killed by the
// kernel if latch dies first (SIGKILL cannot be forwarded: without this
// the command would go on working after the lock it needs was freed), and,
// when stdin is latch's controlling terminal, in the terminal's foreground
// so an interactive command can read it and gets the terminal's Ctrl-C.
func childAttr() (attr *syscall.SysProcAttr, foreground bool) {
	attr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if fg, ok := foregroundGroup(os.Stdin); ok && fg == syscall.Getpgrp() {
		attr.Foreground, attr.Ctty = true, int(os.Stdin.Fd())
	}
	return attr, attr.Foreground
}

// foregroundGroup returns the foreground process group of the terminal f,
// ok false when f is not a terminal.
func foregroundGroup(f *os.File) (int, bool) {
	var pgrp int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp)))
	return int(pgrp), errno == 0
}

// reclaimTerminal makes latch's own process group the terminal's
// foreground again after the command that held it exited. A background
// group doing so gets SIGTTOU, which is ignored for the call.
func reclaimTerminal() {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := int32(syscall.Getpgrp())
	syscall.Syscall(syscall.SYS_IOCTL, os.Stdin.Fd(), syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&pgrp)))
}
