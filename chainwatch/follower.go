// Package chainwatch follows the TRON chain and turns confirmed blocks into normalized
// chain facts (schemas/events.ChainFact) on topic chain.facts.v1, through the transactional
// outbox.
//
// How it works. A Follower keeps a cursor (the last block whose facts are committed: number
// and id) in the chain_cursor row "chainwatch", and a window of recent block ids in
// chain_blocks. Each poll reads the blocks between the cursor and head − Confirmations
// (getblockbylimitnext, 100 per call, several calls in flight), extracts facts, and commits
// the facts (as outbox rows), the window rows and the cursor advance in ONE transaction.
// A crash at any point therefore neither loses a fact nor writes one twice: the batch is
// either committed with its cursor or read again. Fact ids are deterministic (kind, tx id,
// log index, block id), so even the re-read produces the same ids.
//
// The node. The chain's identity (genesis block id, network) is stored with the cursor at
// first start; a node of another chain is refused, and a head below the stored cursor is
// reported, both as chain_cursor.problem (GET /v1/status: payments degraded), a log line
// and rental_chainwatch_node_problem. With Options.Solidified nothing above the node's
// solidified block is read, and a block whose contract calls lack their info records is
// read again (docs/chain.md).
//
// Forks. A block whose parentHash differs from the stored id of its predecessor means the
// node switched branches. The follower walks its window back until the node's block and
// the stored block agree (the common ancestor), then in one transaction emits a revert fact
// for every fact of the orphaned blocks (newest first), drops those blocks from the window
// and moves the cursor to the ancestor. The next poll reads the new branch and emits its
// facts, so a transaction included on both branches is announced once per branch, with a
// revert in between. A fork deeper than the window stops the follower (ErrForkTooDeep):
// that needs an operator, not a guess.
//
// Several replicas may run; they do not split the work. The cursor row is locked and
// compared in every commit, so only one commits a given batch and the others reload and
// follow along. One replica is enough: catch-up runs at thousands of blocks per second.
package chainwatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"rental/infra/chainstore"
	"rental/infra/tron"
	"rental/schemas/events"
	"rental/schemas/network"
)

// ErrForkTooDeep is returned by a poll when the node's chain shares no block with the
// stored window: the fork is deeper than Options.Window. chainwatch does not advance
// until an operator decides (raise the window, or reset the cursor and chain_blocks).
var ErrForkTooDeep = errors.New("chainwatch: fork deeper than the block window")

// OutboxWriter writes one record to the transactional outbox inside the caller's
// transaction (infra/outbox.InsertRecord). chainwatch never talks to Kafka: the relay
// publishes what committed.
type OutboxWriter = chainstore.OutboxWriter

