package chainwatch

import (
	"log/slog"

	"rental/infra/tron"
	"rental/schemas/events"
	"rental/schemas/network"
)

// extractor turns a block into facts. It is pure: the same block, execution records and
// tracked set always give the same facts with the same ids, which is what makes a re-read
// after a crash harmless.
type extractor struct {
	network network.Network
	tokens  map[tron.Address]bool
	log     *slog.Logger
}

// facts returns the facts of block b in emission order: per transaction, the TRX
// transfer, then its TRC-20 Transfer logs in log order, then its tx_result.
//
// Every TRX transfer and every Transfer log of a configured token is emitted, whoever the
// parties are. That is cheap on the simulator and on nile; if mainnet volume ever makes it
// too much, issue 4 can add a watched-address filter here (deposit addresses, kept in
// Postgres and loaded per batch) without changing the fact format.
func (e *extractor) facts(b *Block, infos map[string]*TxInfo, tracked map[string]bool, epoch int64) []events.ChainFact {
	var out []events.ChainFact
	base := func(kind events.FactKind, txID string, logIndex int) events.ChainFact {
		f := events.ChainFact{
			Kind:      kind,
			FactID:    events.FactIDAt(kind, txID, logIndex, b.ID, epoch),
			Network:   e.network,
			TxID:      txID,
			BlockNum:  b.Num,
			BlockID:   b.ID,
			BlockTime: events.Time(b.Time),
		}
		if logIndex >= 0 {
			li := logIndex
			f.LogIndex = &li
		}
		return f
	}
	for i := range b.Txs {
		tx := &b.Txs[i]
		if tx.ContractType == "TransferContract" && tx.Result == "SUCCESS" && tx.AmountSun > 0 &&
			!tx.Owner.IsZero() && !tx.To.IsZero() {
			f := base(events.FactTRXTransfer, tx.ID, -1)
			f.From, f.To, f.AmountSun = tx.Owner.String(), tx.To.String(), tx.AmountSun
			out = append(out, f)
		}
		if info := infos[tx.ID]; info != nil && !info.Failed && len(e.tokens) > 0 {
			for li, l := range info.Logs {
				ev, ok, err := tron.DecodeTransferLog(l)
				if err != nil {
					// A configured token never emits this; an unrelated contract might. Either
					// way it is not a transfer the service can credit.
					e.log.Warn("malformed Transfer log skipped", "block", b.Num, "tx", tx.ID, "log_index", li, "err", err)
					continue
				}
				if !ok || !e.tokens[ev.Token] {
					continue
				}
				f := base(events.FactTRC20Transfer, tx.ID, li)
				f.From, f.To, f.Token, f.Amount = ev.From.String(), ev.To.String(), ev.Token.String(), ev.Amount.String()
				out = append(out, f)
			}
		}
		if tracked[tx.ID] {
			f := base(events.FactTxResult, tx.ID, -1)
			f.ContractType = tx.ContractType
			f.Result = tx.Result
			if f.Result == "" {
				f.Result = "DEFAULT" // java-tron omits the enum's zero value
			}
			if !tx.Owner.IsZero() {
				f.From = tx.Owner.String()
			}
			if !tx.To.IsZero() {
				f.To = tx.To.String()
			}
			f.FeeSun = tx.FeeSun
			out = append(out, f)
		}
	}
	return out
}
