// Command amcheck loads Alertmanager configuration files with Alertmanager's own loader
// (what `amtool check-config` does) and prints each file's receivers and routes.
package main

import (
	"fmt"
	"os"

	"github.com/prometheus/alertmanager/config"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: amcheck alertmanager.yml...")
		os.Exit(2)
	}
	failed := false
	for _, path := range os.Args[1:] {
		cfg, err := config.LoadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			failed = true
			continue
		}
		fmt.Printf("%s: ok, receiver %q, %d routes, %d receivers\n",
			path, cfg.Route.Receiver, len(cfg.Route.Routes), len(cfg.Receivers))
	}
	if failed {
		os.Exit(1)
	}
}