// Options configure a Follower. Pool, Source and Outbox are required.
type Options struct {
	Pool   *pgxpool.Pool
	Source BlockSource
	// Outbox writes fact records in the commit transaction (infra/outbox.InsertRecord).
	Outbox OutboxWriter
	// Network is copied into every fact.
	Network network.Network
	// Tokens are the TRC-20 contracts whose Transfer logs become facts, normally
	// Network.USDTContract() (the simulator deploys its own address).
	Tokens []tron.Address
	// Confirmations is how far below the head a block must be before it is read; 0 reads
	// the head itself (tests). 19 matches TRON's solidified block.
	Confirmations int
	// Solidified caps what is read at the node's solidified block
	// (/walletsolidity/getblock) when the source knows it (SolidSource), whatever
	// Confirmations says. The stages turn it on; tests that mine by hand leave it off.
	Solidified bool
	// PollEvery is the wait between polls once caught up (default 1 s). While behind, the
	// follower polls again at once.
	PollEvery time.Duration
	// Start is the first block read when no cursor is stored yet. Negative means the
	// confirmed head at first start (head − Confirmations). Ignored once a cursor exists.
	Start int64
	// BatchBlocks is the most blocks committed in one transaction (default 500).
	BatchBlocks int
	// Window is how many recent blocks are kept for fork detection (default 200); a fork
	// deeper than this is ErrForkTooDeep.
	Window int
	// FetchParallel bounds concurrent node calls (default 4).
	FetchParallel int
	// Pools are the own stake pools whose every transaction the service did not sign is
	// reported as foreign use (foreign.go); empty watches nothing.
	Pools []tron.Address
	// Logger gets stage=chainwatch added; nil discards.
	Logger *slog.Logger
	// Registerer receives the rental_chainwatch_* metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

// Follower is the chain follower stage.
type Follower struct {
	o   Options
	st  *chainstore.Store
	ex  *extractor
	m   *followerMetrics
	log *slog.Logger
	// foreign reports transactions from the pools the service did not sign (foreign.go).
	foreign *foreignWatch

	cur    chainstore.Cursor
	loaded bool
	// identified is set once the node's genesis matched the cursor's chain.
	identified bool
}

// ErrCursorAboveHead is a stored cursor above the node's head: the node's chain was reset
// (the dev stack's data directory removed while its database stayed) or the node is
// another, younger chain. The follower reports it (log, metric, GET /v1/status payments
// degraded) and reads nothing until the node's head passes the cursor.
var ErrCursorAboveHead = errors.New("chainwatch: the stored cursor is above the node's head")

// New validates the options and applies defaults.
func New(o Options) (*Follower, error) {
	switch {
	case o.Pool == nil:
		return nil, errors.New("chainwatch: Pool is required")
	case o.Source == nil:
		return nil, errors.New("chainwatch: Source is required")
	case o.Outbox == nil:
		return nil, errors.New("chainwatch: Outbox is required")
	case o.Confirmations < 0:
		return nil, errors.New("chainwatch: Confirmations must not be negative")
	}
	if o.PollEvery <= 0 {
		o.PollEvery = time.Second
	}
	if o.BatchBlocks <= 0 {
		o.BatchBlocks = 500
	}
	if o.Window <= 0 {
		o.Window = 200
	}
	if o.FetchParallel <= 0 {
		o.FetchParallel = 4
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	log := o.Logger.With("stage", "chainwatch")
	tokens := make(map[tron.Address]bool, len(o.Tokens))
	for _, t := range o.Tokens {
		tokens[t] = true
	}
	return &Follower{
		o:       o,
		st:      chainstore.New(o.Pool, o.Outbox, o.Window),
		ex:      &extractor{network: o.Network, tokens: tokens, log: log},
		m:       newMetrics(o.Registerer),
		log:     log,
		foreign: newForeignWatch(o.Pools, o.Registerer),
	}, nil
}

// Run follows the chain until ctx is cancelled and returns nil then. Failed polls (node
// or database unreachable, a fork deeper than the window) are logged and retried at the
// poll interval; they never end Run, so a restart is never needed to recover.
func (f *Follower) Run(ctx context.Context) error {
	tokens := make([]string, len(f.o.Tokens))
	for i, t := range f.o.Tokens {
		tokens[i] = t.String()
	}
	f.log.Info("chainwatch started", "network", f.o.Network, "confirmations", f.o.Confirmations,
		"poll_every", f.o.PollEvery, "tokens", tokens, "window", f.o.Window)
	timer := time.NewTimer(0)
	defer timer.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		for {
			caughtUp, err := f.poll(ctx)
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, chainstore.ErrCursorMoved) {
				// Another replica committed first; reload its cursor at the next poll.
				f.log.Debug("cursor advanced by another instance", "err", err)
				break
			}
			if err != nil {
				f.m.pollFails.Inc()
				// Log a repeated failure once, not once per poll.
				if msg := err.Error(); msg != lastErr {
					f.log.Error("poll failed; retrying", "err", err)
					lastErr = msg
				}
				break
			}
			if lastErr != "" {
				f.log.Info("poll recovered")
				lastErr = ""
			}
			if caughtUp {
				break
			}
		}
		if err := f.watchForeign(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("foreign use watch failed; retried at the next poll", "err", err)
		}
		timer.Reset(f.o.PollEvery)
	}
}

