//go:build linux && pprof

package main

// Profiling builds only (go build -tags pprof): serves net/http/pprof on $QUOTA_PPROF_ADDR for
// bin/benchnode -pprof-addr (docs/performance.md "Real node"). The shipped binary has none of it.

import (
	"log"
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	addr := os.Getenv("QUOTA_PPROF_ADDR")
	if addr == "" {
		return
	}
	go func() { log.Println(http.ListenAndServe(addr, nil)) }()
}
