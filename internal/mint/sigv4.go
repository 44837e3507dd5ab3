package mint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/intentius/boxbroker/internal/cloud"
)

// UnsignedPayload is the payload hash of a body sent unsigned.
const UnsignedPayload = "UNSIGNED-PAYLOAD"

// SigV4 is an aws-sigv4 secret: AWS credentials, a region and a service.
// The broker signs each request with AWS Signature Version 4, using
// aws-sdk-go-v2's signer, over the body as sent.
type SigV4 struct {
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	SessionToken    string `json:"session_token,omitempty"`
	Region          string `json:"region"`
	Service         string `json:"service"`
	// UnsignedPayload says whether a body the broker does not read whole
	// is sent signed UNSIGNED-PAYLOAD; unset means yes for s3 alone, the
	// service known to take it.
	UnsignedPayload *bool `json:"unsigned_payload,omitempty"`
}

// Kind is "aws-sigv4".
func (s *SigV4) Kind() string { return KindSigV4 }

// Secrets are the secret key and the session token.
func (s *SigV4) Secrets() []string { return []string{s.SecretAccessKey, s.SessionToken} }

// sigv4Life is how long a SigV4 signature works: AWS takes a request up
// to 15 minutes from its X-Amz-Date; five minutes more for clocks apart.
const sigv4Life = 20 * time.Minute

// Life is sigv4Life.
func (s *SigV4) Life() time.Duration { return sigv4Life }

// Unsigned reports whether a long or streamed body may go unsigned.
func (s *SigV4) Unsigned() bool {
	if s.UnsignedPayload != nil {
		return *s.UnsignedPayload
	}
	return s.Service == "s3"
}

// Drop is every header of a SigV4 signature: the box's, made with its
// token as the access key, never goes on.
func (s *SigV4) Drop() []string {
	return []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"}
}

var serviceRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

func (s *SigV4) validate() error {
	const k = KindSigV4
	f := fields{kind: k}
	for _, m := range []struct{ name, v string }{
		{"access_key_id", s.AccessKeyID}, {"secret_access_key", s.SecretAccessKey}, {"region", s.Region}, {"service", s.Service},
	} {
		f.check(required(k, m.name, m.v))
	}
	f.want(cloud.IsAWSAccessKeyID(s.AccessKeyID), "access_key_id", "is not an AWS access key id (upper-case letters and digits, as AKIA…)")
	f.check(headerSafe(k, "secret_access_key", s.SecretAccessKey))
	f.check(headerSafe(k, "session_token", s.SessionToken))
	f.want(cloud.IsAWSRegion(s.Region), "region", "is not an AWS region the broker knows (as us-east-1)")
	f.want(serviceRE.MatchString(s.Service), "service", "is not an AWS service's signing name (as s3, sqs, execute-api)")
	return f.err
}

// Sign signs req with SigV4 over body (or UNSIGNED-PAYLOAD when unsigned).
func (s *SigV4) Sign(ctx context.Context, req *http.Request, body []byte, unsigned bool, now time.Time) ([]string, error) {
	hash := UnsignedPayload
	if !unsigned {
		sum := sha256.Sum256(body)
		hash = hex.EncodeToString(sum[:])
	}
	req.Header.Set("X-Amz-Content-Sha256", hash)
	creds := aws.Credentials{AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey, SessionToken: s.SessionToken}
	err := v4.NewSigner().SignHTTP(ctx, creds, req, hash, s.Service, s.Region, now.UTC(), func(o *v4.SignerOptions) {
		o.DisableURIPathEscaping = s.Service == "s3"
	})
	if err != nil {
		return nil, err
	}
	auth := req.Header.Get("Authorization")
	made := []string{auth}
	if _, sig, ok := strings.Cut(auth, "Signature="); ok {
		made = append(made, sig)
	}
	return made, nil
}
