// Package pidfile is the process ID file of ROBOTSGATE_PID_FILE, which a
// log rotation's "kill -HUP" reads: written whole once robotsgate listens,
// removed when it stops, and never another process's.
package pidfile

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
)

// Write writes this process's ID to path, whole or not at all (a
// temporary file renamed over it), and returns what removes it again,
// unless another process wrote its own there meanwhile.
func Write(path string) (remove func(*slog.Logger), err error) {
	pid := strconv.Itoa(os.Getpid()) + "\n"
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, fmt.Errorf("cannot write %q: %w", path, pathReason(err))
	}
	_, err = tmp.WriteString(pid)
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("cannot write %q: %w", path, pathReason(err))
	}
	return func(log *slog.Logger) {
		if held, err := os.ReadFile(path); err != nil || string(held) != pid {
			return // gone, or another process's now
		}
		if err := os.Remove(path); err != nil {
			log.Warn("the pid file was not removed", "path", path, "err", err)
		}
	}, nil
}

// pathReason is err without the path of an *fs.PathError or a
// *os.LinkError: the messages quote the file robotsgate was asked for,
// not its temporary one.
func pathReason(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	if le, ok := errors.AsType[*os.LinkError](err); ok {
		return le.Err
	}
	return err
}
