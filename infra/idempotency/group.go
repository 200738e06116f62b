package idempotency

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Group writes: records of several operations done in one transaction (order creation's
// group commit, docs/orders.md "Group commit"). Instead of claiming each key first, the
// group reads which keys have a record (QueueExisting), leaves those operations to the
// one-by-one path (ClaimTx), and stores the others' records as done with their response
// in one statement (QueueInsertDone). A concurrent first use of one of the keys makes that
// insert fail with ErrKeyTaken; the caller rolls the whole group back, so the guarantee is
// the same as a claim's: one record, written with the work it guards.

// ErrKeyTaken is QueueInsertDone finding a key recorded since QueueExisting read it.
var ErrKeyTaken = errors.New("idempotency: a key of the group was recorded concurrently")

// QueuedExisting is QueueExisting's answer once its batch ran.
type QueuedExisting struct {
	found map[Key]bool
}

// Has reports whether k had a record, whatever its state or age.
func (q *QueuedExisting) Has(k Key) bool { return q.found[k] }

// QueueExisting queues a read of which of keys have a record (in progress, done or past
// the retention: any of them is for ClaimTx to decide).
func (s *Store) QueueExisting(b *pgx.Batch, keys []Key) *QueuedExisting {
	q := &QueuedExisting{found: map[Key]bool{}}
	// One primary-key probe per key: the keys are joined from unnest. Its caller plans by
	// indexes (pg.IndexPlans); planned otherwise, the join may become a scan of the whole
	// table. (The alternative, each column = ANY(array), reads every record of the group's
	// accounts, which grows with their history.)
	acc, ns, key := columns(keys)
	b.Queue(`SELECT i.account_id, i.namespace, i.key
		FROM unnest($1::text[], $2::text[], $3::text[]) AS u(account_id, namespace, key)
		JOIN idempotency_keys i ON i.account_id = u.account_id AND i.namespace = u.namespace AND i.key = u.key`,
		acc, ns, key).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var k Key
			if err := rows.Scan(&k.AccountID, &k.Namespace, &k.Key); err != nil {
				return err
			}
			q.found[k] = true
		}
		return rows.Err()
	})
	return q
}

// Done is the record of an operation completed in a group.
type Done struct {
	Key      Key
	Hash     []byte
	Response Response
}

// QueueInsertDone queues the records of done, each a key QueueExisting found free in the
// same transaction. The batch fails with ErrKeyTaken when one was recorded meanwhile (a
// concurrent duplicate), or after waiting Wait for a duplicate still running.
func (s *Store) QueueInsertDone(b *pgx.Batch, done []Done) {
	keys := make([]Key, len(done))
	hashes, statuses, bodies, objects := make([][]byte, len(done)), make([]int32, len(done)), make([][]byte, len(done)), make([]*string, len(done))
	for i, d := range done {
		keys[i], hashes[i], statuses[i], bodies[i] = d.Key, d.Hash, int32(d.Response.Status), d.Response.Body
		if d.Response.ObjectID != "" {
			oid := d.Response.ObjectID
			objects[i] = &oid
		}
	}
	acc, ns, key := columns(keys)
	b.Queue(`INSERT INTO idempotency_keys (account_id, namespace, key, request_hash, state, response_status, response_body, object_id)
		SELECT account_id, namespace, key, hash, 'done', status, body, object_id
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::integer[], $6::bytea[], $7::text[])
			AS u(account_id, namespace, key, hash, status, body, object_id)
		ON CONFLICT (account_id, namespace, key) DO NOTHING`,
		acc, ns, key, hashes, statuses, bodies, objects).Exec(func(tag pgconn.CommandTag) error {
		if n := tag.RowsAffected(); n != int64(len(done)) {
			return fmt.Errorf("%w (%d of %d stored)", ErrKeyTaken, n, len(done))
		}
		return nil
	})
}

func columns(keys []Key) (acc, ns, key []string) {
	acc, ns, key = make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		acc[i], ns[i], key[i] = k.AccountID, k.Namespace, k.Key
	}
	return acc, ns, key
}
