package cloudtest

import (
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// STS answers AWS STS's AssumeRole (POST / at the Bedrock stand-in's
// address) as STS does, after checking what it checks: a SigV4
// signature (service sts) with the Bedrock stand-in's Creds, the role's
// ARN and the external id. It issues session credentials that its
// Bedrock stand-in takes until they expire.
type STS struct {
	// RoleARN is the role it lets Creds assume; ExternalID, when set, the
	// external id the call must carry. Set them before any request.
	RoleARN, ExternalID string
	// TTL is how long a session lasts (0: an hour). Set it before any
	// request.
	TTL time.Duration
	// Deny, when set, answers every AssumeRole with AccessDenied (403).
	Deny atomic.Bool
	// Assumed counts the sessions issued; Bad the calls refused.
	Assumed, Bad atomic.Int64

	bedrock *Bedrock // holds the sessions issued
}

// Expire makes every session issued so far expired, for the Bedrock
// stand-in (ExpiredTokenException), whatever their expiry said.
func (s *STS) Expire() {
	s.bedrock.mu.Lock()
	defer s.bedrock.mu.Unlock()
	for k, ses := range s.bedrock.sessions {
		ses.expires = time.Time{}
		s.bedrock.sessions[k] = ses
	}
}

// Minted returns the session credentials issued so far, in the order
// issued (their key ids count up).
func (s *STS) Minted() []aws.Credentials {
	s.bedrock.mu.Lock()
	defer s.bedrock.mu.Unlock()
	var out []aws.Credentials
	for _, id := range slices.Sorted(maps.Keys(s.bedrock.sessions)) {
		out = append(out, s.bedrock.sessions[id].creds)
	}
	return out
}

const stsNS = "https://sts.amazonaws.com/doc/2011-06-15/"

type stsErrorResponse struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	NS      string   `xml:"xmlns,attr"`
	Error   struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
	RequestID string `xml:"RequestId"`
}

type assumeRoleResponse struct {
	XMLName xml.Name `xml:"AssumeRoleResponse"`
	NS      string   `xml:"xmlns,attr"`
	Result  struct {
		Credentials struct {
			AccessKeyID     string `xml:"AccessKeyId"`
			SecretAccessKey string `xml:"SecretAccessKey"`
			SessionToken    string `xml:"SessionToken"`
			Expiration      string `xml:"Expiration"`
		} `xml:"Credentials"`
		AssumedRoleUser struct {
			AssumedRoleID string `xml:"AssumedRoleId"`
			Arn           string `xml:"Arn"`
		} `xml:"AssumedRoleUser"`
	} `xml:"AssumeRoleResult"`
	RequestID string `xml:"ResponseMetadata>RequestId"`
}

func (s *STS) refuse(w http.ResponseWriter, status int, code, msg string) {
	e := stsErrorResponse{NS: stsNS, RequestID: "standin-request"}
	e.Error.Type, e.Error.Code, e.Error.Message = "Sender", code, msg
	b, _ := xml.Marshal(e)
	refused(w, &s.Bad, status, "text/xml", b)
}

func (s *STS) serve(w http.ResponseWriter, r *http.Request, body []byte) {
	base := s.bedrock.Creds
	_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	if keyID, _, _ := strings.Cut(cred, "/"); keyID != base.AccessKeyID {
		s.refuse(w, http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid.")
		return
	}
	if err := verify(r, body, base, "sts", s.bedrock.Region); err != nil {
		s.refuse(w, http.StatusForbidden, "SignatureDoesNotMatch", err.Error())
		return
	}
	form, err := url.ParseQuery(string(body))
	if r.Method != http.MethodPost || err != nil || form.Get("Action") != "AssumeRole" || form.Get("Version") != "2011-06-15" {
		s.refuse(w, http.StatusBadRequest, "InvalidAction", "Could not find operation")
		return
	}
	d, err := strconv.Atoi(form.Get("DurationSeconds"))
	if form.Get("RoleSessionName") == "" || err != nil || d < 900 || d > 43200 {
		s.refuse(w, http.StatusBadRequest, "ValidationError", "RoleSessionName and DurationSeconds (900 to 43200) are required")
		return
	}
	if s.Deny.Load() || form.Get("RoleArn") != s.RoleARN || form.Get("ExternalId") != s.ExternalID {
		s.refuse(w, http.StatusForbidden, "AccessDenied", "User: arn:aws:iam::123456789012:user/standin is not authorized to perform: sts:AssumeRole on resource: "+form.Get("RoleArn"))
		return
	}
	n := s.Assumed.Add(1)
	ttl := s.TTL
	if ttl == 0 {
		ttl = time.Hour
	}
	expires := time.Now().Add(ttl).UTC().Truncate(time.Second)
	creds := aws.Credentials{
		AccessKeyID:     fmt.Sprintf("ASIASTANDINSESSION%04d", n),
		SecretAccessKey: fmt.Sprintf("session/Secret+%04d%s", n, strings.Repeat("s", 24)),
		SessionToken:    fmt.Sprintf("IQoJb3JpZ2luX2VjEStandInSessionToken%04d%s", n, strings.Repeat("t", 64)),
	}
	s.bedrock.mu.Lock()
	if s.bedrock.sessions == nil {
		s.bedrock.sessions = map[string]session{}
	}
	s.bedrock.sessions[creds.AccessKeyID] = session{creds: creds, expires: expires}
	s.bedrock.mu.Unlock()
	var out assumeRoleResponse
	out.NS, out.RequestID = stsNS, "standin-request"
	c := &out.Result.Credentials
	c.AccessKeyID, c.SecretAccessKey, c.SessionToken = creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken
	c.Expiration = expires.Format(time.RFC3339)
	out.Result.AssumedRoleUser.AssumedRoleID = "AROASTANDIN00000000001:" + form.Get("RoleSessionName")
	out.Result.AssumedRoleUser.Arn = "arn:aws:sts::123456789012:assumed-role/standin-bedrock/" + form.Get("RoleSessionName")
	b, _ := xml.Marshal(out)
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write(b)
}
