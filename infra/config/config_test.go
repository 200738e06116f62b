package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBooleansAcceptOnlyTrueFalseOneZero(t *testing.T) {
	for _, v := range []string{"true", "1"} {
		t.Setenv("WEBHOOK_ALLOW_LOOPBACK", v)
		c, err := Load()
		if err != nil || !c.Webhook.AllowLoopback {
			t.Fatalf("%q: %v %v", v, c.Webhook.AllowLoopback, err)
		}
	}
	for _, v := range []string{"false", "0"} {
		t.Setenv("ALLOW_PROVIDER_SPILL", v)
		c, err := Load()
		if err != nil || c.Orders.AllowProviderSpill {
			t.Fatalf("%q: %v %v", v, c.Orders.AllowProviderSpill, err)
		}
	}
	t.Setenv("ALLOW_PROVIDER_SPILL", "true")
	for _, v := range []string{"yes", "on", "TRUE", "ture", "2"} {
		t.Setenv("KAFKA_TLS", v)
		if _, err := Load(); err == nil || !strings.Contains(err.Error(), "KAFKA_TLS=") {
			t.Fatalf("KAFKA_TLS=%q accepted: %v", v, err)
		}
	}
}

func TestUnknownVariablesWithTheServicePrefixesAreReported(t *testing.T) {
	t.Setenv("KAFKA_SASL_PASWORD", "x")       // misspelt
	t.Setenv("WEBHOOK_RETRY_DELAY", "15s")    // singular
	t.Setenv("KAFKA_SASL_PASSWORD", "secret") // known
	t.Setenv("KAFKA_SASL_MECHANISM", "SCRAM-SHA-256")
	t.Setenv("KAFKA_SASL_USERNAME", "u")
	t.Setenv("HOME_UNRELATED_THING", "x") // not our prefix
	t.Setenv("HTTP_PROXY", "http://proxy:3128")
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Unknown, []string{"KAFKA_SASL_PASWORD", "WEBHOOK_RETRY_DELAY"}) {
		t.Fatalf("unknown = %v", c.Unknown)
	}
}

func TestMainnetRefusesLocalhost(t *testing.T) {
	t.Setenv("NETWORK", "mainnet")
	t.Setenv("PUBLIC_HOST", "localhost")
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckDeployed(); err == nil || !strings.Contains(err.Error(), "PUBLIC_HOST") {
		t.Fatalf("mainnet with localhost: %v", err)
	}
	t.Setenv("PUBLIC_HOST", "api.example.com")
	if c, _ = Load(); c.CheckDeployed() != nil {
		t.Fatal("a real host refused")
	}
	t.Setenv("NETWORK", "nile")
	t.Setenv("PUBLIC_HOST", "localhost")
	if c, _ = Load(); c.CheckDeployed() != nil {
		t.Fatal("nile with localhost refused")
	}
}

// A 5m tier renting 40 s is the chaos soak's (the dev stack's) alone: a deployed edge refuses
// to start with it on any network, and the dev stack's range is checked at load.
func TestShortRentalIsTheDevStacksOnly(t *testing.T) {
	t.Setenv("NETWORK", "nile")
	t.Setenv("DEV_SHORT_RENTAL", "40s")
	c, err := Load()
	if err != nil || c.Orders.ShortRental != 40*time.Second {
		t.Fatalf("load: %v, %s", err, c.Orders.ShortRental)
	}
	if err := c.CheckDeployed(); err == nil || !strings.Contains(err.Error(), "DEV_SHORT_RENTAL") {
		t.Fatalf("a deployed edge with DEV_SHORT_RENTAL: %v", err)
	}
	t.Setenv("DEV_SHORT_RENTAL", "1s")
	if _, err := Load(); err == nil || !strings.Contains(err.Error(), "DEV_SHORT_RENTAL") {
		t.Fatalf("1s accepted: %v", err)
	}
}

func TestKafkaSASLNeedsCredentialsAndAKnownMechanism(t *testing.T) {
	t.Setenv("KAFKA_SASL_MECHANISM", "GSSAPI")
	if _, err := Load(); err == nil || !strings.Contains(err.Error(), "KAFKA_SASL_MECHANISM") {
		t.Fatalf("GSSAPI accepted: %v", err)
	}
	t.Setenv("KAFKA_SASL_MECHANISM", "scram-sha-512")
	if _, err := Load(); err == nil || !strings.Contains(err.Error(), "KAFKA_SASL_PASSWORD") {
		t.Fatalf("no credentials accepted: %v", err)
	}
}

func TestLogFormatAndLevel(t *testing.T) {
	t.Setenv("LOG_FORMAT", "xml")
	if _, err := Load(); err == nil {
		t.Fatal("LOG_FORMAT=xml accepted")
	}
	t.Setenv("LOG_FORMAT", "text")
	t.Setenv("LOG_LEVEL", "verbose")
	if _, err := Load(); err == nil {
		t.Fatal("LOG_LEVEL=verbose accepted")
	}
}
