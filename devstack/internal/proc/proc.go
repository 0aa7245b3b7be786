// Package proc starts child processes that die with the parent.
package proc

import (
	"os/exec"
	"runtime"
	"syscall"
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
