package events

import (
	"fmt"

	"rental/schemas/network"
)

// MarketSample is the record published on topics.MarketSamples for every price sample the
// market sampler stores (marketsample.schema.json). SampleID is deterministic (network,
// slug and sampling slot), so a consumer deduplicates a republished record by it.
type MarketSample struct {
	SampleID        string          `json:"sample_id"`
	Network         network.Network `json:"network"`
	Slug            string          `json:"slug"`
	TS              Time            `json:"ts"`
	PriceSun1h      *Centisun       `json:"price_sun_1h"`
	PriceSun1d      *Centisun       `json:"price_sun_1d"`
	AvailableEnergy *int64          `json:"available_energy"`
	TotalEnergy     *int64          `json:"total_energy"`
}

// MarketSampleID is the sample_id of a provider's sample in a slot.
func MarketSampleID(n network.Network, slug string, slot int64) string {
	return fmt.Sprintf("ms_%s_%s_%d", n, slug, slot)
}
