package chainwatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"sync"
	"time"

	"rental/infra/tron"
)

// memChain is an in-memory BlockSource for the pure follow and fork logic. Block ids are
// hashes of (number, parent, generation, tx ids), so a fork's new branch has new ids even
// when it carries the same transactions.
type memChain struct {
	mu     sync.Mutex
	blocks []Block
	infos  map[string][]TxInfo // by block id
	gen    int
	txSeq  int
	calls  int // Blocks calls, to check batching
}

var memGenesis = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newMemChain() *memChain {
	c := &memChain{infos: map[string][]TxInfo{}}
	c.appendBlock(nil, nil)
	return c
}

func (c *memChain) appendBlock(txs []Tx, infos []TxInfo) Block {
	num := int64(len(c.blocks))
	parent := ""
	if num > 0 {
		parent = c.blocks[num-1].ID
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d|%s|%d", num, parent, c.gen)
	for _, t := range txs {
		h.Write([]byte(t.ID))
	}
	b := Block{Num: num, ID: hex.EncodeToString(h.Sum(nil)), ParentID: parent,
		Time: memGenesis.Add(time.Duration(num) * 3 * time.Second), Txs: txs}
	c.blocks = append(c.blocks, b)
	c.infos[b.ID] = infos
	return b
}

// mine appends count empty blocks.
func (c *memChain) mine(count int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range count {
		c.appendBlock(nil, nil)
	}
}

func (c *memChain) newTxID() string {
	c.txSeq++
	h := sha256.Sum256(fmt.Appendf(nil, "tx %d", c.txSeq))
	return hex.EncodeToString(h[:])
}

// trx mines a block holding one successful TRX transfer and returns its tx id.
func (c *memChain) trx(from, to tron.Address, sun int64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.newTxID()
	c.appendBlock([]Tx{{ID: id, ContractType: "TransferContract", Owner: from, To: to, AmountSun: sun, Result: "SUCCESS"}}, nil)
	return id
}

// trc20 mines a block holding one contract call to token that emitted the given Transfer
// logs (token, from, to, amount each) and returns its tx id. failed marks a reverted call.
func (c *memChain) trc20(caller, called tron.Address, failed bool, logs ...tron.Log) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.newTxID()
	res := "SUCCESS"
	if failed {
		res = "REVERT"
	}
	c.appendBlock([]Tx{{ID: id, ContractType: "TriggerSmartContract", Owner: caller, To: called, Result: res, FeeSun: 345}},
		[]TxInfo{{TxID: id, Failed: failed, Logs: logs}})
	return id
}

// fork replaces the newest depth blocks with depth+1 new ones that carry the same
// transactions (re-included on the new branch, shifted by one block).
func (c *memChain) fork(depth int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cut := len(c.blocks) - depth
	orphans := append([]Block(nil), c.blocks[cut:]...)
	c.blocks = c.blocks[:cut]
	c.gen++
	c.appendBlock(nil, nil)
	for _, o := range orphans {
		c.appendBlock(o.Txs, c.infos[o.ID])
	}
}

func (c *memChain) Head(context.Context) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int64(len(c.blocks) - 1), nil
}

func (c *memChain) Blocks(_ context.Context, from int64, n int) ([]Block, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	var out []Block
	for i := from; i < from+int64(n) && i < int64(len(c.blocks)); i++ {
		out = append(out, c.blocks[i])
	}
	return out, nil
}

func (c *memChain) TxInfos(_ context.Context, num int64) ([]TxInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if num >= int64(len(c.blocks)) {
		return nil, nil
	}
	return c.infos[c.blocks[num].ID], nil
}

func transferLog(token, from, to tron.Address, amount *big.Int) tron.Log {
	l, err := tron.TransferLog(token, from, to, amount)
	if err != nil {
		panic(err)
	}
	return l
}

func addr(seed string) tron.Address {
	h := sha256.Sum256([]byte(seed))
	a, _ := tron.AddressFromBytes(h[12:])
	return a
}
