//go:build !linux

package live

import "os"

// sysStamp: elsewhere size and modification time alone tell a change.
func sysStamp(os.FileInfo) (ino uint64, ctime int64) { return 0, 0 }
