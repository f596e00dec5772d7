//go:build unix

package signing

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestReadKeyFileRefusesFIFO: a key file that is a FIFO (mode 0600, as
// mkfifo -m 600 makes it) is refused at once: opened, it would block the
// start waiting for a writer that never comes.
func TestReadKeyFileRefusesFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "key.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := ReadKeyFile(fifo)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO read as a key file")
		}
	case <-time.After(2 * time.Second):
		t.Error("ReadKeyFile on a FIFO still blocked after 2s: the start hangs")
		// Unblock the reader so the test can end.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
	}
}
