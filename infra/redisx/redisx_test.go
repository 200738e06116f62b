package redisx_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"rental/infra/redisx"
	"rental/infra/testenv"
)

func TestConnectAnswers(t *testing.T) {
	c, err := redisx.Connect(context.Background(), testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
}

func TestConnectNamesTheFixWhenDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = redisx.Connect(context.Background(), "redis://"+addr+"/0")
	if err == nil || !strings.Contains(err.Error(), "redis-server --daemonize yes") {
		t.Fatalf("want an error naming the start command, got %v", err)
	}
}
