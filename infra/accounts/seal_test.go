package accounts

import (
	"bytes"
	"testing"
)

// During a master key rotation a sealer opens values sealed under the previous key and
// seals under the new one only; Reseal moves a value to the new key once.
func TestSealerWithPreviousKey(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	old, _ := NewSealer(oldKey)
	sealedOld := old.Seal("ak_1", []byte("s3cret"))

	rotating, err := NewSealer(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := rotating.Open("ak_1", sealedOld); err != nil || string(pt) != "s3cret" {
		t.Fatalf("old value under the rotating sealer: %q, %v", pt, err)
	}
	if _, err := rotating.Open("ak_2", sealedOld); err == nil {
		t.Fatal("a value opened for another key id")
	}
	fresh := rotating.Seal("ak_1", []byte("s3cret"))
	if _, err := old.Open("ak_1", fresh); err == nil {
		t.Fatal("a new value was sealed under the old key")
	}

	next, _ := NewSealer(newKey)
	moved, changed, err := Reseal(old, next, "ak_1", sealedOld)
	if err != nil || !changed {
		t.Fatalf("reseal: %v %v", changed, err)
	}
	if pt, err := next.Open("ak_1", moved); err != nil || string(pt) != "s3cret" {
		t.Fatalf("resealed value: %q, %v", pt, err)
	}
	if _, changed, err := Reseal(old, next, "ak_1", moved); err != nil || changed {
		t.Fatalf("second reseal: changed %v, %v", changed, err)
	}
	other, _ := NewSealer(bytes.Repeat([]byte{3}, 32))
	if _, _, err := Reseal(other, next, "ak_1", sealedOld); err != ErrNeitherKey {
		t.Fatalf("reseal with a wrong old key: %v", err)
	}
	if _, err := NewSealer(newKey, []byte("short")); err == nil {
		t.Fatal("a short previous key was accepted")
	}
}
