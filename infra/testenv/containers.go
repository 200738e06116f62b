package testenv

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
)

// Containers are started only when the service variable is unset; they live until the test
// binary exits (the reaper removes them).

func containerPostgres() (string, error) {
	if !dockerUsable() {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := tcpostgres.Run(ctx, "postgres:16-alpine",
		tcpostgres.WithDatabase("postgres"), tcpostgres.WithUsername("postgres"), tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies())
	if err != nil {
		return "", err
	}
	return c.ConnectionString(ctx, "sslmode=disable")
}

func containerRedis() (string, error) {
	if !dockerUsable() {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := tcredis.Run(ctx, "redis:7-alpine")
	if err != nil {
		return "", err
	}
	return c.ConnectionString(ctx)
}

// dockerUsable asks testcontainers whether a container engine answers, without panicking
// when none is installed.
func dockerUsable() (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return false
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Health(ctx) == nil
}

// skipNoService skips a test that needs a service when neither the variable nor a container
// engine is available. It refuses to skip under CI, where the variables must be set.
func skipNoService(t testing.TB, service, env string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s: %s is unset in CI; .ci/run must export it", service, env)
	}
	t.Skipf("%s: set %s or run a container engine", service, env)
}
