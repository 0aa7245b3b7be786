// Package workertest is what the tests of the worker (over the fakes) and of the app (over
// NATS) share: a job that takes its worker down, and a neighbour it takes down with it.
package workertest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Crash stands for a job (Poison) whose input takes down every worker that converts it,
// beside another job (Innocent) that is converting on the same worker the first time
// the worker goes down, and converts slowly afterwards. Phase is the worker's
// Options.Phase; Crashed receives a value each time a worker "dies" under a job.
type Crash struct {
	Poison, Innocent string
	Crashed          chan struct{}
	innocentRuns     atomic.Int32
}

// NewCrash is the crash of poison beside innocent.
func NewCrash(poison, innocent string) *Crash {
	return &Crash{Poison: poison, Innocent: innocent, Crashed: make(chan struct{}, 16)}
}

// Phase blocks a worker that converts the poisoned job until the worker is stopped (it
// dies mid-job: no outcome is recorded), and the innocent job the first time.
func (c *Crash) Phase(ctx context.Context, id, phase string) {
	switch {
	case phase != "converting":
	case id == c.Poison:
		c.Crashed <- struct{}{}
		<-ctx.Done()
	case id == c.Innocent && c.innocentRuns.Add(1) == 1:
		c.Crashed <- struct{}{} // converting beside the poisoned job when the worker dies
		<-ctx.Done()
	case id == c.Innocent:
		select { // a slow conversion, which a worker dying meanwhile interrupts
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// Rounds runs the scenario: a worker (start) runs both jobs until the first crash takes
// both down; then each new worker is stopped when the poisoned job crashes it, until
// poisonEnded reports the job over (at most maxAttempts+1 rounds after the first). The
// worker that saw it end keeps running (start's cleanup stops it): the innocent job may
// be converting alone on it, and stopping it then would be a crash of the innocent's own.
func (c *Crash) Rounds(t *testing.T, maxAttempts int, start func() (stop func()), poisonEnded func() bool) {
	t.Helper()
	stop := start()
	<-c.Crashed
	<-c.Crashed
	stop()
	for round := 0; ; round++ {
		if round > maxAttempts+1 {
			t.Fatal("the poisoned job is still tried")
		}
		stop := start()
		if c.waitCrashOrEnd(poisonEnded) {
			return
		}
		stop()
	}
}

// waitCrashOrEnd waits (a minute at most) for the poisoned job to crash its worker or to
// be over; it reports the latter.
func (c *Crash) waitCrashOrEnd(poisonEnded func() bool) bool {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-c.Crashed:
			return false
		case <-time.After(20 * time.Millisecond): // polling interval of a deadline loop
		}
		if poisonEnded() {
			return true
		}
	}
	return false
}
