package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const helloSource = "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n"

// A program is built once per test binary and per flags, into a directory anyone may read.
func TestBuildGoOnce(t *testing.T) {
	a := BuildGoSource(t, "hello", helloSource)
	if b := BuildGoSource(t, "hello", helloSource); b != a {
		t.Errorf("built again: %s, %s", a, b)
	}
	if out, err := exec.Command(a).Output(); err != nil || string(out) != "hello\n" {
		t.Errorf("%s: %q, %v", a, out, err)
	}
	if filepath.Base(a) != "hello" {
		t.Errorf("name %s", a)
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(helloSource), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module hello\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plain, small := BuildGo(t, src), BuildGo(t, src, "-ldflags=-s -w")
	if plain == small {
		t.Fatalf("one path for two builds: %s", plain)
	}
	for _, p := range []string{filepath.Dir(filepath.Dir(plain)), filepath.Dir(plain), plain} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o005 != 0o005 {
			t.Errorf("%s: %v %v, want readable and searchable by anyone", p, fi.Mode(), err)
		}
	}
}

func TestBuildC(t *testing.T) {
	src := filepath.Join(t.TempDir(), "hi.c")
	if err := os.WriteFile(src, []byte("#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := BuildC(t, src, "-O1")
	if filepath.Base(bin) != "hi" {
		t.Errorf("name %s", bin)
	}
	if out, err := exec.Command(bin).Output(); err != nil || strings.TrimSpace(string(out)) != "hi" {
		t.Errorf("%s: %q, %v", bin, out, err)
	}
}
