package stages

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"rental/infra/config"
)

// tlsBroker starts kfake with TLS (a certificate for 127.0.0.1 from a fresh CA written to
// caFile) and SASL with one SCRAM-SHA-512 user.
func tlsBroker(t *testing.T, user, pass string) (addr, caFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", user, pass))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0], caFile
}

func TestKafkaOverTLSWithSCRAM(t *testing.T) {
	addr, caFile := tlsBroker(t, "rental", "right-secret")
	cfg := config.Config{KafkaBrokers: []string{addr}, Kafka: config.Kafka{
		TLS: true, CAFile: caFile, SASLMechanism: "SCRAM-SHA-512", SASLUsername: "rental", SASLPassword: "right-secret"}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	cl, err := KafkaProducer(ctx, cfg) // connects and creates the topic catalogue
	if err != nil {
		t.Fatalf("stage over TLS with SCRAM: %v", err)
	}
	cl.Close()

	t.Run("wrong password fails fast", func(t *testing.T) {
		bad := cfg
		bad.Kafka.SASLPassword = "wrong-secret"
		start := time.Now()
		_, err := KafkaProducer(ctx, bad)
		if err == nil {
			t.Fatal("connected with a wrong password")
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("wrong password took %v to fail", took)
		}
		if msg := err.Error(); !strings.Contains(strings.ToLower(msg), "sasl") && !strings.Contains(strings.ToLower(msg), "authentica") {
			t.Fatalf("error does not say authentication failed: %v", err)
		}
		if strings.Contains(err.Error(), "wrong-secret") {
			t.Fatalf("error echoes the password: %v", err)
		}
	})
	t.Run("plaintext client to a TLS broker fails", func(t *testing.T) {
		plain := cfg
		plain.Kafka.TLS, plain.Kafka.CAFile = false, ""
		tctx, cancel := context.WithTimeout(ctx, 8*time.Second)
		defer cancel()
		if _, err := KafkaProducer(tctx, plain); err == nil {
			t.Fatal("plaintext connected to a TLS listener")
		}
	})
}
