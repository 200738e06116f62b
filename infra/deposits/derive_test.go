package deposits

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcutil/hdkeychain"
	"github.com/btcsuite/btcd/chaincfg"
)

type depositVectors struct {
	SeedHex        string `json:"seed_hex"`
	ChainPublicKey string `json:"chain_public_key"`
	Vectors        []struct {
		Index   uint32 `json:"index"`
		Address string `json:"address"`
	} `json:"vectors"`
}

func loadVectors(t *testing.T) depositVectors {
	t.Helper()
	b, err := os.ReadFile("testdata/deposit_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v depositVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	return v
}

// The dev seed's addresses agree with TronWeb's bundled HD wallet, whichever form of the
// key the deriver is given (seed, master xprv, chain xprv, chain xpub).
func TestDeriverMatchesTronWebHDWallet(t *testing.T) {
	v := loadVectors(t)
	if v.SeedHex != DevSeedHex {
		t.Fatalf("vectors were made for seed %s, DevSeedHex is %s", v.SeedHex, DevSeedHex)
	}
	seed, _ := hex.DecodeString(DevSeedHex)
	master, err := hdkeychain.NewMaster(seed, &chaincfg.MainNetParams)
	if err != nil {
		t.Fatal(err)
	}
	chain := master
	for _, i := range []uint32{44 + hdkeychain.HardenedKeyStart, 195 + hdkeychain.HardenedKeyStart, hdkeychain.HardenedKeyStart, 0} {
		if chain, err = chain.Derive(i); err != nil {
			t.Fatal(err)
		}
	}
	chainPub, err := chain.Neuter()
	if err != nil {
		t.Fatal(err)
	}
	forms := map[string]string{
		"hex seed":    DevSeedHex,
		"master xprv": master.String(),
		"chain xprv":  chain.String(),
		"chain xpub":  chainPub.String(),
	}
	for name, key := range forms {
		d, err := NewDeriver(key)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d.XPub() != chainPub.String() {
			t.Errorf("%s: XPub %s, want %s", name, d.XPub(), chainPub.String())
		}
		if strings.Contains(d.XPub(), "xprv") {
			t.Errorf("%s: deriver kept private material", name)
		}
		for _, vec := range v.Vectors {
			a, err := d.Address(vec.Index)
			if err != nil {
				t.Fatal(err)
			}
			if a.String() != vec.Address {
				t.Errorf("%s: index %d: %s, TronWeb says %s", name, vec.Index, a, vec.Address)
			}
		}
	}
}

func TestDeriverRefusesBadKeys(t *testing.T) {
	seed, _ := hex.DecodeString(DevSeedHex)
	master, _ := hdkeychain.NewMaster(seed, &chaincfg.MainNetParams)
	masterPub, _ := master.Neuter()
	account, _ := master.Derive(44 + hdkeychain.HardenedKeyStart)
	for name, key := range map[string]string{
		"empty":              "",
		"not hex":            "zz",
		"short seed":         "00112233",
		"master xpub":        masterPub.String(), // cannot derive hardened levels
		"depth 1 xprv":       account.String(),
		"garbage xprv":       "xprv123",
		"seed over 64 bytes": strings.Repeat("ab", 65),
	} {
		if _, err := NewDeriver(key); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	d, err := NewDeriver(DevSeedHex)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Address(hdkeychain.HardenedKeyStart); err == nil {
		t.Error("hardened index accepted")
	}
}
