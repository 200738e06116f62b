package main

import (
	"strings"
	"testing"
	"time"
)

// The per-fault line counts the failed answers of each fault's window (until the next fault
// starts), by status, code and reason, and how long clients kept failing.
func TestFaultReportGroupsAnswersByWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	faults := []fault{
		{kind: "pg_stop", start: at(0), end: at(10_000)},
		{kind: "redis_flush", start: at(20_000), end: at(20_000)},
		{kind: "pg_stop", start: at(30_000), end: at(31_000)},
	}
	atts := []attempt{
		{at: at(-500), status: 201},
		{at: at(100), status: 503, code: 9003},
		{at: at(5_100), status: 503, code: 9003},
		{at: at(9_900), status: 0},
		{at: at(10_300), status: 201},
		{at: at(21_000), status: 201},
		{at: at(30_500), status: 503, code: 5003, reason: "no_price_snapshot"},
		{at: at(31_200), status: 200},
	}
	rs := report(faults, atts, func(from, to time.Time) time.Duration { return time.Second }, at(40_000))
	if len(rs) != 2 || rs[0].kind != "pg_stop" || rs[1].kind != "redis_flush" {
		t.Fatalf("reports %+v, want pg_stop then redis_flush", rs)
	}
	pg := rs[0]
	if pg.count != 2 || pg.answers["503 9003"] != 2 || pg.answers["no answer"] != 1 || pg.answers["503 5003 no_price_snapshot"] != 1 {
		t.Fatalf("pg_stop: %+v", pg)
	}
	if pg.outage != 10*time.Second || pg.failing != 9800*time.Millisecond || pg.firstOK != 300*time.Millisecond {
		t.Fatalf("pg_stop: outage %s, failing %s, first ok %s", pg.outage, pg.failing, pg.firstOK)
	}
	if len(rs[1].answers) != 0 || !strings.Contains(rs[1].String(), "no failed answer") {
		t.Fatalf("redis_flush: %s", rs[1])
	}
	if !strings.Contains(pg.String(), "503 9003 x2") {
		t.Fatalf("pg_stop line: %s", pg)
	}
}
