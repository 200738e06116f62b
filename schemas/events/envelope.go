// Package events holds the event envelope of the spec and the payload types every stage
// shares. JSON Schema files next to this file describe them for data teams.
package events

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"

	"rental/schemas/network"
)

// Version is the current event_version; it rises only for a breaking change to a data shape.
const Version = 1

// Envelope is the spec's event envelope. The same bytes go to Kafka and, later, to webhooks.
type Envelope struct {
	Event        string          `json:"event"`
	EventID      string          `json:"event_id"`
	EventVersion int             `json:"event_version"`
	CreatedAt    Time            `json:"created_at"`
	AccountID    string          `json:"account_id"`
	Network      network.Network `json:"network"`
	Test         bool            `json:"test"`
	Data         json.RawMessage `json:"data"`
}

// New builds an envelope with a fresh event id, version 1 and created_at now. data is
// marshalled once here so the stored and delivered bytes never differ.
func New(eventType, accountID string, net network.Network, data any) (Envelope, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Envelope{}, err
	}
	return Envelope{
		Event:        eventType,
		EventID:      NewID("evt"),
		EventVersion: Version,
		CreatedAt:    Time(time.Now()),
		AccountID:    accountID,
		Network:      net,
		Data:         raw,
	}, nil
}

// NewID returns prefix_ followed by 24 random hex characters.
func NewID(prefix string) string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + "_" + hex.EncodeToString(b[:])
}

// TimeLayout is the spec's timestamp form: RFC 3339, UTC, Z suffix, milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Time marshals as the spec's timestamp form.
type Time time.Time

func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(TimeLayout) + `"`), nil
}

func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	*t = Time(v)
	return nil
}

// FormatTime renders t in the spec's timestamp form.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }
