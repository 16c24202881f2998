//go:build linux

package cgroups

import (
	"os"
	"path/filepath"
	"syscall"
	"unsafe"
)

// walkDirs calls visit for root and every directory below it, depth first, parents before
// children. It reads directories with getdents and keeps only subdirectories: a cgroup
// directory holds dozens of control files, and os.ReadDir's open (with its fcntl and epoll
// calls) and one DirEntry per file made the walk a large share of a scrape.
// visit returning false stops the walk. Errors are reported through onErr with the
// directory; a directory that vanished mid-walk is skipped silently.
func walkDirs(root string, visit func(dir string) bool, onErr func(dir string, err error)) {
	buf := make([]byte, 16<<10)
	var rec func(dir string) bool
	rec = func(dir string) bool {
		if !visit(dir) {
			return false
		}
		subdirs, err := readSubdirs(dir, buf)
		if err != nil {
			if !os.IsNotExist(err) {
				onErr(dir, err)
			}
			return true
		}
		for _, name := range subdirs {
			if !rec(filepath.Join(dir, name)) {
				return false
			}
		}
		return true
	}
	rec(root)
}

// readSubdirs lists the subdirectory names of dir.
func readSubdirs(dir string, buf []byte) ([]string, error) {
	fd, err := openDirectory(dir)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer syscall.Close(fd)
	var names []string
	for {
		n, err := syscall.Getdents(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "getdents", Path: dir, Err: err}
		}
		if n <= 0 {
			return names, nil
		}
		for off := 0; off < n; {
			// struct linux_dirent64 { u64 ino; s64 off; u16 reclen; u8 type; char name[]; }
			if off+19 > n {
				break
			}
			reclen := int(*(*uint16)(unsafe.Pointer(&buf[off+16])))
			if reclen <= 0 || off+reclen > n {
				break
			}
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			off += reclen
			if string(name) == "." || string(name) == ".." {
				continue
			}
			isDir := typ == syscall.DT_DIR
			if typ == syscall.DT_UNKNOWN { // file systems that do not fill d_type
				var st syscall.Stat_t
				isDir = syscall.Lstat(filepath.Join(dir, string(name)), &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR
			}
			if isDir {
				names = append(names, string(name))
			}
		}
	}
}

func openDirectory(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}
