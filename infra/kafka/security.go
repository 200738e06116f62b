package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security is how clients authenticate to and encrypt their traffic with a managed Kafka
// cluster. The zero value is plaintext without authentication (the dev stack's embedded
// broker).
type Security struct {
	// TLS encrypts every connection (KAFKA_TLS). The server's certificate is checked against
	// CAFile when set, else against the system roots.
	TLS bool
	// CAFile is a PEM bundle of the CAs the brokers' certificates chain to
	// (KAFKA_TLS_CA_FILE).
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and key for mutual TLS
	// (KAFKA_TLS_CERT_FILE, KAFKA_TLS_KEY_FILE); both or neither.
	CertFile, KeyFile string
	// SASLMechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (KAFKA_SASL_MECHANISM); empty
	// means no SASL.
	SASLMechanism string
	// SASLUsername and SASLPassword are the credentials (KAFKA_SASL_USERNAME,
	// KAFKA_SASL_PASSWORD). Secret: never logged.
	SASLUsername, SASLPassword string
}

// SASLMechanisms are the mechanisms Security accepts.
var SASLMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// Opts returns the client options that apply s: a TLS dialer and the SASL mechanism, both
// franz-go's own. A file that cannot be read or a mechanism not in SASLMechanisms is an
// error naming the variable to fix.
func (s Security) Opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if s.TLS {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.CAFile != "" {
			pem, err := os.ReadFile(s.CAFile)
			if err != nil {
				return nil, fmt.Errorf("KAFKA_TLS_CA_FILE: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("KAFKA_TLS_CA_FILE %s: no PEM certificate in it", s.CAFile)
			}
			cfg.RootCAs = pool
		}
		if (s.CertFile == "") != (s.KeyFile == "") {
			return nil, errors.New("KAFKA_TLS_CERT_FILE and KAFKA_TLS_KEY_FILE: set both or neither")
		}
		if s.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("KAFKA_TLS_CERT_FILE/KAFKA_TLS_KEY_FILE: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		// franz-go sets ServerName per broker from the address it dials when it is empty.
		opts = append(opts, kgo.DialTLSConfig(cfg))
	} else if s.CAFile != "" || s.CertFile != "" {
		return nil, errors.New("KAFKA_TLS_CA_FILE or KAFKA_TLS_CERT_FILE is set but KAFKA_TLS is not true")
	}
	if s.SASLMechanism != "" {
		m, err := s.mechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func (s Security) mechanism() (sasl.Mechanism, error) {
	if s.SASLUsername == "" || s.SASLPassword == "" {
		return nil, errors.New("KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD are required with KAFKA_SASL_MECHANISM")
	}
	switch strings.ToUpper(s.SASLMechanism) {
	case "PLAIN":
		return plain.Auth{User: s.SASLUsername, Pass: s.SASLPassword}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.SASLUsername, Pass: s.SASLPassword}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.SASLUsername, Pass: s.SASLPassword}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("KAFKA_SASL_MECHANISM=%q: want one of %s", s.SASLMechanism, strings.Join(SASLMechanisms, ", "))
}

// CheckAuth pings the cluster through cl and returns an error naming the variables to fix
// when the brokers answered but refused the client: a wrong SASL secret or mechanism, or
// a TLS handshake that failed. Brokers that cannot be dialled at all are not its concern
// (nil): a stage starts and reports not ready until they answer. It returns within the
// client's dial and request timeouts instead of retrying a refusal forever.
func (s Security) CheckAuth(ctx context.Context, cl *kgo.Client) error {
	err := cl.Ping(ctx)
	if err == nil {
		return nil
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return nil
	}
	if ctx.Err() != nil {
		return nil
	}
	var cause string
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed) || (s.SASLMechanism != "" && isClosed(err)):
		cause = fmt.Sprintf("SASL %s authentication as %q failed: check KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD and KAFKA_SASL_MECHANISM", s.SASLMechanism, s.SASLUsername)
	case isTLSErr(err):
		cause = "TLS handshake failed: check KAFKA_TLS, KAFKA_TLS_CA_FILE and the client certificate"
	case !s.TLS && isClosed(err):
		cause = "the brokers closed the connection: if they require TLS or SASL set KAFKA_TLS and KAFKA_SASL_*"
	default:
		cause = "the brokers refused the client"
	}
	return fmt.Errorf("kafka: %s (%v)", cause, err)
}

func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

func isTLSErr(err error) bool {
	var rec tls.RecordHeaderError
	var unk x509.UnknownAuthorityError
	var host x509.HostnameError
	var inv x509.CertificateInvalidError
	var alert tls.AlertError
	return errors.As(err, &rec) || errors.As(err, &unk) || errors.As(err, &host) || errors.As(err, &inv) || errors.As(err, &alert)
}
