//go:build tools

// Package infra pins modules that stages are about to use, so that parallel work never has
// to edit go.mod. Removed once every module is imported by real code.
package infra

import (
	_ "github.com/btcsuite/btcd/btcutil/hdkeychain"
	_ "github.com/fasthttp/router"
	_ "github.com/go-redis/redis_rate/v10"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/valyala/fasthttp"
	_ "github.com/valyala/fasthttp/fasthttpadaptor"
	_ "golang.org/x/sync/errgroup"
	_ "google.golang.org/protobuf/encoding/protowire"
)
