// Command prog prints its own GOMAXPROCS at start and once the Go >= 1.25 runtime has had a
// chance to re-check the cgroup limit (about every second), then reports changes and blocks.
package main

import (
	"fmt"
	"runtime"
	"time"
)

func main() {
	fmt.Println("start", runtime.GOMAXPROCS(0))
	time.Sleep(1500 * time.Millisecond)
	last := runtime.GOMAXPROCS(0)
	fmt.Println("settled", last)
	for {
		time.Sleep(100 * time.Millisecond)
		if n := runtime.GOMAXPROCS(0); n != last {
			last = n
			fmt.Println("changed", n)
		}
	}
}
