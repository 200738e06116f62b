package tronsim

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"rental/infra/tron"
)

// Persistence layout (see Options.DataFile):
//
//	<DataFile>            snapshot JSON: state, pending transactions, and which block log
//	                      is current with how many of its bytes are valid. Written to a temp
//	                      file and renamed over, so it is always a complete version.
//	<DataFile>.blocks.<g> one JSON line per block, written at the recorded length (never
//	                      appended blindly), so bytes a crash left past the recorded length
//	                      are ignored and overwritten. A fork writes a new generation <g+1>
//	                      and switches to it with the snapshot rename.
//
// A SIGKILL between the two writes leaves the previous snapshot, which describes a prefix
// of the log: the chain comes back as it was one step earlier, never corrupted.

const snapshotFormat = 1

type snapshot struct {
	Format       int                      `json:"format"`
	Network      string                   `json:"network"`
	GenesisTime  int64                    `json:"genesis_time"`
	USDTContract tron.Address             `json:"usdt_contract"`
	Gen          int64                    `json:"gen"`
	BlocksLen    int64                    `json:"blocks_len"`
	BlockCount   int64                    `json:"block_count"`
	ForkGen      int64                    `json:"fork_gen"`
	Accounts     map[tron.Address]account `json:"accounts"`
	Delegations  []delegation             `json:"delegations"`
	USDT         map[tron.Address]int64   `json:"usdt"`
	StakedEnergy int64                    `json:"staked_energy"`
	StakedNet    int64                    `json:"staked_bandwidth"`
	DeepRentals  []deepRental             `json:"deep_rentals,omitempty"`
	Pending      []txLine                 `json:"pending,omitempty"`
	Held         []heldLine               `json:"held,omitempty"`
}

type txLine struct {
	Raw    string     `json:"raw"`
	Sigs   []string   `json:"sigs"`
	Result execResult `json:"result"`
}

type heldLine struct {
	Tx      txLine `json:"tx"`
	Release int64  `json:"release"`
}

type blockLine struct {
	Num     int64        `json:"n"`
	ID      string       `json:"id"`
	Parent  string       `json:"p"`
	Time    int64        `json:"t"`
	Witness tron.Address `json:"w"`
	Sig     string       `json:"s"`
	Txs     []txLine     `json:"x,omitempty"`
}

type store struct {
	path   string
	gen    int64
	f      *os.File
	length int64
	count  int64
}

func (st *store) logPath(gen int64) string { return fmt.Sprintf("%s.blocks.%d", st.path, gen) }

// openStore opens path; loaded reports that it held a chain, which is then installed in s.
func openStore(path string, s *Sim) (*store, bool, error) {
	st := &store{path: path}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, false, fmt.Errorf("tronsim: data dir: %w", err)
		}
		return st, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("tronsim: read %s: %w", path, err)
	}
	var snap snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return nil, false, fmt.Errorf("tronsim: %s is not a simulator data file: %w", path, err)
	}
	if snap.Format != snapshotFormat {
		return nil, false, fmt.Errorf("tronsim: %s has format %d, want %d", path, snap.Format, snapshotFormat)
	}
	if snap.Network != string(s.opts.Network) {
		return nil, false, fmt.Errorf("tronsim: %s holds a %s chain, configured network is %s", path, snap.Network, s.opts.Network)
	}
	st.gen = snap.Gen
	f, err := os.OpenFile(st.logPath(st.gen), os.O_RDWR, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("tronsim: block log: %w", err)
	}
	st.f = f
	if err := st.load(s, &snap); err != nil {
		f.Close()
		return nil, false, err
	}
	return st, true, nil
}

func (st *store) load(s *Sim, snap *snapshot) error {
	s.opts.GenesisTime = time.UnixMilli(snap.GenesisTime)
	s.opts.USDTContract = snap.USDTContract
	s.forkGen = snap.ForkGen
	r := bufio.NewReaderSize(io.NewSectionReader(st.f, 0, snap.BlocksLen), 1<<20)
	var prev [32]byte
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) && len(line) == 0 {
			break
		}
		if err != nil {
			return fmt.Errorf("tronsim: block log is shorter than recorded: %w", err)
		}
		var bl blockLine
		if err := json.Unmarshal(line, &bl); err != nil {
			return fmt.Errorf("tronsim: block log line %d: %w", len(s.blocks), err)
		}
		b, err := bl.block(s)
		if err != nil {
			return err
		}
		if b.Num != int64(len(s.blocks)) || (b.Num > 0 && b.Parent != prev) {
			return fmt.Errorf("tronsim: block log is not a chain at block %d", b.Num)
		}
		prev = b.ID
		s.blocks = append(s.blocks, b)
	}
	if int64(len(s.blocks)) != snap.BlockCount || len(s.blocks) == 0 {
		return fmt.Errorf("tronsim: block log has %d blocks, snapshot says %d", len(s.blocks), snap.BlockCount)
	}
	st.length, st.count = snap.BlocksLen, snap.BlockCount
	if err := st.f.Truncate(st.length); err != nil {
		return fmt.Errorf("tronsim: block log: %w", err)
	}
	for _, b := range s.blocks {
		for _, t := range b.Txs {
			s.known[t.ID] = t
		}
	}
	cs := newState()
	if snap.Accounts != nil {
		cs.Accounts = snap.Accounts
	}
	if snap.USDT != nil {
		cs.USDT = snap.USDT
	}
	for _, d := range snap.Delegations {
		cs.Delegations[d.key()] = d
	}
	cs.StakedEnergy, cs.StakedBandwidth = snap.StakedEnergy, snap.StakedNet
	cs.DeepRentals = snap.DeepRentals
	s.confirmed = cs
	for _, tl := range snap.Pending {
		rec, err := tl.record()
		if err != nil {
			return err
		}
		s.pending = append(s.pending, rec)
		s.known[rec.ID] = rec
	}
	for _, hl := range snap.Held {
		rec, err := hl.Tx.record()
		if err != nil {
			return err
		}
		s.held = append(s.held, heldTx{Rec: rec, Release: hl.Release})
		s.known[rec.ID] = rec
	}
	return nil
}

