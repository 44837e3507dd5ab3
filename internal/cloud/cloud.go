// Package cloud makes the box's Anthropic API calls through a cloud that
// sells Claude: Amazon Bedrock or Google Vertex AI. The box keeps
// speaking the Anthropic API; a Client turns each call into the cloud's
// form, signs it with the payer's cloud credential, and turns the answer
// back into the Anthropic API's: its JSON, its server-sent events, its
// error shape and statuses.
//
// A cloud credential is sealed and stored like an Anthropic key, as the
// JSON Check returns: an object whose "kind" member is "bedrock" or
// "vertex". No Anthropic key or setup token begins with "{", so Is tells
// the two apart from the plaintext alone, wherever a credential is
// opened: the shared credential, an entry of the pool, an owner's or a
// visitor's.
package cloud

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/oauth2/google"
)

// Kinds of credential.
const (
	// KindAnthropic is an Anthropic API key or setup token.
	KindAnthropic = "anthropic"
	// KindBedrock is an AWS access key for Amazon Bedrock.
	KindBedrock = "bedrock"
	// KindVertex is a Google service account's key for Vertex AI.
	KindVertex = "vertex"
)

// Kinds are the kinds a credential may be, as `--kind` takes them.
var Kinds = []string{KindAnthropic, KindBedrock, KindVertex}

// Credential is a cloud credential as stored (Check's JSON).
type Credential struct {
	// Kind is KindBedrock or KindVertex.
	Kind string `json:"kind"`
	// Region is the AWS region (us-east-1) or the Vertex AI location
	// (us-east5, europe-west1, or global).
	Region string `json:"region"`
	// Endpoint, when set, is the base URL calls go to in place of the
	// region's public endpoint (such as a VPC endpoint): https, with a
	// host and no credentials, query or fragment.
	Endpoint string `json:"endpoint,omitempty"`
	// Models maps an Anthropic model name to the cloud's model id (or a
	// Bedrock inference profile), before the built-in table.
	Models map[string]string `json:"models,omitempty"`
	// Betas, when set, are the anthropic-beta values the cloud is sent
	// (others are dropped), in place of the default (BedrockBetas on
	// Bedrock, every one on Vertex AI); ["*"] passes every one on, []
	// none.
	Betas []string `json:"betas,omitzero"`

	// AccessKeyID, SecretAccessKey and SessionToken are Bedrock's AWS
	// credentials.
	AccessKeyID     string `json:"access_key_id,omitempty"`
	SecretAccessKey string `json:"secret_access_key,omitempty"`
	SessionToken    string `json:"session_token,omitempty"`
	// RoleARN, when set, is the IAM role whose sessions (assumed through
	// AWS STS with the access key above) sign the Bedrock calls;
	// ExternalID is the AssumeRole call's external id, and STSEndpoint
	// (an https base URL, such as a VPC endpoint) is where it goes in
	// place of the region's STS endpoint.
	RoleARN     string `json:"role_arn,omitempty"`
	ExternalID  string `json:"external_id,omitempty"`
	STSEndpoint string `json:"sts_endpoint,omitempty"`
	// Profile, when set, is the Bedrock cross-region inference profile
	// (Profiles) the built-in table's ids are sent through:
	// "<profile>.<id>". Models' ids are sent as given.
	Profile string `json:"profile,omitempty"`

	// ProjectID is the Google Cloud project Vertex AI bills (default:
	// the service account's own project_id).
	ProjectID string `json:"project_id,omitempty"`
	// ServiceAccount is the service account's JSON key, as Google Cloud
	// gives it.
	ServiceAccount json.RawMessage `json:"service_account,omitempty"`
}

// Is reports whether the plaintext credential v is a cloud credential
// (Check's JSON) rather than an Anthropic key or setup token.
func Is(v []byte) bool { return len(v) > 0 && v[0] == '{' }

// Parse reads a stored cloud credential. Its error holds no value.
func Parse(v []byte) (*Credential, error) {
	var c Credential
	if err := json.Unmarshal(v, &c); err != nil {
		return nil, errors.New("the stored cloud credential is not valid JSON")
	}
	if c.Kind != KindBedrock && c.Kind != KindVertex {
		return nil, errors.New("the stored cloud credential names no kind the broker knows")
	}
	return &c, nil
}

