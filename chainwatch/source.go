package chainwatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"rental/infra/tron"
)

// Block is what the follower needs of a block: its place in the chain and the
// transactions it carries, already decoded. BlockSource implementations fill it.
type Block struct {
	Num      int64
	ID       string
	ParentID string
	Time     time.Time
	Txs      []Tx
}

// Tx is one transaction of a block. Owner and To are zero when the contract has no such
// field; To is the receiver of a TransferContract, the called contract of a
// TriggerSmartContract, and the receiver of a (un)delegation.
type Tx struct {
	ID           string
	ContractType string // java-tron's name: "TransferContract", "TriggerSmartContract", ...
	Owner        tron.Address
	To           tron.Address
	AmountSun    int64  // TransferContract amount
	Result       string // contractRet as the block records it ("SUCCESS", "REVERT", ...)
	FeeSun       int64
}

// IsContractCall reports a smart-contract call, the only kind of transaction that can
// carry TRC-20 Transfer logs.
func (t *Tx) IsContractCall() bool {
	return t.ContractType == "TriggerSmartContract" || t.ContractType == "CreateSmartContract"
}

// TxInfo is the execution record of one transaction (gettransactioninfobyblocknum).
type TxInfo struct {
	TxID   string
	Failed bool
	Logs   []tron.Log
}

// BlockSource is the follower's view of a node. It is small on purpose: the pure follow
// and fork logic is tested against an in-memory chain, production uses NodeSource.
type BlockSource interface {
	// Head returns the number of the node's newest block.
	Head(ctx context.Context) (int64, error)
	// Blocks returns up to n consecutive blocks starting at from, in order. It returns
	// fewer (possibly none) when the node has fewer.
	Blocks(ctx context.Context, from int64, n int) ([]Block, error)
	// TxInfos returns the execution records of the transactions of block num.
	TxInfos(ctx context.Context, num int64) ([]TxInfo, error)
}

// SolidSource is a BlockSource that knows the node's solidified block (the newest one the
// network can no longer reverse). NodeSource is one.
type SolidSource interface {
	SolidHead(ctx context.Context) (int64, error)
}

// ChainIdentifier is a BlockSource that names its chain by the id of its genesis block.
// NodeSource is one.
type ChainIdentifier interface {
	Genesis(ctx context.Context) (string, error)
}

// NodeAPI is the part of *tron.Client that NodeSource uses.
type NodeAPI interface {
	GetHead(ctx context.Context) (*tron.Block, error)
	GetSolidHead(ctx context.Context) (*tron.Block, error)
	GetBlockByNum(ctx context.Context, num int64) (*tron.Block, error)
	GetBlockByLimitNext(ctx context.Context, start, end int64) ([]tron.Block, error)
	GetTransactionInfoByBlockNum(ctx context.Context, num int64) ([]tron.TransactionInfo, error)
}

// NodeSource reads blocks from a java-tron HTTP API (or the simulator) through NodeAPI.
// Ranges go through getblockbylimitnext, 100 blocks per call, several calls in flight.
type NodeSource struct {
	api      NodeAPI
	parallel int
}

// NewNodeSource returns a source with up to parallel range calls in flight (min 1).
func NewNodeSource(api NodeAPI, parallel int) *NodeSource {
	return &NodeSource{api: api, parallel: max(parallel, 1)}
}

// Head implements BlockSource.
func (s *NodeSource) Head(ctx context.Context) (int64, error) {
	b, err := s.api.GetHead(ctx)
	if err != nil {
		return 0, err
	}
	return b.Number(), nil
}

// SolidHead implements SolidSource: the newest solidified block (tron.Client.GetSolidHead).
func (s *NodeSource) SolidHead(ctx context.Context) (int64, error) {
	b, err := s.api.GetSolidHead(ctx)
	if err != nil {
		return 0, err
	}
	return b.Number(), nil
}

// Genesis implements ChainIdentifier: the id of block 0.
func (s *NodeSource) Genesis(ctx context.Context) (string, error) {
	b, err := s.api.GetBlockByNum(ctx, 0)
	if err != nil {
		return "", err
	}
	return b.BlockID, nil
}

