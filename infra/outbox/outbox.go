// Package outbox is the transactional outbox: stages write the events that announce a state
// change into the outbox table inside the same Postgres transaction as the change, and the
// Relay publishes committed rows to Kafka. An event therefore exists exactly when its state
// change does; it reaches Kafka at least once (consumers dedupe by event_id) and, for one
// key, in the order the rows were written.
//
// Ordering contract for callers: rows of one key leave in id order. Transactions that
// write events for the same key concurrently must serialise on the entity the key names
// (SELECT … FOR UPDATE on the order, account, …), which every state change does anyway;
// then id order is commit order for that key.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rental/schemas/events"
	"rental/schemas/topics"
)

// Shards is the number of publishing lanes; it must match the "& 15" in 00002_outbox.sql.
const Shards = 16

// Header names set on every published record besides the caller's headers.
const (
	HeaderEvent    = "event"     // event type, for customer events
	HeaderEventID  = "event_id"  // the envelope's event_id, for dedupe without parsing
	HeaderOutboxID = "outbox_id" // the outbox row id, for dedupe of internal records
)

// Execer is a transaction: a pgx.Tx, or a connection inside a transaction it began itself
// (order creation's group commit).
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Insert adds a customer event to the outbox inside tx. The topic comes from the event type
// (topics.ForEvent); the key is the id the topic is keyed by, read from the event's data
// (e.g. data.order_id) and, failing that, the envelope's account_id. The value is the JSON
// envelope: the same bytes go to Kafka and, later, to webhooks.
func Insert(ctx context.Context, tx Execer, env events.Envelope) error {
	r, err := eventRecord(env)
	if err != nil {
		return err
	}
	return insertRecord(ctx, tx, r.topic, r.key, r.value, r.headers)
}

// record is one outbox row.
type record struct {
	topic   topics.Topic
	key     string
	value   []byte
	headers map[string]string
}

// eventRecord is the outbox row of a customer event (see Insert).
func eventRecord(env events.Envelope) (record, error) {
	topic, ok := topics.ForEvent(env.Event)
	if !ok {
		return record{}, fmt.Errorf("outbox: no topic for event type %q", env.Event)
	}
	if env.EventID == "" {
		return record{}, errors.New("outbox: event without event_id")
	}
	key, err := keyOf(topic, env)
	if err != nil {
		return record{}, err
	}
	value, err := json.Marshal(env)
	if err != nil {
		return record{}, fmt.Errorf("outbox: %w", err)
	}
	return record{topic: topic, key: key, value: value, headers: map[string]string{HeaderEvent: env.Event, HeaderEventID: env.EventID}}, nil
}

// QueueEvents queues in b the insert of customer events as Insert writes each, in one
// statement, in the order given (a group confirming many orders announces them together).
func QueueEvents(b *pgx.Batch, envs []events.Envelope) error {
	n := len(envs)
	names, keys, values, headers := make([]string, n), make([]string, n), make([][]byte, n), make([]map[string]string, n)
	for i, env := range envs {
		r, err := eventRecord(env)
		if err != nil {
			return err
		}
		names[i], keys[i], values[i], headers[i] = r.topic.Name, r.key, r.value, r.headers
	}
	b.Queue(insertInto+`
		SELECT topic, key, value, headers FROM unnest($1::text[], $2::text[], $3::bytea[], $4::jsonb[]) WITH ORDINALITY
			AS u(topic, key, value, headers, i) ORDER BY i`, names, keys, values, headers)
	return nil
}

// InsertRecord adds an internal record (a chain fact, an intent) to the outbox inside tx.
// key fixes the record's partition and its order relative to other records of that key.
func InsertRecord(ctx context.Context, tx pgx.Tx, topic topics.Topic, key string, value []byte, headers map[string]string) error {
	return insertRecord(ctx, tx, topic, key, value, headers)
}

func insertRecord(ctx context.Context, tx Execer, topic topics.Topic, key string, value []byte, headers map[string]string) error {
	if topic.Name == "" {
		return errors.New("outbox: record without topic")
	}
	if key == "" {
		return fmt.Errorf("outbox: record for %s without key", topic.Name)
	}
	if headers == nil {
		headers = map[string]string{}
	}
	// No NOTIFY: Postgres serialises the commits of every notifying transaction of the
	// whole server on one lock, which capped order creation at a fraction of the database's
	// commit rate. The relay polls for pending shards every few milliseconds instead.
	_, err := tx.Exec(ctx, insertInto+` VALUES ($1, $2, $3, $4)`, topic.Name, key, value, headers)
	if err != nil {
		return fmt.Errorf("outbox: insert into %s: %w", topic.Name, err)
	}
	return nil
}

// insertInto is the outbox's row format: every statement that writes outbox rows starts
// with it, and no other package spells the table's columns.
const insertInto = `INSERT INTO outbox (topic, key, value, headers)`

// QueueRecords queues in b the insert of internal records of one topic, all with the same
// headers: one per key, with the value of the same index, written in the order given by
// one statement. A store queues its intents with the writes they announce this way, so
// that they share its round trip.
func QueueRecords(b *pgx.Batch, topic topics.Topic, keys []string, values [][]byte, headers map[string]string) error {
	if topic.Name == "" {
		return errors.New("outbox: record without topic")
	}
	if len(keys) != len(values) {
		return fmt.Errorf("outbox: %d keys for %d values", len(keys), len(values))
	}
	for _, k := range keys {
		if k == "" {
			return fmt.Errorf("outbox: record for %s without key", topic.Name)
		}
	}
	if headers == nil {
		headers = map[string]string{}
	}
	b.Queue(insertInto+`
		SELECT $1::text, key, value, $4::jsonb FROM unnest($2::text[], $3::bytea[]) WITH ORDINALITY AS u(key, value, i) ORDER BY i`,
		topic.Name, keys, values, headers)
	return nil
}

// RecordPerRow is the insert of one internal record per row of rel, a relation of the
// caller's statement (a WITH arm that inserted the rows the records announce), keyed by
// rel's column keyColumn, of topic with value and headers. It is meant as a data-modifying
// WITH arm of that statement, so that the records exist exactly when the rows do, in the
// same statement. Its parameters are numbered from firstArg; args are their values, to
// append to the statement's own in that order.
func RecordPerRow(rel, keyColumn string, firstArg int, topic topics.Topic, value []byte, headers map[string]string) (sql string, args []any, err error) {
	if topic.Name == "" {
		return "", nil, errors.New("outbox: record without topic")
	}
	if headers == nil {
		headers = map[string]string{}
	}
	sql = fmt.Sprintf(`%s SELECT $%d::text, %s.%s, $%d::bytea, $%d::jsonb FROM %s`,
		insertInto, firstArg, rel, keyColumn, firstArg+1, firstArg+2, rel)
	return sql, []any{topic.Name, value, headers}, nil
}

func keyOf(topic topics.Topic, env events.Envelope) (string, error) {
	if topic.Key != "account_id" && len(env.Data) > 0 {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(env.Data, &fields); err == nil {
			if raw, ok := fields[topic.Key]; ok {
				var id string
				if err := json.Unmarshal(raw, &id); err == nil && id != "" {
					return id, nil
				}
			}
		}
	}
	if env.AccountID != "" {
		return env.AccountID, nil
	}
	return "", fmt.Errorf("outbox: event %s has neither data.%s nor account_id to key %s by", env.Event, topic.Key, topic.Name)
}
