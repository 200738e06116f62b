package pricing

import (
	"fmt"
	"time"
)

// MinuteOfDay is t's minute from 00:00 UTC (0..1439).
func MinuteOfDay(t time.Time) int {
	u := t.UTC()
	return u.Hour()*60 + u.Minute()
}

// PartAt returns the index of the day-part in force at t. A part holds from the first second
// of its StartMinute up to, not including, the first second of its EndMinute; midnight UTC
// belongs to the part starting at minute 0. The model must be valid.
func (m Model) PartAt(t time.Time) int {
	min := MinuteOfDay(t)
	for i, p := range m.DayParts {
		if min >= p.StartMinute && min < p.EndMinute {
			return i
		}
	}
	return len(m.DayParts) - 1 // unreachable for a valid model
}

// CheaperFrom is the start of the next day-part, after the one in force at t, whose factor is
// lower than the current one's: the first such part going forward in time, wrapping past
// midnight. ok is false when no part of the day is cheaper than the current one.
func (m Model) CheaperFrom(t time.Time) (time.Time, bool) {
	cur := m.PartAt(t)
	n := len(m.DayParts)
	u := t.UTC()
	midnight := time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
	for step := 1; step < n; step++ {
		i := (cur + step) % n
		if m.DayParts[i].FactorBPS >= m.DayParts[cur].FactorBPS {
			continue
		}
		start := midnight.Add(time.Duration(m.DayParts[i].StartMinute) * time.Minute)
		if i <= cur { // wrapped past midnight: tomorrow's occurrence
			start = start.Add(24 * time.Hour)
		}
		return start, true
	}
	return time.Time{}, false
}

// HHMM renders a minute of the day as HH:MM; 1440 (the end of the day) is "24:00".
func HHMM(minute int) string { return fmt.Sprintf("%02d:%02d", minute/60, minute%60) }
