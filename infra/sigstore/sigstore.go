// Package sigstore owns used_signatures: the record, in Postgres, of every signed write's
// signature (docs/auth.md "Replay protection"). The Redis replay cache
// (infra/reqsign/replay) answers most replays in the rate budget's round trip; this record
// is what still refuses a replay after Redis lost its keys. A signature is recorded in the
// transaction of the write it authorises (orders) or, for other writes, on its own before
// the write runs, and kept until its timestamp can no longer pass the skew check.
package sigstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/reqsign/replay"
)

// Sig is one use of a signature: the key that signed and the HMAC.
type Sig struct {
	KeyID string
	Sum   []byte
}

// IsZero reports an unsigned request (nothing to record).
func (s Sig) IsZero() bool { return s.KeyID == "" || len(s.Sum) == 0 }

// ErrUsed is a signature recorded before: the request is a replay (1009).
var ErrUsed = errors.New("sigstore: signature already used")

// sweepEvery is how often Record deletes expired rows (at most once per interval per
// process; any process's sweep serves all).
const sweepEvery = time.Minute

// Store records used signatures.
type Store struct {
	pool      *pgxpool.Pool
	ttl       time.Duration
	now       func() time.Time
	lastSweep atomic.Int64
}

// New returns a store on pool; ttl 0 is replay.DefaultTTL (the Redis cache's too).
func New(pool *pgxpool.Pool, ttl time.Duration) *Store {
	if ttl <= 0 {
		ttl = replay.DefaultTTL
	}
	return &Store{pool: pool, ttl: ttl, now: time.Now}
}

const insertSQL = `INSERT INTO used_signatures (key_id, sig, expires_at) VALUES ($1, $2, $3)
	ON CONFLICT (key_id, sig) DO UPDATE SET expires_at = EXCLUDED.expires_at
	WHERE used_signatures.expires_at < now()
	RETURNING true`

// Record records sig's use on its own and reports ErrUsed when it was recorded before.
// Use it before running a write whose transaction cannot carry QueueRecord.
func (s *Store) Record(ctx context.Context, sig Sig) error {
	s.maybeSweep()
	var first bool
	err := s.pool.QueryRow(ctx, insertSQL, sig.KeyID, sig.Sum, s.now().Add(s.ttl)).Scan(&first)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrUsed
	}
	if err != nil {
		return fmt.Errorf("sigstore: record: %w", err)
	}
	return nil
}

// Queued is QueueRecord's answer once its batch ran.
type Queued struct{ first bool }

// Err is ErrUsed when the signature was recorded before.
func (q *Queued) Err() error {
	if !q.first {
		return ErrUsed
	}
	return nil
}

// QueueRecord queues sig's record in b, to commit with the write it authorises; check
// Err after the batch ran and roll back on ErrUsed.
func (s *Store) QueueRecord(b *pgx.Batch, sig Sig) *Queued {
	s.maybeSweep()
	q := &Queued{}
	b.Queue(insertSQL, sig.KeyID, sig.Sum, s.now().Add(s.ttl)).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		q.first = rows.Next()
		return rows.Err()
	})
	return q
}

// QueuedExisting is QueueExisting's answer once its batch ran.
type QueuedExisting struct{ found map[string]bool }

// Has reports whether sig was recorded (and has not expired).
func (q *QueuedExisting) Has(sig Sig) bool { return q.found[string(sig.Sum)+"\x00"+sig.KeyID] }

// QueueExisting queues a read of which of sigs are recorded, for a group of writes that
// leaves those to the one-by-one path (which answers 1009) and records the others with
// QueueInsertMany in the same transaction.
func (s *Store) QueueExisting(b *pgx.Batch, sigs []Sig) *QueuedExisting {
	q := &QueuedExisting{found: map[string]bool{}}
	ids, sums := columns(sigs)
	// The expiry is read, not filtered on: a condition on expires_at lets the planner reach
	// the rows through used_signatures_expiry, which every live signature matches, instead
	// of the primary key.
	b.Queue(`SELECT s.key_id, s.sig, s.expires_at >= now() FROM unnest($1::text[], $2::bytea[]) AS u(key_id, sig)
		JOIN used_signatures s ON s.key_id = u.key_id AND s.sig = u.sig`,
		ids, sums).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var id string
			var sum []byte
			var live bool
			if err := rows.Scan(&id, &sum, &live); err != nil {
				return err
			}
			if live {
				q.found[string(sum)+"\x00"+id] = true
			}
		}
		return rows.Err()
	})
	return q
}

// QueueInsertMany queues the record of sigs, none recorded by QueueExisting's read. A
// signature recorded since (a concurrent replay) fails the batch with ErrUsed, and the
// caller rolls the whole group back.
func (s *Store) QueueInsertMany(b *pgx.Batch, sigs []Sig) {
	ids, sums := columns(sigs)
	b.Queue(`INSERT INTO used_signatures (key_id, sig, expires_at)
		SELECT key_id, sig, $3 FROM unnest($1::text[], $2::bytea[]) AS u(key_id, sig)
		ON CONFLICT (key_id, sig) DO UPDATE SET expires_at = EXCLUDED.expires_at
		WHERE used_signatures.expires_at < now()`,
		ids, sums, s.now().Add(s.ttl)).Exec(func(tag pgconn.CommandTag) error {
		if n := tag.RowsAffected(); n != int64(len(sigs)) {
			return fmt.Errorf("%w (%d of %d recorded)", ErrUsed, n, len(sigs))
		}
		return nil
	})
}

func columns(sigs []Sig) ([]string, [][]byte) {
	ids, sums := make([]string, len(sigs)), make([][]byte, len(sigs))
	for i, s := range sigs {
		ids[i], sums[i] = s.KeyID, s.Sum
	}
	return ids, sums
}

// maybeSweep deletes expired rows in the background, at most once per sweepEvery.
func (s *Store) maybeSweep() {
	now := s.now().UnixNano()
	last := s.lastSweep.Load()
	if now-last < int64(sweepEvery) || !s.lastSweep.CompareAndSwap(last, now) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = s.pool.Exec(ctx, `DELETE FROM used_signatures WHERE expires_at < now() - interval '1 minute'`)
	}()
}
