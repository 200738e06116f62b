package chainwatch

import (
	"encoding/json"
	"testing"

	"rental/infra/tron"
)

// A mainnet block mixes contract types the service never signs; the follower must read
// the ones it needs (in either address form) and step over the rest.
func TestDecodeBlockReadsTransfersAndSkipsUnknownContracts(t *testing.T) {
	raw := `{
	  "blockID": "0000000003d0900a5f6b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f",
	  "block_header": {"raw_data": {"number": 64000010, "parentHash": "0000000003d09009aa", "timestamp": 1760000000000}},
	  "transactions": [
	    {"txID": "AA00000000000000000000000000000000000000000000000000000000000001",
	     "ret": [{"contractRet": "SUCCESS", "fee": 1100000}],
	     "raw_data": {"contract": [{"type": "TransferContract", "parameter": {"type_url": "type.googleapis.com/protocol.TransferContract",
	       "value": {"owner_address": "` + alice.Hex() + `", "to_address": "` + bob.String() + `", "amount": 5000000}}}]}},
	    {"txID": "aa00000000000000000000000000000000000000000000000000000000000002",
	     "ret": [{"contractRet": "SUCCESS"}],
	     "raw_data": {"contract": [{"type": "VoteWitnessContract", "parameter": {"value": {"owner_address": "` + alice.Hex() + `",
	       "votes": [{"vote_address": "` + bob.Hex() + `", "vote_count": 3}]}}}]}},
	    {"txID": "aa00000000000000000000000000000000000000000000000000000000000003",
	     "ret": [{"contractRet": "REVERT"}],
	     "raw_data": {"contract": [{"type": "TriggerSmartContract", "parameter": {"value": {"owner_address": "` + alice.String() + `",
	       "contract_address": "` + usdt.Hex() + `", "data": "a9059cbb"}}}]}},
	    {"txID": "aa00000000000000000000000000000000000000000000000000000000000004",
	     "raw_data": {"contract": [{"type": "SomeFutureContract", "parameter": {"value": {"amount": "not a number"}}}]}}
	  ]}`
	var b tron.Block
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		t.Fatal(err)
	}
	got, err := decodeBlock(&b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Num != 64000010 || got.ParentID != "0000000003d09009aa" || got.Time.UnixMilli() != 1760000000000 || len(got.Txs) != 4 {
		t.Fatalf("block = %+v", got)
	}
	tr := got.Txs[0]
	if tr.ID != "aa00000000000000000000000000000000000000000000000000000000000001" || tr.ContractType != "TransferContract" ||
		tr.Owner != alice || tr.To != bob || tr.AmountSun != 5_000_000 || tr.Result != "SUCCESS" || tr.FeeSun != 1_100_000 {
		t.Errorf("transfer = %+v", tr)
	}
	if v := got.Txs[1]; v.ContractType != "VoteWitnessContract" || v.Owner != alice {
		t.Errorf("vote = %+v", v)
	}
	if c := got.Txs[2]; !c.IsContractCall() || c.To != usdt || c.Result != "REVERT" {
		t.Errorf("call = %+v", c)
	}
	if u := got.Txs[3]; u.ContractType != "SomeFutureContract" || u.Result != "" {
		t.Errorf("unknown = %+v", u)
	}
}
