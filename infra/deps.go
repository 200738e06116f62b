//go:build tools

// Package infra pins modules that stages are about to use, so that parallel work never has
// to edit go.mod. Removed once every module is imported by real code.
package infra

import (
	_ "github.com/btcsuite/btcd/btcutil/hdkeychain"
	_ "github.com/go-redis/redis_rate/v10"
)
