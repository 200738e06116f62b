package payments

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"rental/infra/paystore"
	"rental/infra/tron"
	"rental/schemas/payments"
)

// followBatch bounds the blocks read and committed by one Follow.
const followBatch = 100

// Follow reads the blocks between the cursor and the head less Confirmations-1, records
// the transfers to payment addresses they hold, and moves the cursor, in one commit. A
// block whose parent is not the stored id of its predecessor is a fork: the follower walks
// its window back to the common ancestor and rewinds (paystore.Rewind) before reading on.
func (p *Processor) Follow(ctx context.Context) error {
	head, err := p.o.Node.GetNowBlock(ctx)
	if err != nil {
		return err
	}
	target := head.Number() - int64(p.o.Confirmations-1)
	cur, had, err := p.o.Store.LoadCursor(ctx)
	if err != nil {
		return err
	}
	if !had {
		start := p.o.Start
		if start < 0 || start > target {
			start = target
		}
		cur = paystore.Cursor{Num: start - 1}
	}
	if cur.Num > head.Number() {
		return fmt.Errorf("payments: the cursor %d is above the node's head %d", cur.Num, head.Number())
	}
	var blocks []paystore.Block
	prev := cur.ID
	recorded := 0
	for n := cur.Num + 1; n <= target && len(blocks) < followBatch; n++ {
		b := head
		if n != head.Number() {
			if b, err = p.o.Node.GetBlockByNum(ctx, n); err != nil {
				return err
			}
		}
		if b.BlockID == "" || b.Number() != n {
			return fmt.Errorf("payments: the node has no block %d", n)
		}
		if prev != "" && b.ParentHash() != prev {
			if len(blocks) > 0 {
				break // commit what follows the cursor; the next poll meets the fork
			}
			return p.rewind(ctx, cur)
		}
		pays := p.extract(b)
		tokens, err := p.tokenTransfers(ctx, b)
		if err != nil {
			return err
		}
		bl := paystore.Block{Num: n, ID: b.BlockID, Payments: append(pays, tokens...)}
		recorded += len(bl.Payments)
		blocks = append(blocks, bl)
		prev = b.BlockID
	}
	if err := p.o.Store.Commit(ctx, cur, had, blocks, p.o.Window); err != nil {
		if errors.Is(err, paystore.ErrCursorMoved) {
			return nil // another follower committed: read on from its cursor
		}
		return err
	}
	if recorded > 0 {
		p.poke()
	}
	return nil
}

// rewind finds the newest stored block the node still has and moves the cursor there.
func (p *Processor) rewind(ctx context.Context, cur paystore.Cursor) error {
	for n := cur.Num; n > cur.Num-int64(p.o.Window) && n >= 0; n-- {
		id, err := p.o.Store.BlockID(ctx, n)
		if err != nil {
			return err
		}
		if id == "" {
			break
		}
		b, err := p.o.Node.GetBlockByNum(ctx, n)
		if err != nil {
			return err
		}
		if b.BlockID == id {
			marked, err := p.o.Store.Rewind(ctx, cur, paystore.Cursor{Num: n, ID: id})
			if err != nil && !errors.Is(err, paystore.ErrCursorMoved) {
				return err
			}
			p.m.forks.Inc()
			p.log.Warn("fork: payment cursor rewound", "from", cur.Num, "to", n, "payments_marked", marked)
			return nil
		}
	}
	return fmt.Errorf("payments: fork deeper than the window of %d blocks at block %d", p.o.Window, cur.Num)
}

// extract returns the successful TRX transfers of b to payment addresses. A transfer from
// a payment address (a refund) is never a payment.
func (p *Processor) extract(b *tron.Block) []paystore.Payment {
	var out []paystore.Payment
	for i := range b.Transactions {
		tx := &b.Transactions[i]
		if tx.ContractTypeName() != "TransferContract" || !tx.Succeeded() {
			continue
		}
		raw, err := tron.ParseRawDataJSON(tx.RawData)
		if err != nil {
			p.log.Warn("unreadable transfer skipped", "block", b.Number(), "tx", tx.TxID, "err", err)
			continue
		}
		c, ok := raw.Contract.(*tron.TransferContract)
		if !ok {
			continue
		}
		addr, ours := p.o.Addresses[c.ToAddress]
		if !ours {
			continue
		}
		if _, fromUs := p.o.Addresses[c.OwnerAddress]; fromUs {
			continue
		}
		receiver := c.OwnerAddress
		if a, ok := MemoReceiver(raw.Data); ok {
			receiver = a
		}
		out = append(out, paystore.Payment{
			TxID: tx.TxID, Address: c.ToAddress.String(), RowKey: addr.RowKey, Sender: c.OwnerAddress.String(),
			Receiver: receiver.String(), Memo: MemoText(raw.Data), Asset: "TRX", AmountSun: c.Amount,
			BlockTime: time.UnixMilli(b.Timestamp()).UTC(), TxExpires: time.UnixMilli(raw.Expiration).UTC(),
			Status: payments.StoredSeen,
		})
	}
	return out
}

// tokenTransfers records the TRC-20 Transfer logs of Options.Tokens (USDT) to a payment
// address in b: no order, held for support as an oversized USDT deposit is (status held,
// reason token_held, amount_sun carrying the token's units). Only a block with a contract
// call costs a node read (its transaction infos).
func (p *Processor) tokenTransfers(ctx context.Context, b *tron.Block) ([]paystore.Payment, error) {
	if len(p.o.Tokens) == 0 {
		return nil, nil
	}
	calls := false
	for i := range b.Transactions {
		if b.Transactions[i].ContractTypeName() == "TriggerSmartContract" {
			calls = true
			break
		}
	}
	if !calls {
		return nil, nil
	}
	infos, err := p.o.Node.GetTransactionInfoByBlockNum(ctx, b.Number())
	if err != nil {
		return nil, err
	}
	var out []paystore.Payment
	for _, info := range infos {
		if info.Failed() {
			continue
		}
		for _, l := range info.Log {
			ev, ok, err := tron.DecodeTransferLog(l)
			if err != nil || !ok || !slices.Contains(p.o.Tokens, ev.Token) || !ev.Amount.IsInt64() {
				continue
			}
			addr, ours := p.o.Addresses[ev.To]
			if !ours {
				continue
			}
			out = append(out, paystore.Payment{
				TxID: info.ID, Address: ev.To.String(), RowKey: addr.RowKey, Sender: ev.From.String(), Receiver: ev.From.String(),
				Asset: "USDT", AmountSun: ev.Amount.Int64(), BlockTime: time.UnixMilli(b.Timestamp()).UTC(),
				TxExpires: time.UnixMilli(b.Timestamp()).UTC(), Status: payments.StoredHeld, Reason: ptr(payments.ReasonToken),
			})
			p.m.outcomes.WithLabelValues("held").Inc()
			p.log.Warn("token sent to a payment address: held for support", "txid", info.ID, "address", ev.To.String(),
				"units", ev.Amount.String())
			break // one row per transaction
		}
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }
