package webhooks_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rental/infra/accounts"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/infra/webhooks"
	"rental/schemas/network"
)

// These tests put a Delete and a concurrent writer into the one interleaving that
// deadlocked when their lock orders disagreed, by parking the writer on a lock the test
// holds and releasing it once the Delete waits too. Each side must then finish: the
// endpoint's delete is a customer's request and may not fail because the deliverer (or
// another request of the customer) was writing at the same moment.

var lockTestKey = []byte("0123456789abcdef0123456789abcdef")

type lockEnv struct {
	db    *testenv.DB
	store *webhooks.Store
}

func newLockEnv(t *testing.T) *lockEnv {
	t.Helper()
	e := &lockEnv{db: testenv.Postgres(t)}
	var err error
	if e.store, err = webhooks.NewStore(e.db.Pool, lockTestKey); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *lockEnv) account(t *testing.T) string {
	t.Helper()
	var b [20]byte
	_, _ = rand.Read(b[:])
	addr, err := tron.AddressFromBytes(b[:])
	if err != nil {
		t.Fatal(err)
	}
	st, err := accounts.New(e.db.Pool, accounts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := st.CreateOrGetByOwner(context.Background(), network.Nile, addr, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}

func (e *lockEnv) endpoint(t *testing.T, account, role string) webhooks.Target {
	t.Helper()
	var tg webhooks.Target
	if err := e.store.InTx(context.Background(), func(tx pgx.Tx) error {
		var err error
		tg, err = e.store.Create(context.Background(), tx, account, webhooks.NewEndpoint{URL: "https://example.com/" + role, Role: role})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return tg
}

// waitLockWaiters returns once n sessions of the test's database wait for a lock.
func (e *lockEnv) waitLockWaiters(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got int
		if err := e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait for a lock after 10 s, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *lockEnv) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// result waits for a goroutine's error.
func result(t *testing.T, what string, c <-chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(15 * time.Second):
		t.Fatalf("%s did not return within 15 s", what)
		return nil
	}
}

func isDeadlock(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40P01"
}

// The deliverer records an attempt (Retry, Failover, Finish: the queue row first, then
// the history row, whose foreign key locks the endpoint) while the customer deletes that
// endpoint. The interleaving: the deliverer holds its queue row and is about to insert the
// history row; the Delete starts. The history insert is parked on a duplicate delivery id
// that a test transaction inserted and has not committed, and released once the Delete
// waits as well.
func TestDeleteWhileAnAttemptIsRecorded(t *testing.T) {
	cases := []struct {
		name   string
		next   string
		record func(ctx context.Context, s *webhooks.Store, a webhooks.Attempt) error
	}{
		{"retry", "retry", func(ctx context.Context, s *webhooks.Store, a webhooks.Attempt) error {
			return s.Retry(ctx, a, time.Now().Add(time.Minute))
		}},
		{"failover", "failover", func(ctx context.Context, s *webhooks.Store, a webhooks.Attempt) error {
			return s.Failover(ctx, a, webhooks.RoleBackup)
		}},
		{"finish", "dead", func(ctx context.Context, s *webhooks.Store, a webhooks.Attempt) error {
			_, err := s.Finish(ctx, a)
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			e := newLockEnv(t)
			acc := e.account(t)
			primary := e.endpoint(t, acc, webhooks.RolePrimary)
			e.endpoint(t, acc, webhooks.RoleBackup)
			other := e.endpoint(t, e.account(t), webhooks.RolePrimary)
			const eventID = "evt_lockorder"
			if err := e.store.Enqueue(ctx, webhooks.Item{AccountID: acc, OKey: eventID, EventID: eventID,
				EventType: "balance.credited", Body: []byte(`{}`), MaxAttempts: 10, Role: webhooks.RolePrimary}); err != nil {
				t.Fatal(err)
			}
			const deliveryID = "dlv_lockorder"
			park, err := e.db.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer park.Rollback(ctx) //nolint:errcheck // rolled back below; a no-op then
			if _, err := park.Exec(ctx, `INSERT INTO webhook_deliveries (id, endpoint_id, account_id, event_id,
					event_type, role, attempt, status, latency_ms, next)
				VALUES ($1, $2, $3, 'evt_other', 'balance.credited', 'primary', 1, 'failed', 0, 'retry')`,
				deliveryID, other.ID, other.AccountID); err != nil {
				t.Fatal(err)
			}

			recorded := make(chan error, 1)
			go func() {
				status := 500
				recorded <- c.record(ctx, e.store, webhooks.Attempt{DeliveryID: deliveryID, EndpointID: primary.ID,
					AccountID: acc, EventID: eventID, EventType: "balance.credited", Role: webhooks.RolePrimary,
					Number: 1, HTTPStatus: &status, Latency: time.Millisecond, Next: c.next})
			}()
			e.waitLockWaiters(t, 1) // the history insert, behind the parked duplicate
			deleted := make(chan error, 1)
			go func() { deleted <- e.store.Delete(ctx, acc, primary.ID) }()
			e.waitLockWaiters(t, 2) // the Delete, behind the deliverer's queue row
			if err := park.Rollback(ctx); err != nil {
				t.Fatal(err)
			}

			start := time.Now()
			errDel := result(t, "Delete", deleted)
			errRec := result(t, c.name, recorded)
			t.Logf("both returned %s after the release", time.Since(start).Round(time.Millisecond))
			if errDel != nil {
				t.Errorf("Delete: %v (deadlock: %v)", errDel, isDeadlock(errDel))
			}
			if errRec != nil {
				t.Errorf("%s: %v (deadlock: %v)", c.name, errRec, isDeadlock(errRec))
			}
			if errDel != nil {
				return
			}
			if n := e.count(t, `SELECT count(*) FROM webhook_endpoints WHERE id = $1`, primary.ID); n != 0 {
				t.Error("the endpoint is still there")
			}
			if n := e.count(t, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1`, primary.ID); n != 0 {
				t.Errorf("%d history rows of the deleted endpoint", n)
			}
			// What was queued for the primary went with it; a delivery that failed over to
			// the backup before the Delete stays the backup's.
			wantBackup := 0
			if c.name == "failover" {
				wantBackup = 1
			}
			if n := e.count(t, `SELECT count(*) FROM webhook_queue WHERE role = 'primary'`); n != 0 {
				t.Errorf("%d deliveries still queued for the deleted primary", n)
			}
			if n := e.count(t, `SELECT count(*) FROM webhook_queue WHERE role = 'backup'`); n != wantBackup {
				t.Errorf("%d deliveries queued for the backup, want %d", n, wantBackup)
			}
		})
	}
}

// A customer rotates an endpoint's secret (the request's transaction also writes the audit
// row, which locks the account through its foreign key) while another request deletes the
// endpoint.
func TestDeleteWhileTheSecretIsRotated(t *testing.T) {
	ctx := context.Background()
	e := newLockEnv(t)
	acc := e.account(t)
	ep := e.endpoint(t, acc, webhooks.RolePrimary)

	tx, err := e.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := e.store.RotateSecret(ctx, tx, acc, ep.ID); err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- e.store.Delete(ctx, acc, ep.ID) }()
	e.waitLockWaiters(t, 1)
	rotated := make(chan error, 1)
	go func() {
		if err := accounts.WriteAudit(ctx, tx, acc, "test", "webhook.rotate_secret", map[string]any{"webhook_id": ep.ID}); err != nil {
			rotated <- err
			return
		}
		rotated <- tx.Commit(ctx)
	}()
	errRot := result(t, "RotateSecret's transaction", rotated)
	errDel := result(t, "Delete", deleted)
	if errRot != nil {
		t.Errorf("rotate: %v (deadlock: %v)", errRot, isDeadlock(errRot))
	}
	if errDel != nil {
		t.Errorf("Delete: %v (deadlock: %v)", errDel, isDeadlock(errDel))
	}
	if n := e.count(t, `SELECT count(*) FROM webhook_endpoints WHERE id = $1`, ep.ID); n != 0 && errDel == nil {
		t.Error("the endpoint is still there")
	}
}

// The hourly prune of old history never waits for a row lock, so it cannot close a cycle
// with a Delete whose cascade is removing the same endpoint's history in another order: it
// leaves the rows a Delete holds (they go with the endpoint anyway) and prunes the rest.
func TestPruneSkipsHistoryADeleteHolds(t *testing.T) {
	ctx := context.Background()
	e := newLockEnv(t)
	acc := e.account(t)
	doomed := e.endpoint(t, acc, webhooks.RolePrimary)
	kept := e.endpoint(t, e.account(t), webhooks.RolePrimary)
	for i, ep := range []webhooks.Target{doomed, doomed, doomed, kept, kept} {
		if _, err := e.db.Pool.Exec(ctx, `INSERT INTO webhook_deliveries (id, endpoint_id, account_id, event_id,
				event_type, role, attempt, status, latency_ms, next, attempted_at)
			VALUES ($1, $2, $3, $1, 'balance.credited', 'primary', 1, 'failed', 0, 'retry', now() - $4::interval)`,
			"dlv_old_"+string(rune('a'+i)), ep.ID, ep.AccountID, time.Duration(40*24+i)*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	// A Delete of doomed in progress: the cascade holds its history rows.
	tx, err := e.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, `DELETE FROM webhook_endpoints WHERE id = $1`, doomed.ID); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := e.store.PruneHistory(pctx, webhooks.HistoryRetention)
	if err != nil {
		t.Fatalf("prune while a Delete holds history rows: %v", err)
	}
	if n != 2 {
		t.Errorf("pruned %d rows, want the 2 no Delete holds", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if left := e.count(t, `SELECT count(*) FROM webhook_deliveries`); left != 0 {
		t.Errorf("%d history rows left", left)
	}
}
