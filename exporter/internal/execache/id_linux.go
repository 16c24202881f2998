package execache

import (
	"os"

	"golang.org/x/sys/unix"
)

func idOf(f *os.File) (ID, bool) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return ID{}, false
	}
	return ID{Dev: st.Dev, Ino: st.Ino, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, true
}
