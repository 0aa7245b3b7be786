package neighbour

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/analyticsco/platform/devstack"
)

// State is a prepared run as another process resumes it: the bench runs the flooder's
// and the neighbour's clients each in a process of its own, in a CPU cgroup of its own,
// so that neither client's CPU is the other's.
type State struct {
	Gateway            string
	Flooder, Neighbour devstack.SeedAccount
	FloodItems         []ItemRef
	BombDep, UploadDep int64
	UsedSession        string
	Upload             []byte
	Dep, A, B          int64
	Items              []ItemRef
	Manifest           json.RawMessage
	Laps               int
}

// ItemRef is an item reference of a bulk move.
type ItemRef = itemRef

// State is the run's state, to Resume elsewhere.
func (r *Run) State() State {
	return State{Gateway: r.gateway, Flooder: r.flooder, Neighbour: r.neighbour, FloodItems: r.floodItems, BombDep: r.bombDep,
		UploadDep: r.uploadDep, UsedSession: r.usedSession, Upload: r.upload, Dep: r.dep, A: r.a, B: r.b, Items: r.items,
		Manifest: r.manifest, Laps: r.laps}
}

// Resume is the run s was taken from, with clients of its own.
func Resume(s State) *Run {
	return &Run{gateway: s.Gateway, flooder: s.Flooder, neighbour: s.Neighbour, fc: newClient(s.Gateway, flooderAddr), nc: newClient(s.Gateway, neighbourAddr),
		floodItems: s.FloodItems, bombDep: s.BombDep, uploadDep: s.UploadDep, usedSession: s.UsedSession, upload: s.Upload,
		dep: s.Dep, a: s.A, b: s.B, items: s.Items, manifest: s.Manifest, laps: s.Laps}
}

// WireSample is a Sample as JSON carries it (its error as text).
type WireSample struct {
	Op, Code, RequestID, JobID string
	Status                     int
	Took                       time.Duration
	Err                        string `json:",omitempty"`
}

// Wire is s for JSON.
func (s Sample) Wire() WireSample {
	w := WireSample{Op: s.Op, Code: s.Code, RequestID: s.RequestID, JobID: s.JobID, Status: s.Status, Took: s.Took}
	if s.Err != nil {
		w.Err = s.Err.Error()
	}
	return w
}

// Unwire is the sample w carries.
func (w WireSample) Unwire() Sample {
	s := Sample{Op: w.Op, Code: w.Code, RequestID: w.RequestID, JobID: w.JobID, Status: w.Status, Took: w.Took}
	if w.Err != "" {
		s.Err = errors.New(w.Err)
	}
	return s
}
