package cloud

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Role sessions: how long one is asked for, and how long before its
// expiry a new one is fetched.
const (
	roleSessionDuration = time.Hour
	// RoleRefreshWindow is how long before a role session's expiry the
	// broker assumes the role again.
	RoleRefreshWindow = 5 * time.Minute
	// RoleSessionName is the AssumeRole call's session name (CloudTrail
	// shows it).
	RoleSessionName = "boxbroker"
)

// awsCredentials returns what a Bedrock call of c is signed with: c's
// access key, or when c names a role_arn, a session of that role,
// assumed through AWS STS with the access key and kept until shortly
// before it expires, and for ReusedFor at least. made receives a session's values. A refused
// AssumeRole is the Anthropic shape's 403 permission_error, naming STS's
// error code and nothing of the credential.
func (cl *Client) awsCredentials(ctx context.Context, c *Credential, made func(string)) (aws.Credentials, *http.Response, error) {
	base := aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken}
	if c.RoleARN == "" {
		return base, nil, nil
	}
	if resp, err, ok := cl.failedLately(c); ok {
		return aws.Credentials{}, resp, err
	}
	creds, err := cl.roleSessions(c, base).value(ctx)
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			resp, _ := cl.fail(c, stsRefusal(ae.ErrorCode(), err), nil)
			return aws.Credentials{}, resp, nil
		}
		if ctx.Err() != nil {
			return aws.Credentials{}, nil, ctx.Err()
		}
		_, err := cl.fail(c, nil, errors.New("bedrock: AWS STS did not answer the AssumeRole call"))
		return aws.Credentials{}, nil, err
	}
	made(creds.AccessKeyID)
	made(creds.SecretAccessKey)
	made(creds.SessionToken)
	return creds, nil, nil
}

// stsRefusal is the box's answer to STS's error code (and the error's
// HTTP status): throttling is the 429 the pool cools the entry on, an
// outage a 500 api_error, and any other refusal (AccessDenied, a key STS
// does not know, an expired session of the key itself) the payer's auth
// failure, a 403 permission_error. It names the code, nothing of the
// credential.
func stsRefusal(code string, err error) *http.Response {
	if !awsCodeRE.MatchString(code) {
		code = "an error"
	}
	status := 0
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	switch {
	case awsStatus(code, status) == http.StatusTooManyRequests:
		return errorAnswer(http.StatusTooManyRequests, fmt.Sprintf("AWS STS throttled the AssumeRole call of the Amazon Bedrock credential's role_arn (%s).", code))
	case status >= 500:
		return errorAnswer(http.StatusInternalServerError, fmt.Sprintf("AWS STS failed the AssumeRole call of the Amazon Bedrock credential's role_arn (%s).", code))
	}
	return errorAnswer(http.StatusForbidden, fmt.Sprintf(
		"AWS STS refused to assume the Amazon Bedrock credential's role_arn (%s): the operator checks the role's trust policy, the external_id and the key's sts:AssumeRole permission (docs/cloud.md).", code))
}

// roleSessions returns the cached sessions of c's role, or makes the
// cache: an aws.CredentialsCache (one AssumeRole at a time, a session
// kept until RoleRefreshWindow before its expiry, and for ReusedFor at
// least) over stscreds' AssumeRole provider, whose STS client goes
// through the Client's http.Client (its transport, TLS verified, no
// redirect).
func (cl *Client) roleSessions(c *Credential, base aws.Credentials) *reused[aws.Credentials] {
	rc, _ := cached(&cl.mu, &cl.roles, c, func() (*reused[aws.Credentials], error) {
		opts := sts.Options{
			Region:      c.Region,
			Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return base, nil }),
			HTTPClient:  cl.httpClient(),
			// No retry: the box's call waits on this one, and the pool
			// fails over on its refusal.
			Retryer: aws.NopRetryer{},
		}
		if c.STSEndpoint != "" {
			opts.BaseEndpoint = aws.String(c.STSEndpoint)
		}
		prov := stscreds.NewAssumeRoleProvider(sts.New(opts), c.RoleARN, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = RoleSessionName
			o.Duration = roleSessionDuration
			if c.ExternalID != "" {
				o.ExternalID = aws.String(c.ExternalID)
			}
		})
		sessions := aws.NewCredentialsCache(prov, func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = RoleRefreshWindow })
		return &reused[aws.Credentials]{get: sessions.Retrieve, drop: sessions.Invalidate, now: cl.now}, nil
	})
	return rc
}

// forgetRoleSession drops the cached session of c's role, if any, at
// most once each ReusedFor: the next call assumes the role anew.
func (cl *Client) forgetRoleSession(c *Credential) {
	key := credKey(c)
	cl.mu.Lock()
	rc := cl.roles[key]
	cl.mu.Unlock()
	if rc != nil {
		rc.forget()
	}
}
