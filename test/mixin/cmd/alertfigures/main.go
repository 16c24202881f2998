// Command alertfigures prints how readable the rendered alerts are (issue 24's before and
// after): go run ./mixin/cmd/alertfigures -root .. (from test/). For another revision:
// git archive REV alerts | tar -x -C DIR && go run ./mixin/cmd/alertfigures -root DIR.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/quota-exporter/quota_exporter/test/mixin/figures"
)

func main() {
	root := flag.String("root", "..", "directory holding alerts/*.yaml")
	flag.Parse()
	f, err := figures.Measure(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Print(f)
}
