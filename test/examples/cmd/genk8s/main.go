// Command genk8s writes examples/kubernetes/prometheusrule.yaml and
// examples/kubernetes/dashboards-configmap.yaml from the rendered alerts/*.yaml and
// dashboards/*.json. Run from test/: go run ./examples/cmd/genk8s -root ..
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/quota-exporter/quota_exporter/test/examples"
)

func main() {
	root := flag.String("root", "..", "repository root")
	flag.Parse()
	files, err := examples.Generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "genk8s:", err)
		os.Exit(1)
	}
	var names []string
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(*root, name), files[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "genk8s:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", name)
	}
}
