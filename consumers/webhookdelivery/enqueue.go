package webhookdelivery

import (
	"context"

	"rental/infra/webhooks"
)

// enqueuer queues the new events the partition workers hand it at the same moment in one
// transaction (webhooks.Store.EnqueueNew): one round trip and one WAL flush for all of
// them instead of one each. A worker waits for its own event's commit, so an offset is
// still committed only after its event is queued. Events of one key come from one
// partition worker, one at a time, so they are never in flight together.
type enqueuer struct {
	store   *webhooks.Store
	reqs    chan *enqReq // unbuffered: a request taken is always answered
	workers int
	max     int
}

type enqReq struct {
	d    webhooks.NewDelivery
	done chan enqRes
}

type enqRes struct {
	q   webhooks.Queued
	err error
}

func newEnqueuer(store *webhooks.Store) *enqueuer {
	return &enqueuer{store: store, reqs: make(chan *enqReq), workers: 2, max: 64}
}

// run serves requests until ctx ends.
func (e *enqueuer) run(ctx context.Context) {
	for range e.workers {
		go e.work(ctx)
	}
}

func (e *enqueuer) work(ctx context.Context) {
	for {
		var batch []*enqReq
		select {
		case r := <-e.reqs:
			batch = append(batch, r)
		case <-ctx.Done():
			return
		}
	more:
		for len(batch) < e.max {
			select {
			case r := <-e.reqs:
				batch = append(batch, r)
			default:
				break more
			}
		}
		ds := make([]webhooks.NewDelivery, len(batch))
		for i, r := range batch {
			ds[i] = r.d
		}
		qs, err := e.store.EnqueueNew(ctx, ds, lease)
		for i, r := range batch {
			if err != nil {
				r.done <- enqRes{err: err}
			} else {
				r.done <- enqRes{q: qs[i]}
			}
		}
	}
}

// enqueue queues one new event and returns once it is committed (or failed).
func (e *enqueuer) enqueue(ctx context.Context, d webhooks.NewDelivery) (webhooks.Queued, error) {
	r := &enqReq{d: d, done: make(chan enqRes, 1)}
	select {
	case e.reqs <- r:
	case <-ctx.Done():
		return webhooks.Queued{}, ctx.Err()
	}
	res := <-r.done
	return res.q, res.err
}
