package platform

import (
	"context"
	"fmt"
	"time"
)

// Restarts is how Supervise restarts a process that exits, as a cluster restarts a
// crashed pod: after Backoff, doubled for each exit within Window up to MaxBackoff, and
// at most Max times within Window (a crash loop then stays down, and the stack stops).
type Restarts struct {
	Max        int
	Window     time.Duration
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// DefaultRestarts restart a process five times within ten minutes, after 1 s, 2 s, 4 s...
var DefaultRestarts = Restarts{Max: 5, Window: 10 * time.Minute, Backoff: time.Second, MaxBackoff: 30 * time.Second}

// Supervise restarts r each time it exits, until ctx ends, until StopAll (or Stop)
// stops it, or until it exited more than p.Max times within p.Window. Every restart is
// one line to report: which process exited, how, and that it was restarted. gaveUp is
// called when r stays down: over its budget, or a restart that failed to start it.
func Supervise(ctx context.Context, r *Running, p Restarts, report func(line string), gaveUp func(r *Running, why string)) {
	var exits []time.Time
	for {
		select {
		case <-r.Done():
		case <-ctx.Done():
			return
		}
		if r.stopping.Load() || ctx.Err() != nil {
			return
		}
		_, how := r.Exited()
		now := time.Now()
		exits = append(exits, now)
		for len(exits) > 0 && now.Sub(exits[0]) > p.Window {
			exits = exits[1:]
		}
		if len(exits) > p.Max {
			gaveUp(r, fmt.Sprintf("%s exited (%s), %d times within %s; not restarted again", r.Name, how, len(exits), p.Window))
			return
		}
		delay := min(p.Backoff<<(len(exits)-1), p.MaxBackoff)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return
		}
		r.life.Lock()
		if r.stopping.Load() {
			r.life.Unlock()
			return
		}
		err := r.launch()
		r.life.Unlock()
		if err != nil {
			gaveUp(r, fmt.Sprintf("%s exited (%s) and could not be restarted: %v", r.Name, how, err))
			return
		}
		report(fmt.Sprintf("%s exited (%s); restarted it after %s as pid %d (restart %d of %d within %s)",
			r.Name, how, delay, r.Pid(), len(exits), p.Max, p.Window))
	}
}