// Blocks implements BlockSource. Chunks are fetched concurrently; the result is cut at the
// first chunk that came back short, so it is always a consecutive run from `from`.
func (s *NodeSource) Blocks(ctx context.Context, from int64, n int) ([]Block, error) {
	if n <= 0 {
		return nil, nil
	}
	chunks := (n + tron.MaxBlocksPerRange - 1) / tron.MaxBlocksPerRange
	got := make([][]tron.Block, chunks)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.parallel)
	for i := range chunks {
		start := from + int64(i*tron.MaxBlocksPerRange)
		end := min(start+tron.MaxBlocksPerRange, from+int64(n))
		g.Go(func() error {
			bs, err := s.api.GetBlockByLimitNext(gctx, start, end)
			got[i] = bs
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make([]Block, 0, n)
	next := from
	for _, chunk := range got {
		for i := range chunk {
			if chunk[i].Number() != next {
				return out, nil // a gap: the node is behind or answered partially
			}
			b, err := decodeBlock(&chunk[i])
			if err != nil {
				return nil, err
			}
			out = append(out, b)
			next++
		}
	}
	return out, nil
}

// TxInfos implements BlockSource.
func (s *NodeSource) TxInfos(ctx context.Context, num int64) ([]TxInfo, error) {
	infos, err := s.api.GetTransactionInfoByBlockNum(ctx, num)
	if err != nil {
		return nil, err
	}
	out := make([]TxInfo, len(infos))
	for i := range infos {
		if infos[i].BlockNumber != num && infos[i].BlockNumber != 0 {
			return nil, fmt.Errorf("%w: transaction info of block %d says block %d", errInconsistent, num, infos[i].BlockNumber)
		}
		out[i] = TxInfo{TxID: infos[i].ID, Failed: infos[i].Failed(), Logs: infos[i].Log}
	}
	return out, nil
}

// errInconsistent marks answers that contradict each other, normally because the node
// switched branches between two calls. The follower drops the batch and reads it again.
var errInconsistent = errors.New("chainwatch: inconsistent node answers")

// rawDataView is the part of a transaction's raw_data the follower reads. It is decoded
// leniently on purpose: a mainnet block holds contract types the strict codec of
// infra/tron does not know (it only knows what the service signs), and an unknown type
// must be skipped, not stop the follower.
type rawDataView struct {
	Contract []struct {
		Type      string `json:"type"`
		Parameter struct {
			Value json.RawMessage `json:"value"`
		} `json:"parameter"`
	} `json:"contract"`
}

// contractView holds the contract fields the facts use. Field names are shared by the
// contract types that matter (TransferContract, TriggerSmartContract, the resource
// contracts); other types may lack them.
type contractView struct {
	OwnerAddress    string `json:"owner_address"`
	ToAddress       string `json:"to_address"`
	ReceiverAddress string `json:"receiver_address"`
	ContractAddress string `json:"contract_address"`
	Amount          int64  `json:"amount"`
}

func decodeBlock(b *tron.Block) (Block, error) {
	out := Block{
		Num:      b.Number(),
		ID:       b.BlockID,
		ParentID: b.ParentHash(),
		Time:     time.UnixMilli(b.Timestamp()).UTC(),
		Txs:      make([]Tx, 0, len(b.Transactions)),
	}
	for i := range b.Transactions {
		t := &b.Transactions[i]
		tx := Tx{ID: strings.ToLower(t.TxID)}
		if len(t.Ret) > 0 {
			tx.Result = t.Ret[0].ContractRet
			tx.FeeSun = t.Ret[0].Fee
		}
		var raw rawDataView
		if err := json.Unmarshal(t.RawData, &raw); err != nil {
			return Block{}, fmt.Errorf("block %d tx %s: raw_data: %w", out.Num, t.TxID, err)
		}
		if len(raw.Contract) > 0 {
			c := raw.Contract[0]
			tx.ContractType = c.Type
			var v contractView
			if err := json.Unmarshal(c.Parameter.Value, &v); err != nil {
				// The types facts are made of must decode; anything else is kept with its
				// type only (enough for a tx_result) rather than stopping the follower.
				if c.Type == "TransferContract" || c.Type == "TriggerSmartContract" {
					return Block{}, fmt.Errorf("block %d tx %s: %s value: %w", out.Num, t.TxID, c.Type, err)
				}
			}
			tx.Owner = parseAddr(v.OwnerAddress)
			switch {
			case v.ToAddress != "":
				tx.To = parseAddr(v.ToAddress)
			case v.ReceiverAddress != "":
				tx.To = parseAddr(v.ReceiverAddress)
			case v.ContractAddress != "":
				tx.To = parseAddr(v.ContractAddress)
			}
			tx.AmountSun = v.Amount
		}
		out.Txs = append(out.Txs, tx)
	}
	return out, nil
}

// parseAddr reads an address in any form java-tron prints; a malformed one becomes the
// zero address, which the fact builder skips.
func parseAddr(s string) tron.Address {
	a, err := tron.ParseAnyAddress(s)
	if err != nil {
		return tron.Address{}
	}
	return a
}
