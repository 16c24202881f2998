// Command idle is the hostile node's Go tenant program: it sleeps, waking every second to
// allocate a little (a Go process the exporter watches, with a live heap). The test copies
// and rewrites it into crafted executables (test/hostile/crafted).
package main

import "time"

func main() {
	var keep [][]byte
	for {
		keep = append(keep, make([]byte, 1024))
		if len(keep) > 64 {
			keep = nil
		}
		time.Sleep(time.Second)
	}
}
