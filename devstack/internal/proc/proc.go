// Package proc starts child processes that die with the parent.
package proc

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// Start starts cmd with Pdeathsig=SIGTERM and returns a channel that receives
// cmd.Wait's result once.
//
// Pdeathsig fires when the parent *thread* exits, not the process, and the Go
// runtime may retire threads (golang/go#27505). So Start and Wait run on one
// goroutine locked to its OS thread for the child's whole life: the thread
// then lives exactly as long as the child is being waited for.
func Start(cmd *exec.Cmd) (<-chan error, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	cmd.SysProcAttr.Setpgid = false

	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			runtime.UnlockOSThread()
			return
		}
		started <- nil
		exited <- cmd.Wait()
		runtime.UnlockOSThread()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}

// Stop sends sig to cmd's process and waits for exited (Start's channel), killing the
// process after grace; it reports an error naming what when it had to kill.
func Stop(cmd *exec.Cmd, exited <-chan error, sig os.Signal, grace time.Duration, what string) error {
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
		return nil
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("devstack: %s ignored %v for %s, killed", what, sig, grace)
	}
}
