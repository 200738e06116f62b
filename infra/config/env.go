package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Env reads typed environment variables, an empty value counting as unset. A value it
// refuses leaves the default and adds one message naming the variable; Err reports every
// message at once, so one run shows all the mistakes. Load and the tools (the benchmarks,
// the chaos soak) read their variables through it.
type Env struct {
	errs  []string
	known map[string]bool // every name read, for Load's unknown-variable report
}

// NewEnv returns an empty reader.
func NewEnv() *Env { return &Env{known: map[string]bool{}} }

// Str is the variable's value, or def when it is unset or empty.
func (e *Env) Str(name, def string) string {
	e.known[name] = true
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// Duration is a positive Go duration ("3s", "2m").
func (e *Env) Duration(name string, def time.Duration) time.Duration {
	v := e.Str(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		e.Failf("%s=%q: want a positive duration such as 3s", name, v)
		return def
	}
	return d
}

// Int is a non-negative integer.
func (e *Env) Int(name string, def int) int { return e.intAtLeast(name, def, 0, "a non-negative") }

// PositiveInt is an integer above zero (def may be 0: "not set").
func (e *Env) PositiveInt(name string, def int) int { return e.intAtLeast(name, def, 1, "a positive") }

func (e *Env) intAtLeast(name string, def, least int, what string) int {
	v := e.Str(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		e.Failf("%s=%q: want %s integer", name, v, what)
		return def
	}
	return n
}

// Bool is true, false, 1 or 0 and nothing else, so "yes" or "ture" is refused rather than
// read as false.
func (e *Env) Bool(name string, def bool) bool {
	v := e.Str(name, "")
	switch v {
	case "":
		return def
	case "true", "1":
		return true
	case "false", "0":
		return false
	}
	e.Failf("%s=%q: want true, false, 1 or 0", name, v)
	return def
}

// Failf adds a message of the caller's own check.
func (e *Env) Failf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

// Err joins the messages ("; "), or is nil when every value was taken.
func (e *Env) Err() error {
	if len(e.errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(e.errs, "; "))
}
