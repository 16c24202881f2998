// Command go-healthy is the Go control: GOMAXPROCS=2 in a 2-core quota (and, since its go.mod
// says go 1.25, a container-aware runtime even without the variable), lightly loaded. It
// should raise no alert and be throttled little or not at all.
package main

import (
	"flag"
	"fmt"
	"runtime"
	"time"
)

var sink []byte

func main() {
	mibPerSecond := flag.Int("rate", 20, "MiB allocated per second")
	flag.Parse()
	fmt.Printf("go-healthy: runtime.GOMAXPROCS(0) = %d, NumCPU = %d, %d MiB/s\n",
		runtime.GOMAXPROCS(0), runtime.NumCPU(), *mibPerSecond)
	for tick := 1; ; tick++ {
		// Ten ticks a second, each allocating a tenth of the rate in 1 KiB pieces.
		for i := 0; i < *mibPerSecond*1024/10; i++ {
			sink = make([]byte, 1024)
		}
		time.Sleep(100 * time.Millisecond)
		if tick%100 == 0 {
			fmt.Printf("go-healthy: GOMAXPROCS %d, goroutines %d\n", runtime.GOMAXPROCS(0), runtime.NumGoroutine())
		}
	}
}
