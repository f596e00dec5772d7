package integration

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill the proxy if the test binary dies
// (a -timeout panic, say) before it could stop it.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
