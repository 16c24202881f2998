package execache

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func idOfPath(t *testing.T, p string) ID {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, ok := IDOf(f)
	if !ok {
		t.Skip("file identity not available here")
	}
	return id
}

// One file is one entry for every reader of it; rewriting it in place, even to the same size
// and with its old mtime put back, is another; so is a copy.
func TestIdentity(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "app")
	if err := os.WriteFile(p, []byte("version one"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := New[string](4)
	first := idOfPath(t, p)
	c.Add(first, "one")
	if v, ok := c.Get(idOfPath(t, p)); !ok || v != "one" {
		t.Fatalf("same file: %q, %v", v, ok)
	}
	fi, _ := os.Stat(p)
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(p, []byte("version two"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get(idOfPath(t, p)); ok {
		t.Errorf("a file rewritten to the same size with its mtime set back is still cached")
	}
	cp := filepath.Join(dir, "copy")
	if err := os.WriteFile(cp, []byte("version one"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get(idOfPath(t, cp)); ok {
		t.Errorf("a copy is cached as the original")
	}
}

// The cache holds at most its entries, the least recently used going first; a nil cache
// holds nothing.
func TestBounded(t *testing.T) {
	c := New[int](2)
	for i := range 3 {
		c.Add(ID{Ino: uint64(i)}, i)
		if i == 1 {
			c.Get(ID{Ino: 0}) // 0 is used again: 1 goes first
		}
	}
	if _, ok := c.Get(ID{Ino: 1}); ok || c.Len() != 2 {
		t.Errorf("len %d, least recently used still there: %v", c.Len(), ok)
	}
	var none *Cache[int]
	none.Add(ID{}, 1)
	if _, ok := none.Get(ID{}); ok || none.Len() != 0 {
		t.Error("a nil cache holds something")
	}
}
