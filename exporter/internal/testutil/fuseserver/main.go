// Command fuseserver mounts a one-file FUSE file system whose reads are not answered until
// it is told to: the tests use it to put a real process into a page fault that does not
// return (the process's mmap_lock held), as NFS, FUSE or a stuck disk do on real nodes.
//
// It is a separate process (and module) on purpose: a FUSE server that lives in the test
// process would be blocked by the test's own accesses to the mount, and the file system
// must outlive nothing but this process (its death aborts the connection, which unblocks
// every waiter).
//
// Protocol on stdin/stdout, one line each: it prints "ready <mountpoint>" once mounted and
// "read <offset>" whenever it holds a read; the line "answer" on stdin makes it answer every
// read, held or future; end of input unmounts and exits.
//
// By default the file is "data", 1 MiB of 'x', and every read is held. With -file it serves a
// copy of that file instead (executable, named by -name), and holds only the reads at or past
// -hold-from: a program on the mount runs (exec and page faults read its loaded part), while
// a reader of what lies beyond (an executable's section headers) blocks.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

var (
	content  = []byte(strings.Repeat("x", 1<<20))
	mode     = uint32(0o444)
	holdFrom int64
)

var (
	answer     = make(chan struct{})
	answerOnce sync.Once
	outMu      sync.Mutex
)

func say(format string, args ...any) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Printf(format+"\n", args...)
}

type root struct{ fs.Inode }

var _ = (fs.NodeOnAdder)((*root)(nil))

func (r *root) OnAdd(ctx context.Context) {
	r.AddChild(name, r.NewPersistentInode(ctx, &dataFile{}, fs.StableAttr{Mode: syscall.S_IFREG}), false)
}

var name = "data"

// dataFile serves content; reads at or past holdFrom only once "answer" was read.
type dataFile struct{ fs.Inode }

var (
	_ = (fs.NodeGetattrer)((*dataFile)(nil))
	_ = (fs.NodeOpener)((*dataFile)(nil))
	_ = (fs.NodeReader)((*dataFile)(nil))
)

func (f *dataFile) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | mode
	out.Size = uint64(len(content))
	return 0
}

// Open keeps the page cache: without FOPEN_KEEP_CACHE the kernel would invalidate it on each
// open, which waits for the page an unanswered read has locked.
func (f *dataFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

// Read holds a request at or past holdFrom until "answer": the kernel's request (a page
// fault's readahead) is not interruptible, so the context is not watched.
func (f *dataFile) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= holdFrom {
		say("read %d", off)
		<-answer
	}
	size := int64(len(content))
	n := int64(len(dest))
	if off >= size {
		n = 0
	} else if off+n > size {
		n = size - off
	}
	copy(dest[:n], content[off:])
	return fuse.ReadResultData(dest[:n]), 0
}

func main() {
	log.SetFlags(0)
	mnt := flag.String("mount", "", "mountpoint (an empty directory)")
	file := flag.String("file", "", "serve a copy of this file (executable) instead of 1 MiB of 'x'")
	flag.StringVar(&name, "name", name, "the served file's name")
	flag.Int64Var(&holdFrom, "hold-from", 0, "hold only the reads at or past this offset")
	flag.Parse()
	if *mnt == "" {
		log.Fatal("fuseserver: -mount is required")
	}
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			log.Fatalf("fuseserver: %v", err)
		}
		content, mode = b, 0o555
	}
	server, err := fs.Mount(*mnt, &root{}, &fs.Options{MountOptions: fuse.MountOptions{
		// Mount with mount(2) as root: no fusermount needed, and no fallback to it.
		DirectMount: true, DirectMountStrict: true,
		FsName: "quota-exporter-test", Name: "stuckfs",
	}})
	if err != nil {
		log.Fatalf("fuseserver: mount: %v", err)
	}
	say("ready %s", *mnt)
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			if in.Text() == "answer" {
				answerOnce.Do(func() { close(answer) })
				say("answering")
			}
		}
		answerOnce.Do(func() { close(answer) })
		if err := server.Unmount(); err != nil {
			log.Printf("fuseserver: unmount: %v", err)
		}
	}()
	server.Wait()
}
