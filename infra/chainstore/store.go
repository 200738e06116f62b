// Package chainstore is the store of the chain follower (chainwatch): its cursor (the
// chain_cursor row CursorName), the window of recent blocks kept for fork detection
// (chain_blocks, with the facts each block produced in chain_block_facts), and the
// transaction ids whose on-chain result is reported as tx_result facts (chain_tracked_tx).
// It is the only writer of those tables.
//
// Every write that moves the cursor (Advance, Rewind) locks the cursor row and checks it
// still holds what the caller last read, so two followers can never both commit facts for
// one block; a mismatch is ErrCursorMoved and writes nothing.
package chainstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/schemas/events"
	"rental/schemas/topics"
)

// CursorName is the chain_cursor row chainwatch owns. GET /v1/status reads its updated_at
// as the scanner's age.
const CursorName = "chainwatch"

// OutboxWriter writes one record to the transactional outbox inside the caller's
// transaction; infra/outbox.InsertRecord has this shape. The follower never talks to
// Kafka: the relay publishes what committed.
type OutboxWriter func(ctx context.Context, tx pgx.Tx, topic topics.Topic, key string, value []byte, headers map[string]string) error

// Execer is satisfied by *pgxpool.Pool, *pgx.Conn and pgx.Tx.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Track registers transaction ids whose on-chain result chainwatch reports as tx_result
// facts. Call it in the same transaction that records the intent to broadcast, and before
// broadcasting: a transaction that lands in a block chainwatch has already read is not
// reported (the caller can still ask the node with gettransactioninfobyid). Registering
// an id twice is harmless.
func Track(ctx context.Context, db Execer, txIDs ...string) error {
	if len(txIDs) == 0 {
		return nil
	}
	_, err := db.Exec(ctx, trackSQL, trackIDs(txIDs))
	if err != nil {
		return fmt.Errorf("chainwatch: track: %w", err)
	}
	return nil
}

const trackSQL = `INSERT INTO chain_tracked_tx (tx_id) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`

func trackIDs(txIDs []string) []string {
	ids := make([]string, len(txIDs))
	for i, id := range txIDs {
		ids[i] = strings.ToLower(strings.TrimPrefix(id, "0x")) // java-tron prints lower-case hex
	}
	return ids
}

// QueueTrack queues Track in b, to run in the caller's transaction with b's other
// statements (one round trip).
func QueueTrack(b *pgx.Batch, txIDs ...string) {
	if len(txIDs) > 0 {
		b.Queue(trackSQL, trackIDs(txIDs))
	}
}

// Cursor is the last block whose facts are committed. ID is empty before the first block
// (the follower then accepts any parent for the first block it reads).
type Cursor struct {
	Num int64
	ID  string
	// Epoch counts the rewinds so far; fact ids include it (events.FactIDAt), so a block
	// that comes back after a fork took it away is announced with new ids.
	Epoch int64
}

// ErrCursorMoved means the cursor row no longer holds what the caller last read: another
// instance advanced it (two replicas running) or an operator reset it. Nothing was
// written; the follower reloads and carries on from the stored cursor.
var ErrCursorMoved = errors.New("chainwatch: cursor moved under this instance")

// Header is what the window keeps of a block.
type Header struct {
	Num      int64
	ID       string
	ParentID string
	Time     time.Time
}

// WindowBlock is one row of the recent-block window.
type WindowBlock struct {
	Num      int64
	ID       string
	ParentID string
}

// Store is the follower's store.
type Store struct {
	pool   *pgxpool.Pool
	outbox OutboxWriter
	window int64
}

// New returns a store that writes facts through outbox and keeps window blocks below the
// cursor.
func New(pool *pgxpool.Pool, outbox OutboxWriter, window int) *Store {
	return &Store{pool: pool, outbox: outbox, window: int64(window)}
}

// Load returns the stored cursor, creating it from start when absent. Window rows above
// the cursor can only exist after an operator moved the cursor back to rescan; they are
// dropped (without reverts: the rescan re-emits the same fact ids, which consumers dedupe).
// The cursor row is locked meanwhile so a replica committing at the same time is not cut.
func (s *Store) Load(ctx context.Context, start func(context.Context) (Cursor, error)) (Cursor, error) {
	for {
		var c Cursor
		found := true
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			err := tx.QueryRow(ctx, `SELECT block_num, block_hash, epoch FROM chain_cursor WHERE name = $1 FOR UPDATE`, CursorName).Scan(&c.Num, &c.ID, &c.Epoch)
			if errors.Is(err, pgx.ErrNoRows) {
				found = false
				return nil
			}
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `DELETE FROM chain_blocks WHERE block_num > $1`, c.Num)
			return err
		})
		if err != nil || found {
			return c, err
		}
		if c, err = start(ctx); err != nil {
			return Cursor{}, err
		}
		// Another instance may win this insert; the next round reads its row.
		if _, err := s.pool.Exec(ctx, `INSERT INTO chain_cursor (name, block_num, block_hash) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO NOTHING`, CursorName, c.Num, c.ID); err != nil {
			return Cursor{}, err
		}
	}
}

