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
// assumed through AWS STS with the access key (stscreds' AssumeRole
// provider, whose STS client goes through the Client's http.Client: its
// transport, TLS verified, no redirect) and held until RoleRefreshWindow
// before it expires, and for ReusedFor at least. made receives a
// session's values. A refused AssumeRole is a *refusal (stsRefusal).
func (cl *Client) awsCredentials(ctx context.Context, c *Credential, made func(string)) (aws.Credentials, error) {
	base := aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, SessionToken: c.SessionToken}
	if c.RoleARN == "" {
		return base, nil
	}
	creds, err := held(ctx, cl, &cl.sessions, c, func(ctx context.Context) (aws.Credentials, time.Time, error) {
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
		creds, err := stscreds.NewAssumeRoleProvider(sts.New(opts), c.RoleARN, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = RoleSessionName
			o.Duration = roleSessionDuration
			if c.ExternalID != "" {
				o.ExternalID = aws.String(c.ExternalID)
			}
		}).Retrieve(ctx)
		var ae smithy.APIError
		switch {
		case errors.As(err, &ae):
			return creds, time.Time{}, stsRefusal(ae.ErrorCode(), err)
		case err != nil:
			return creds, time.Time{}, errors.New("bedrock: AWS STS did not answer the AssumeRole call")
		}
		return creds, creds.Expires.Add(-RoleRefreshWindow), nil
	})
	if err != nil {
		return creds, err
	}
	made(creds.AccessKeyID)
	made(creds.SecretAccessKey)
	made(creds.SessionToken)
	return creds, nil
}

// stsRefusal is the box's answer to STS's error code (and the error's
// HTTP status): throttling is the 429 the pool cools the entry on, an
// outage a 500 api_error, and any other refusal (AccessDenied, a key STS
// does not know, an expired session of the key itself) the payer's auth
// failure, a 403 permission_error. It names the code, nothing of the
// credential.
func stsRefusal(code string, err error) *refusal {
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
		return &refusal{http.StatusTooManyRequests, fmt.Sprintf("AWS STS throttled the AssumeRole call of the Amazon Bedrock credential's role_arn (%s).", code)}
	case status >= 500:
		return &refusal{http.StatusInternalServerError, fmt.Sprintf("AWS STS failed the AssumeRole call of the Amazon Bedrock credential's role_arn (%s).", code)}
	}
	return &refusal{http.StatusForbidden, fmt.Sprintf(
		"AWS STS refused to assume the Amazon Bedrock credential's role_arn (%s): the operator checks the role's trust policy, the external_id and the key's sts:AssumeRole permission (docs/cloud.md).", code)}
}
