package live

import (
	"os"
	"syscall"
)

func sysStamp(fi os.FileInfo) (ino uint64, ctime int64) {
	if s, ok := fi.Sys().(*syscall.Stat_t); ok {
		return s.Ino, s.Ctim.Nano()
	}
	return 0, 0
}
