package live

import "os"

// stamp is what tells a file changed without reading it: its size and
// modification time, and where the system has them its inode (a rename
// over it) and change time (a write that restored the modification time).
type stamp struct {
	size, mtime int64
	ino         uint64
	ctime       int64
}

func stampOf(fi os.FileInfo) stamp {
	st := stamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	st.ino, st.ctime = sysStamp(fi)
	return st
}
