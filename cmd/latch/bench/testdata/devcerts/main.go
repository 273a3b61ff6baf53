// Command devcerts writes a development PKI (session.EnsureDevCerts) into
// the directory named by its argument, for cluster.sh.
package main

import (
	"fmt"
	"os"

	"github.com/latch-io/latch/session"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: devcerts DIR")
		os.Exit(2)
	}
	if _, err := session.EnsureDevCerts(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "devcerts:", err)
		os.Exit(1)
	}
}
