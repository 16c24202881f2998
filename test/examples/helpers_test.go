package examples

import (
	"os"
	"testing"

	"github.com/quota-exporter/quota_exporter/test/testenv"
)

// require is testenv.Require.
var require = testenv.Require

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
