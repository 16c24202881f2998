// Command execloop, run as "execloop OTHER", replaces itself after a short sleep with OTHER,
// which it runs as "OTHER SELF", and so on forever: a process that keeps changing binary
// under the same pid while gopause attaches to it.
package main

import (
	"os"
	"runtime"
	"syscall"
	"time"
)

func main() {
	runtime.GC() // a little runtime activity, like any Go program
	time.Sleep(2 * time.Millisecond)
	self, other := os.Args[0], os.Args[1]
	if err := syscall.Exec(other, []string{other, self}, os.Environ()); err != nil {
		os.Exit(1)
	}
}