// poll does one step: loads the cursor if needed, then either commits one batch of
// blocks, handles a fork, or records an idle poll. caughtUp is false when more work is
// already known to be waiting.
func (f *Follower) poll(ctx context.Context) (caughtUp bool, err error) {
	head, err := f.o.Source.Head(ctx)
	if err != nil {
		return false, fmt.Errorf("head: %w", err)
	}
	target := head - int64(f.o.Confirmations)
	if !f.loaded {
		c, err := f.st.Load(ctx, func(context.Context) (chainstore.Cursor, error) {
			start := f.o.Start
			if start < 0 {
				start = max(target, 0)
			}
			return chainstore.Cursor{Num: start - 1}, nil
		})
		if err != nil {
			return false, fmt.Errorf("load cursor: %w", err)
		}
		f.cur, f.loaded = c, true
		f.log.Info("following", "cursor", c.Num, "head", head, "target", target)
	}
	if !f.identified {
		if err := f.checkIdentity(ctx); err != nil {
			f.m.nodeProblem.Set(1)
			return false, err
		}
	}
	if f.cur.Num > head {
		f.m.nodeProblem.Set(1)
		err := fmt.Errorf("%w: cursor %d, head %d; if the node's chain was reset, start the database afresh with it (dev stack: make reset)",
			ErrCursorAboveHead, f.cur.Num, head)
		if perr := f.st.SetProblem(ctx, err.Error()); perr != nil {
			return false, perr
		}
		return false, err
	}
	f.m.nodeProblem.Set(0)
	if f.o.Solidified {
		if ss, ok := f.o.Source.(SolidSource); ok {
			solid, err := ss.SolidHead(ctx)
			if err != nil {
				return false, fmt.Errorf("solidified block: %w", err)
			}
			target = min(target, solid)
		}
	}
	f.m.headLag.Set(float64(max(head-f.cur.Num, 0)))
	f.m.cursor.Set(float64(f.cur.Num))
	if target <= f.cur.Num {
		// Nothing new. A fork that replaced blocks without lengthening the chain is seen
		// with the next block (its parent no longer matches the cursor).
		return true, f.st.Touch(ctx)
	}

	n := int(min(target-f.cur.Num, int64(f.o.BatchBlocks)))
	blocks, err := f.o.Source.Blocks(ctx, f.cur.Num+1, n)
	if err != nil {
		return false, fmt.Errorf("blocks from %d: %w", f.cur.Num+1, err)
	}
	if len(blocks) == 0 { // the node's range API lags its head; try again next poll
		return true, f.st.Touch(ctx)
	}
	if f.cur.ID != "" && blocks[0].ParentID != f.cur.ID {
		return false, f.handleFork(ctx)
	}
	// Keep the linked prefix: a break inside the batch means the node switched branches
	// while it was being read; the rest is read (and the fork seen) on the next step.
	for i := 1; i < len(blocks); i++ {
		if blocks[i].ParentID != blocks[i-1].ID {
			blocks = blocks[:i]
			break
		}
	}

	infos, err := f.txInfos(ctx, blocks)
	if err != nil {
		return false, err
	}
	var ids []string
	for i := range blocks {
		for j := range blocks[i].Txs {
			ids = append(ids, blocks[i].Txs[j].ID)
		}
	}
	tracked, err := f.st.Tracked(ctx, ids)
	if err != nil {
		return false, fmt.Errorf("tracked transactions: %w", err)
	}
	facts := make([][]events.ChainFact, len(blocks))
	for i := range blocks {
		facts[i] = f.ex.facts(&blocks[i], infos[i], tracked, f.cur.Epoch)
	}
	if _, err := f.st.Advance(ctx, f.cur, headers(blocks), facts); err != nil {
		if errors.Is(err, chainstore.ErrCursorMoved) {
			f.loaded = false
		}
		return false, fmt.Errorf("commit blocks %d..%d: %w", blocks[0].Num, blocks[len(blocks)-1].Num, err)
	}
	last := blocks[len(blocks)-1]
	f.cur = chainstore.Cursor{Num: last.Num, ID: last.ID, Epoch: f.cur.Epoch}
	f.m.blocks.Add(float64(len(blocks)))
	for _, bf := range facts {
		for _, fact := range bf {
			f.m.facts.WithLabelValues(string(fact.Kind)).Inc()
		}
	}
	f.m.cursor.Set(float64(last.Num))
	f.m.headLag.Set(float64(max(head-last.Num, 0)))
	return last.Num >= target, nil
}

// checkIdentity compares the node's genesis block with the chain stored with the cursor
// (storing it at first start). Another chain is an error every poll until the node is
// the right one again.
func (f *Follower) checkIdentity(ctx context.Context) error {
	ci, ok := f.o.Source.(ChainIdentifier)
	if !ok {
		f.identified = true
		return nil
	}
	genesis, err := ci.Genesis(ctx)
	if err != nil {
		return fmt.Errorf("genesis block: %w", err)
	}
	if err := f.st.CheckIdentity(ctx, chainstore.Identity{GenesisID: genesis, Network: string(f.o.Network)}); err != nil {
		return err
	}
	f.identified = true
	return nil
}

// errIncomplete marks a block whose transaction infos the node did not (fully) return: a
// node without the block's history answers an empty list. The batch is read again.
var errIncomplete = errors.New("chainwatch: transaction infos missing")