// Name is the cloud's name for people: "Amazon Bedrock" or "Google Vertex AI".
func Name(kind string) string {
	switch kind {
	case KindBedrock:
		return "Amazon Bedrock"
	case KindVertex:
		return "Google Vertex AI"
	}
	return "the Anthropic API"
}

// MaxValue bounds the JSON of a cloud credential, as read from stdin.
const MaxValue = 64 << 10

// Profiles are the Bedrock cross-region inference profiles a credential's
// "profile" may name.
var Profiles = []string{"global", "us", "eu", "apac", "jp", "au", "us-gov"}

var (
	roleARNRE      = regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}$`)
	externalIDRE   = regexp.MustCompile(`^[A-Za-z0-9+=,.@:/_-]+$`)
	accessKeyRE    = regexp.MustCompile(`^[A-Z0-9]{16,128}$`)
	vertexRegionRE = regexp.MustCompile(`^([a-z]+-[a-z]+[0-9]{1,2}|global|us|eu)$`)
	projectRE      = regexp.MustCompile(`^[a-z][a-z0-9-]{4,61}[a-z0-9]$`)
)

// awsRegions are the AWS regions, commercial, China and GovCloud, as of
// this writing, each between spaces: a region not among them is refused
// where one is given (a Bedrock account, an aws-sigv4 secret), to catch
// a misspelling; the list grows with AWS's.
const awsRegions = " us-east-1 us-east-2 us-west-1 us-west-2 af-south-1 ap-east-1 ap-east-2 ap-south-1 ap-south-2" +
	" ap-southeast-1 ap-southeast-2 ap-southeast-3 ap-southeast-4 ap-southeast-5 ap-southeast-6 ap-southeast-7" +
	" ap-northeast-1 ap-northeast-2 ap-northeast-3 ca-central-1 ca-west-1 eu-central-1 eu-central-2" +
	" eu-west-1 eu-west-2 eu-west-3 eu-south-1 eu-south-2 eu-north-1 il-central-1 me-south-1 me-central-1" +
	" mx-central-1 sa-east-1 cn-north-1 cn-northwest-1 us-gov-east-1 us-gov-west-1 "

// IsAWSRegion reports whether r is an AWS region the broker knows
// (us-east-1): the one rule for every AWS region a credential or secret
// names.
func IsAWSRegion(r string) bool {
	return r != "" && !strings.Contains(r, " ") && strings.Contains(awsRegions, " "+r+" ")
}

// IsAWSAccessKeyID reports whether id has an AWS access key id's form
// (upper-case letters and digits, as AKIA… or ASIA…): the one rule for
// every access key id a credential or secret names.
func IsAWSAccessKeyID(id string) bool { return accessKeyRE.MatchString(id) }

// Check reads the JSON an operator gives for a credential of kind
// (KindBedrock or KindVertex) and returns the form to seal: compact JSON
// with its "kind". Its errors name the field at fault and never hold a
// secret's value.
func Check(kind string, raw []byte) ([]byte, error) {
	if kind != KindBedrock && kind != KindVertex {
		return nil, fmt.Errorf("--kind is one of %s", strings.Join(Kinds, ", "))
	}
	if len(raw) > MaxValue {
		return nil, fmt.Errorf("the %s credential is over %d bytes", kind, MaxValue)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c Credential
	if err := dec.Decode(&c); err != nil {
		return nil, jsonProblem(kind, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("the %s credential is one JSON object; more follows it", kind)
	}
	if c.Kind != "" && c.Kind != kind {
		return nil, fmt.Errorf("the JSON says kind %q, but --kind is %s", safeWord(c.Kind), kind)
	}
	c.Kind = kind
	var err error
	if kind == KindBedrock {
		err = c.checkBedrock()
	} else {
		err = c.checkVertex()
	}
	if err != nil {
		return nil, err
	}
	if err := c.checkCommon(); err != nil {
		return nil, err
	}
	return json.Marshal(&c)
}

// jsonProblem says what is wrong with a credential's JSON without any of
// its text: a syntax error's offset, a member's name or type.
func jsonProblem(kind string, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("the %s credential is not valid JSON (at byte %d); pipe a JSON object in, as docs/cloud.md shows", kind, se.Offset)
	case errors.As(err, &te):
		return fmt.Errorf("the %s credential's %q member must be a %s", kind, te.Field, te.Type.String())
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("the %s credential has a member the broker does not know: %s", kind, strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return fmt.Errorf("the %s credential is not a JSON object; pipe one in, as docs/cloud.md shows", kind)
}

func (c *Credential) checkBedrock() error {
	if c.ProjectID != "" || len(c.ServiceAccount) > 0 {
		return errors.New("project_id and service_account belong to a vertex credential, not a bedrock one")
	}
	if c.RoleARN != "" && !roleARNRE.MatchString(c.RoleARN) {
		return errors.New("role_arn is not an IAM role's ARN (arn:aws:iam::123456789012:role/NAME)")
	}
	if c.Region == "" {
		return errors.New("the bedrock credential needs region, an AWS region such as us-east-1")
	}
	if !IsAWSRegion(c.Region) {
		return fmt.Errorf("region %s is no AWS region the broker knows: one is written as us-east-1, eu-west-3 or us-gov-west-1 (the regions Bedrock runs in are listed at %s)", quotedRegion(c.Region), BedrockRegionsURL)
	}
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return errors.New("the bedrock credential needs access_key_id and secret_access_key")
	}
	if !IsAWSAccessKeyID(c.AccessKeyID) {
		return errors.New("access_key_id is not an AWS access key id (upper-case letters and digits, as AKIA… or ASIA…)")
	}
	for _, f := range []struct{ name, v string }{{"secret_access_key", c.SecretAccessKey}, {"session_token", c.SessionToken}} {
		if strings.IndexFunc(f.v, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
			return fmt.Errorf("%s holds a space or control character", f.name)
		}
	}
	if c.RoleARN == "" && (c.ExternalID != "" || c.STSEndpoint != "") {
		return errors.New("external_id and sts_endpoint go with role_arn, which the bedrock credential does not name")
	}
	if c.ExternalID != "" && (len(c.ExternalID) < 2 || len(c.ExternalID) > 1224 || !externalIDRE.MatchString(c.ExternalID)) {
		return errors.New("external_id is 2 to 1224 letters, digits or +=,.@:/_-")
	}
	if err := checkHTTPS("sts_endpoint", &c.STSEndpoint, false); err != nil {
		return err
	}
	if c.Profile != "" && !slices.Contains(Profiles, c.Profile) {
		return fmt.Errorf("profile is the cross-region inference profile built-in model ids are sent through: one of %s", strings.Join(Profiles, ", "))
	}
	return nil
}

// serviceAccount is what the broker reads of a service account's JSON key.
type serviceAccount struct {
	Type         string `json:"type"`
	ProjectID    string `json:"project_id"`
	ClientEmail  string `json:"client_email"`
	PrivateKeyID string `json:"private_key_id"`
	PrivateKey   string `json:"private_key"`
	TokenURI     string `json:"token_uri"`
}

func (c *Credential) checkVertex() error {
	if c.AccessKeyID != "" || c.SecretAccessKey != "" || c.SessionToken != "" || c.RoleARN != "" ||
		c.ExternalID != "" || c.STSEndpoint != "" || c.Profile != "" {
		return errors.New("access_key_id, secret_access_key, session_token, role_arn, external_id, sts_endpoint and profile belong to a bedrock credential, not a vertex one")
	}
	if c.Region == "" {
		return errors.New("the vertex credential needs region, a Vertex AI location such as us-east5, europe-west1 or global")
	}
	if !vertexRegionRE.MatchString(c.Region) {
		return fmt.Errorf("region %s is no Vertex AI location the broker knows: one is written as us-east5, europe-west1, global, us or eu (the locations Claude runs in are listed at %s)", quotedRegion(c.Region), VertexLocationsURL)
	}
	if len(c.ServiceAccount) == 0 {
		return errors.New("the vertex credential needs service_account, the service account's JSON key as Google Cloud gives it")
	}
	var sa serviceAccount
	if err := json.Unmarshal(c.ServiceAccount, &sa); err != nil {
		return errors.New("service_account is not a JSON object (the service account's key file)")
	}
	if sa.Type != "service_account" {
		return errors.New(`service_account's "type" is not "service_account": give a service account's JSON key`)
	}
	if sa.ClientEmail == "" || sa.PrivateKey == "" {
		return errors.New("service_account needs client_email and private_key")
	}
	if err := checkHTTPS("service_account's token_uri", &sa.TokenURI, true); err != nil {
		return err
	}
	cfg, err := google.JWTConfigFromJSON(c.ServiceAccount, Scope)
	if err != nil {
		return errors.New("service_account is not a key golang.org/x/oauth2/google can read")
	}
	if err := checkPrivateKey(cfg.PrivateKey); err != nil {
		return err
	}
	if c.ProjectID == "" {
		c.ProjectID = sa.ProjectID
	}
	if !projectRE.MatchString(c.ProjectID) {
		return errors.New("the vertex credential needs project_id (or the key's own), a Google Cloud project id such as my-project-123")
	}
	// The key is kept compact: one line, as every sealed value is.
	var b bytes.Buffer
	if err := json.Compact(&b, c.ServiceAccount); err != nil {
		return errors.New("service_account is not valid JSON")
	}
	c.ServiceAccount = b.Bytes()
	return nil
}

func (c *Credential) checkCommon() error {
	if err := checkHTTPS("endpoint", &c.Endpoint, false); err != nil {
		return err
	}
	if len(c.Models) > 256 {
		return errors.New("models maps at most 256 model names")
	}
	for k, v := range c.Models {
		if !printable(k, 200) || !printable(v, 2048) {
			return errors.New("models maps Anthropic model names to the cloud's model ids: each non-empty, printable, with no space")
		}
	}
	if len(c.Betas) > maxBetas {
		return fmt.Errorf("betas lists at most %d anthropic-beta values", maxBetas)
	}
	for _, b := range c.Betas {
		if !printable(b, 200) || strings.Contains(b, ",") {
			return errors.New(`betas lists anthropic-beta values (such as "context-1m-2025-08-07"), or is ["*"]: each non-empty, printable, with no space or comma`)
		}
	}
	return nil
}

// checkHTTPS checks that *v, when set, is an https URL with a host and
// no credentials, query or fragment (a path only when path is true),
// without echoing it; its error names field. Without path, *v becomes
// the URL as a base URL (with no trailing slash).
func checkHTTPS(field string, v *string, path bool) error {
	if *v == "" {
		return nil
	}
	u, err := url.Parse(*v)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return errors.New(field + ": is an https URL with a host and no credentials, query or fragment")
	}
	if path {
		return nil
	}
	if strings.Trim(u.Path, "/") != "" {
		return errors.New(field + ": is an https base URL with no path")
	}
	u.Path = ""
	*v = u.String()
	return nil
}

func printable(s string, max int) bool {
	return s != "" && len(s) <= max && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || r == ' ' }) < 0
}

// safeWord is s when it is a short word, or "?" (it may be anything the
// operator pasted).
// BedrockRegionsURL and VertexLocationsURL list the regions where each
// cloud serves Claude, for a refusal of a region the broker does not
// know.
const (
	BedrockRegionsURL  = "https://docs.aws.amazon.com/general/latest/gr/bedrock.html"
	VertexLocationsURL = "https://cloud.google.com/vertex-ai/generative-ai/docs/learn/locations"
)

// quotedRegion is region, quoted, when it is short and written as a
// region is (lower-case letters, digits, "-"), else "?": a refusal
// never repeats what may be a pasted secret.
func quotedRegion(s string) string {
	if len(s) <= 32 && strings.IndexFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') }) < 0 {
		return strconv.Quote(s)
	}
	return "?"
}

func safeWord(s string) string {
	if len(s) <= 16 && strings.IndexFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r == '-') }) < 0 {
		return s
	}
	return "?"
}

// Secrets are the values of c that must never reach a box: the AWS keys
// and session token, or the service account's key id and each line of
// its private key's PEM body (lines, not the whole: a value with a line
// break in it would keep an answer's events from passing one by one).
func (c *Credential) Secrets() []string {
	if c.Kind == KindBedrock {
		return []string{c.AccessKeyID, c.SecretAccessKey, c.SessionToken}
	}
	var sa serviceAccount
	_ = json.Unmarshal(c.ServiceAccount, &sa)
	out := []string{sa.PrivateKeyID}
	for _, line := range strings.FieldsFunc(sa.PrivateKey, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if len(line) >= 16 && !strings.HasPrefix(line, "-----") {
			out = append(out, line)
		}
	}
	return out
}
