package pricing

import (
	"testing"

	"rental/schemas/network"
)

// BenchmarkPrice is the per-request cost of an estimate or quote on the edge.
func BenchmarkPrice(b *testing.B) {
	s, err := Build(Inputs{Model: DefaultModel(network.Mainnet), Supply: threeClasses, Now: at(9, 0, 0, 0)})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Price(Energy, Tier1h, 250_000); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuild is the CPU part of one pricing cycle.
func BenchmarkBuild(b *testing.B) {
	in := Inputs{Model: DefaultModel(network.Mainnet), Supply: threeClasses, Now: at(9, 0, 0, 0)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(in); err != nil {
			b.Fatal(err)
		}
	}
}