// Touch records a successful poll that found nothing new (and clears a problem).
func (s *Store) Touch(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `UPDATE chain_cursor SET updated_at = now(), problem = NULL WHERE name = $1`, CursorName)
	return err
}

// Identity is the chain a cursor follows: its genesis block id and network.
type Identity struct {
	GenesisID string
	Network   string
}

// IdentityError is a node of another chain than the one the stored cursor follows.
type IdentityError struct {
	Stored, Node Identity
}

func (e *IdentityError) Error() string {
	return fmt.Sprintf("chainwatch: the node serves another chain (genesis %s, network %s) than the one this database "+
		"follows (genesis %s, network %s): point TRON_NODE_URL at a node of that chain, or start the chain and the "+
		"database afresh together (dev stack: make reset)", e.Node.GenesisID, e.Node.Network, e.Stored.GenesisID, e.Stored.Network)
}

// CheckIdentity records id as the cursor's chain when none is stored yet (first start,
// or a cursor from before identities were kept) and otherwise compares: another chain is
// an *IdentityError, and is also stored as the cursor's problem. The cursor must exist
// (Load first).
func (s *Store) CheckIdentity(ctx context.Context, id Identity) error {
	var stored Identity
	err := s.pool.QueryRow(ctx, `UPDATE chain_cursor SET genesis_id = COALESCE(genesis_id, $2), network = COALESCE(network, $3)
		WHERE name = $1 RETURNING genesis_id, network`, CursorName, id.GenesisID, id.Network).Scan(&stored.GenesisID, &stored.Network)
	if err != nil {
		return fmt.Errorf("chainwatch: chain identity: %w", err)
	}
	if stored != id {
		e := &IdentityError{Stored: stored, Node: id}
		if err := s.SetProblem(ctx, e.Error()); err != nil {
			return err
		}
		return e
	}
	return nil
}

// SetProblem records the follower's standing complaint about the node without moving the
// cursor or its updated_at; GET /v1/status reports payments degraded while one is set.
// Touch and every cursor move clear it.
func (s *Store) SetProblem(ctx context.Context, problem string) error {
	_, err := s.pool.Exec(ctx, `UPDATE chain_cursor SET problem = $2 WHERE name = $1`, CursorName, problem)
	return err
}

// lock takes the cursor row for the transaction and checks it still holds want. The row
// lock serialises writers, so two replicas can never both commit facts for one block.
func lock(ctx context.Context, tx pgx.Tx, want Cursor) error {
	var got Cursor
	err := tx.QueryRow(ctx, `SELECT block_num, block_hash, epoch FROM chain_cursor WHERE name = $1 FOR UPDATE`, CursorName).Scan(&got.Num, &got.ID, &got.Epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrCursorMoved
	}
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%w: stored %d/%s, expected %d/%s", ErrCursorMoved, got.Num, got.ID, want.Num, want.ID)
	}
	return nil
}

func setCursor(ctx context.Context, tx pgx.Tx, c Cursor) error {
	_, err := tx.Exec(ctx, `UPDATE chain_cursor SET block_num = $2, block_hash = $3, epoch = $4, updated_at = now(), problem = NULL WHERE name = $1`,
		CursorName, c.Num, c.ID, c.Epoch)
	return err
}

// Tracked returns which of ids are registered in chain_tracked_tx.
func (s *Store) Tracked(ctx context.Context, ids []string) (map[string]bool, error) {
	return s.idSet(ctx, `SELECT tx_id FROM chain_tracked_tx WHERE tx_id = ANY($1::text[])`, ids)
}

// idSet runs query (ids as $1) and returns the ids it answers.
func (s *Store) idSet(ctx context.Context, query string, ids []string) (map[string]bool, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, query, ids)
	if err != nil {
		return nil, err
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	m := make(map[string]bool, len(got))
	for _, id := range got {
		m[id] = true
	}
	return m, nil
}

