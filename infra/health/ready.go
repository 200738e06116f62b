package health

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Readiness is a stage's readiness: the named checks of what it needs to do its work (its
// Postgres pool, Redis, Kafka, the node). It is ready when every check answers within
// CheckTimeout. It is not the public GET /v1/status: that one judges the service (is
// chainwatch fresh, is supply there), this one judges one process, so a load balancer that
// pulls a not-ready replica never pulls all of them for a fault none of them can fix.
type Readiness struct {
	mu     sync.Mutex
	checks []namedCheck
}

type namedCheck struct {
	name string
	fn   func(ctx context.Context) error
}

// CheckTimeout bounds each readiness check, so a hung dependency reads as not ready within
// a probe's period rather than holding the probe.
const CheckTimeout = 2 * time.Second

// Add registers a check; fn returns nil when the dependency answers.
func (r *Readiness) Add(name string, fn func(ctx context.Context) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks = append(r.checks, namedCheck{name, fn})
}

// ReadyReport is the body of GET /readyz: "ready" or "not_ready", and for each check that
// failed, its name and why.
type ReadyReport struct {
	Status   string            `json:"status"`
	NotReady map[string]string `json:"not_ready,omitempty"`
	Checked  []string          `json:"checked"`
}

// Ready reports whether every check passes. The checks run concurrently.
func (r *Readiness) Ready(ctx context.Context) ReadyReport {
	r.mu.Lock()
	checks := append([]namedCheck(nil), r.checks...)
	r.mu.Unlock()
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
			defer cancel()
			errs[i] = c.fn(cctx)
		})
	}
	wg.Wait()
	rep := ReadyReport{Status: "ready", Checked: []string{}}
	for i, c := range checks {
		rep.Checked = append(rep.Checked, c.name)
		if errs[i] != nil {
			if rep.NotReady == nil {
				rep.NotReady = map[string]string{}
			}
			rep.NotReady[c.name] = errs[i].Error()
			rep.Status = "not_ready"
		}
	}
	sort.Strings(rep.Checked)
	return rep
}