func (tl txLine) record() (*txRecord, error) {
	raw, err := hex.DecodeString(tl.Raw)
	if err != nil {
		return nil, fmt.Errorf("tronsim: stored transaction: %w", err)
	}
	r, err := tron.UnmarshalRawData(raw)
	if err != nil {
		return nil, fmt.Errorf("tronsim: stored transaction: %w", err)
	}
	return &txRecord{ID: tron.TxID(raw), Raw: raw, Data: r, Sigs: tl.Sigs, Result: tl.Result}, nil
}

func lineOf(r *txRecord) txLine {
	return txLine{Raw: hex.EncodeToString(r.Raw), Sigs: r.Sigs, Result: r.Result}
}

func (bl *blockLine) block(s *Sim) (*block, error) {
	b := &block{Num: bl.Num, Time: bl.Time, Witness: bl.Witness}
	for _, tl := range bl.Txs {
		rec, err := tl.record()
		if err != nil {
			return nil, err
		}
		rec.Block, rec.BlockTime = bl.Num, bl.Time
		b.Txs = append(b.Txs, rec)
	}
	if _, err := hex.Decode(b.Parent[:], []byte(bl.Parent)); err != nil {
		return nil, fmt.Errorf("tronsim: block %d parent: %w", bl.Num, err)
	}
	b.Sig, _ = hex.DecodeString(bl.Sig)
	b.TrieRoot = trieRoot(b.Txs)
	b.ID = blockID(b.Num, headerRaw(b.Num, b.Time, b.TrieRoot, b.Parent, b.Witness))
	if hex.EncodeToString(b.ID[:]) != bl.ID {
		return nil, fmt.Errorf("tronsim: block %d does not hash to its recorded id", bl.Num)
	}
	return b, nil
}

func encodeBlock(b *block) []byte {
	bl := blockLine{Num: b.Num, ID: hex.EncodeToString(b.ID[:]), Parent: hex.EncodeToString(b.Parent[:]),
		Time: b.Time, Witness: b.Witness, Sig: hex.EncodeToString(b.Sig)}
	for _, t := range b.Txs {
		bl.Txs = append(bl.Txs, lineOf(t))
	}
	out, _ := json.Marshal(bl)
	return append(out, '\n')
}

// appendBlocks writes new blocks at the end of the valid log, then the snapshot.
func (st *store) appendBlocks(s *Sim, blocks []*block) error {
	var buf bytes.Buffer
	for _, b := range blocks {
		buf.Write(encodeBlock(b))
	}
	if _, err := st.f.WriteAt(buf.Bytes(), st.length); err != nil {
		return fmt.Errorf("tronsim: write block log: %w", err)
	}
	st.length += int64(buf.Len())
	st.count += int64(len(blocks))
	return st.saveState(s)
}

// rewrite writes the whole chain into a new log generation and switches to it (genesis
// and forks).
func (st *store) rewrite(s *Sim) error {
	gen := st.gen + 1
	if st.f == nil {
		gen = st.gen
	}
	f, err := os.OpenFile(st.logPath(gen), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("tronsim: block log: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var n int64
	for _, b := range s.blocks {
		m, _ := w.Write(encodeBlock(b))
		n += int64(m)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("tronsim: write block log: %w", err)
	}
	old, oldGen := st.f, st.gen
	st.f, st.gen, st.length, st.count = f, gen, n, int64(len(s.blocks))
	if err := st.saveState(s); err != nil {
		return err
	}
	if old != nil {
		old.Close()
		if oldGen != gen {
			os.Remove(st.logPath(oldGen))
		}
	}
	return nil
}

// saveState writes the snapshot atomically (temp file + rename).
func (st *store) saveState(s *Sim) error {
	snap := snapshot{
		Format:       snapshotFormat,
		Network:      string(s.opts.Network),
		GenesisTime:  s.opts.GenesisTime.UnixMilli(),
		USDTContract: s.opts.USDTContract,
		Gen:          st.gen,
		BlocksLen:    st.length,
		BlockCount:   st.count,
		ForkGen:      s.forkGen,
		Accounts:     s.confirmed.Accounts,
		USDT:         s.confirmed.USDT,
		StakedEnergy: s.confirmed.StakedEnergy,
		StakedNet:    s.confirmed.StakedBandwidth,
		Delegations:  s.confirmed.delegationsOf(tron.Address{}, tron.Address{}),
		DeepRentals:  s.confirmed.DeepRentals,
	}
	for _, r := range s.pending {
		snap.Pending = append(snap.Pending, lineOf(r))
	}
	for _, h := range s.held {
		snap.Held = append(snap.Held, heldLine{Tx: lineOf(h.Rec), Release: h.Release})
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return fmt.Errorf("tronsim: encode state: %w", err)
	}
	tmp := st.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("tronsim: write state: %w", err)
	}
	if err := os.Rename(tmp, st.path); err != nil {
		return fmt.Errorf("tronsim: write state: %w", err)
	}
	return nil
}

func (st *store) close() error {
	if st.f == nil {
		return nil
	}
	err := st.f.Close()
	st.f = nil
	return err
}