// Advance commits blocks (consecutive, the first one the child of from) with their facts
// (facts[i] of blocks[i]) and moves the cursor to the last block, all in one transaction:
// after a crash either everything of the batch is there (outbox rows included) or nothing
// is. It returns how many facts it wrote.
func (s *Store) Advance(ctx context.Context, from Cursor, blocks []Header, facts [][]events.ChainFact) (emitted int, err error) {
	last := blocks[len(blocks)-1]
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		emitted = 0
		if err := lock(ctx, tx, from); err != nil {
			return err
		}
		n := len(blocks)
		nums, ids, parents, times := make([]int64, n), make([]string, n), make([]string, n), make([]time.Time, n)
		for i, b := range blocks {
			nums[i], ids[i], parents[i], times[i] = b.Num, b.ID, b.ParentID, b.Time
		}
		if _, err := tx.Exec(ctx, `INSERT INTO chain_blocks (block_num, block_id, parent_id, block_time)
			SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[])`, nums, ids, parents, times); err != nil {
			return fmt.Errorf("insert blocks: %w", err)
		}
		var fNums []int64
		var fSeqs []int32
		var fIDs []string
		var fBodies []string
		for i, bf := range facts {
			for seq, f := range bf {
				body, err := json.Marshal(f)
				if err != nil {
					return err
				}
				if err := s.outbox(ctx, tx, topics.ChainFacts, f.TxID, body, headers(f)); err != nil {
					return fmt.Errorf("outbox: %w", err)
				}
				fNums, fSeqs, fIDs, fBodies = append(fNums, blocks[i].Num), append(fSeqs, int32(seq)), append(fIDs, f.FactID), append(fBodies, string(body))
				emitted++
			}
		}
		if len(fIDs) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO chain_block_facts (block_num, seq, fact_id, fact)
				SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::jsonb[])`, fNums, fSeqs, fIDs, fBodies); err != nil {
				return fmt.Errorf("insert block facts: %w", err)
			}
		}
		if err := setCursor(ctx, tx, Cursor{Num: last.Num, ID: last.ID, Epoch: from.Epoch}); err != nil {
			return err
		}
		// Keep the window; facts of pruned blocks go with them (ON DELETE CASCADE).
		_, err := tx.Exec(ctx, `DELETE FROM chain_blocks WHERE block_num <= $1`, last.Num-s.window)
		return err
	})
	return emitted, err
}

// WindowRange returns the stored blocks numbered [lo, hi], newest first.
func (s *Store) WindowRange(ctx context.Context, lo, hi int64) ([]WindowBlock, error) {
	rows, err := s.pool.Query(ctx, `SELECT block_num, block_id, parent_id FROM chain_blocks
		WHERE block_num BETWEEN $1 AND $2 ORDER BY block_num DESC`, lo, hi)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[WindowBlock])
}

// Oldest returns the lowest block of the window (ok false when it is empty).
func (s *Store) Oldest(ctx context.Context) (WindowBlock, bool, error) {
	var w WindowBlock
	err := s.pool.QueryRow(ctx, `SELECT block_num, block_id, parent_id FROM chain_blocks ORDER BY block_num LIMIT 1`).
		Scan(&w.Num, &w.ID, &w.ParentID)
	if errors.Is(err, pgx.ErrNoRows) {
		return w, false, nil
	}
	return w, err == nil, err
}

// Rewind moves the cursor back to ancestor after a fork: every fact of the orphaned
// blocks (above ancestor) is cancelled by a revert fact, newest first, and the orphaned
// blocks and their facts leave the window, in one transaction. A fact is therefore
// reverted exactly once, even if chainwatch crashes half-way. The stored cursor is
// ancestor with the epoch after from's; it returns how many facts it reverted.
func (s *Store) Rewind(ctx context.Context, from, ancestor Cursor) (reverted int, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		reverted = 0
		if err := lock(ctx, tx, from); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT fact FROM chain_block_facts WHERE block_num > $1
			ORDER BY block_num DESC, seq DESC`, ancestor.Num)
		if err != nil {
			return err
		}
		orphaned, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (events.ChainFact, error) {
			var f events.ChainFact
			var raw []byte
			if err := r.Scan(&raw); err != nil {
				return f, err
			}
			return f, json.Unmarshal(raw, &f)
		})
		if err != nil {
			return err
		}
		for _, f := range orphaned {
			r := events.RevertOf(f)
			body, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if err := s.outbox(ctx, tx, topics.ChainFacts, r.TxID, body, headers(r)); err != nil {
				return fmt.Errorf("outbox: %w", err)
			}
			reverted++
		}
		if _, err := tx.Exec(ctx, `DELETE FROM chain_blocks WHERE block_num > $1`, ancestor.Num); err != nil {
			return err
		}
		ancestor.Epoch = from.Epoch + 1
		return setCursor(ctx, tx, ancestor)
	})
	return reverted, err
}

// headers are Kafka record headers that let a consumer route or skip a fact without
// decoding it.
func headers(f events.ChainFact) map[string]string {
	return map[string]string{"kind": string(f.Kind), "fact_id": f.FactID}
}

// Querier reads one row (a pool, a connection or a transaction).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// StoredIdentity is the chain the follower's cursor follows, for the other stages that talk
// to the node (the order processor): ok is false until the follower stored one.
func StoredIdentity(ctx context.Context, db Querier) (id Identity, ok bool, err error) {
	var g, n *string
	err = db.QueryRow(ctx, `SELECT genesis_id, network FROM chain_cursor WHERE name = $1`, CursorName).Scan(&g, &n)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (g == nil || n == nil)) {
		return Identity{}, false, nil
	}
	if err != nil {
		return Identity{}, false, fmt.Errorf("chain identity: %w", err)
	}
	return Identity{GenesisID: *g, Network: *n}, true, nil
}

// SignedByService returns which of ids the service signed: the order processor's
// (chain_tracked_tx, written with its signer journal) and the sweeper's (sweeps). The
// chain follower reports any other transaction from an own pool as foreign use.
func (s *Store) SignedByService(ctx context.Context, ids []string) (map[string]bool, error) {
	return s.idSet(ctx, `SELECT tx_id FROM chain_tracked_tx WHERE tx_id = ANY($1::text[])
		UNION SELECT txid FROM sweeps WHERE txid = ANY($1::text[])`, ids)
}