// txInfos fetches the execution records of the blocks that hold contract calls (only
// those can carry TRC-20 logs), concurrently. Result i is keyed by tx id for blocks[i].
func (f *Follower) txInfos(ctx context.Context, blocks []Block) ([]map[string]*TxInfo, error) {
	out := make([]map[string]*TxInfo, len(blocks))
	if len(f.ex.tokens) == 0 {
		return out, nil
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(f.o.FetchParallel)
	for i := range blocks {
		b := &blocks[i]
		calls := false
		for j := range b.Txs {
			if b.Txs[j].IsContractCall() {
				calls = true
				break
			}
		}
		if !calls {
			continue
		}
		g.Go(func() error {
			infos, err := f.o.Source.TxInfos(gctx, b.Num)
			if err != nil {
				return fmt.Errorf("transaction info of block %d: %w", b.Num, err)
			}
			inBlock := make(map[string]bool, len(b.Txs))
			for j := range b.Txs {
				inBlock[b.Txs[j].ID] = true
			}
			m := make(map[string]*TxInfo, len(infos))
			for j := range infos {
				if !inBlock[infos[j].TxID] {
					// The records belong to another block at this height: the node
					// switched branches between the two calls.
					return fmt.Errorf("%w: block %d has no transaction %s", errInconsistent, b.Num, infos[j].TxID)
				}
				m[infos[j].TxID] = &infos[j]
			}
			// Every contract call must have its record: a missing one could hide a
			// TRC-20 deposit.
			for j := range b.Txs {
				if b.Txs[j].IsContractCall() && m[b.Txs[j].ID] == nil {
					return fmt.Errorf("%w: block %d, transaction %s", errIncomplete, b.Num, b.Txs[j].ID)
				}
			}
			out[i] = m
			return nil
		})
	}
	return out, g.Wait()
}

// handleFork rewinds to the common ancestor of the stored window and the node's chain.
func (f *Follower) handleFork(ctx context.Context) error {
	ancestor, err := f.findAncestor(ctx)
	if err != nil {
		return err
	}
	from := f.cur
	reverted, err := f.st.Rewind(ctx, from, ancestor)
	if err != nil {
		if errors.Is(err, chainstore.ErrCursorMoved) {
			f.loaded = false
		}
		return fmt.Errorf("rewind to %d: %w", ancestor.Num, err)
	}
	ancestor.Epoch = from.Epoch + 1 // as rewind stored it
	f.cur = ancestor
	f.m.forks.Inc()
	f.m.facts.WithLabelValues(string(events.FactRevert)).Add(float64(reverted))
	f.m.cursor.Set(float64(ancestor.Num))
	f.log.Warn("fork: rewound to the common ancestor", "from", from.Num, "ancestor", ancestor.Num,
		"orphaned_blocks", from.Num-ancestor.Num, "reverted_facts", reverted)
	return nil
}

// findAncestor walks the window back from the cursor, 100 blocks per node call, and
// returns the newest block the node and the window agree on.
func (f *Follower) findAncestor(ctx context.Context) (chainstore.Cursor, error) {
	oldest, ok, err := f.st.Oldest(ctx)
	if err != nil {
		return chainstore.Cursor{}, err
	}
	if !ok {
		return chainstore.Cursor{}, fmt.Errorf("%w: the window is empty", ErrForkTooDeep)
	}
	for hi := f.cur.Num; hi >= oldest.Num; {
		lo := max(oldest.Num, hi-int64(tron.MaxBlocksPerRange)+1)
		stored, err := f.st.WindowRange(ctx, lo, hi)
		if err != nil {
			return chainstore.Cursor{}, err
		}
		node, err := f.o.Source.Blocks(ctx, lo, int(hi-lo+1))
		if err != nil {
			return chainstore.Cursor{}, fmt.Errorf("blocks from %d: %w", lo, err)
		}
		onNode := make(map[int64]string, len(node))
		for _, b := range node {
			onNode[b.Num] = b.ID
		}
		for _, w := range stored { // newest first
			if onNode[w.Num] == w.ID {
				return chainstore.Cursor{Num: w.Num, ID: w.ID}, nil
			}
		}
		hi = lo - 1
	}
	// Every stored block was replaced; the ancestor may still be the parent of the
	// oldest one, which the window records.
	node, err := f.o.Source.Blocks(ctx, oldest.Num, 1)
	if err != nil {
		return chainstore.Cursor{}, err
	}
	if len(node) == 1 && node[0].ParentID == oldest.ParentID && oldest.ParentID != "" {
		return chainstore.Cursor{Num: oldest.Num - 1, ID: oldest.ParentID}, nil
	}
	return chainstore.Cursor{}, fmt.Errorf("%w: no block in %d..%d matches the node", ErrForkTooDeep, oldest.Num, f.cur.Num)
}

// headers is what the window keeps of blocks.
func headers(blocks []Block) []chainstore.Header {
	hs := make([]chainstore.Header, len(blocks))
	for i, b := range blocks {
		hs[i] = chainstore.Header{Num: b.Num, ID: b.ID, ParentID: b.ParentID, Time: b.Time}
	}
	return hs
}
