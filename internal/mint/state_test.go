package mint

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// A token endpoint that echoes a value into its error code: the refusal
// kept for the owner (secret list, the owner's page) leaves it out.
func TestRefusedError_KeepsOnlyAPlainCode(t *testing.T) {
	for code, kept := range map[string]bool{
		"invalid_grant":               true,
		"":                            false,
		"rt_ECHOED-REFRESH-TOKEN":     false,
		"invalid grant":               false,
		strings.Repeat("a", 41):       false,
		"unauthorized_client":         true,
		"<script>alert(1)</script>":   false,
		"invalid_grant\nrt_ECHOED123": false,
	} {
		msg := (&RefusedError{Kind: KindOAuth2, Status: 400, Code: code}).Error()
		if got := code != "" && strings.Contains(msg, code); got != kept {
			t.Errorf("code %q: message %q keeps it = %v, want %v", code, msg, got, kept)
		}
	}
}

// A token endpoint answering, as its OAuth error code, the client secret
// or the refresh token it was sent, when that is letters and _ alone (a
// plain code's form): the refusal kept leaves it out. On the code
// before, it was kept as the code, in the mint's state and the audit
// message.
func TestOAuth2_ErrorCodeEchoingWhatWasSentIsNotKept(t *testing.T) {
	const secret, refresh = "client_secret_of_letters", "refresh_of_letters_only"
	// Each code the endpoint answers, and whether the refusal keeps it: a
	// plain code that holds nothing sent is kept.
	for name, tt := range map[string]struct {
		code string
		kept bool
	}{
		"the secret": {secret, false}, "the refresh token": {refresh, false},
		"a code holding the secret": {"invalid_" + secret, false}, "a plain code": {"invalid_grant", true},
	} {
		t.Run(name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":"` + tt.code + `"}`))
			}))
			defer ts.Close()
			o := &OAuth2{ClientID: "id", ClientSecret: secret, RefreshToken: refresh, Grant: GrantRefreshToken, TokenURL: ts.URL}
			_, err := o.mint(t.Context(), ts.Client(), time.Now(), "")
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("mint = %v, want a refusal", err)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), refresh) || strings.Contains(re.Code, secret) || strings.Contains(re.Code, refresh) {
				t.Errorf("the refusal keeps what was sent: %q (code %q)", err, re.Code)
			}
			if tt.kept && !strings.Contains(err.Error(), tt.code) {
				t.Errorf("mint = %v, want a refusal naming %s", err, tt.code)
			}
		})
	}
}

// TestState_RateLimitedIsNotRefused: a token endpoint's rate limit is
// shown to the owner as one, never as a grant or key to renew.
func TestState_RateLimitedIsNotRefused(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, kind := range []string{KindOAuth2, KindGitHubApp} {
		sec := store.Secret{Name: "API", Kind: kind, Sealed: []byte("sealed")}
		limited := &RateLimitedError{Kind: kind, Status: 429, Until: now.Add(time.Minute)}
		st := State(sec, []store.MintState{{Name: "API", Of: Of(sec.Sealed), Failure: RateLimitedMark + limited.Error(), UpdatedAt: now}}, now)
		if strings.Contains(st, "REFUSED") || strings.Contains(st, "renew") || !strings.Contains(st, "rate-limited") {
			t.Errorf("State(%s, rate-limited) = %q, want rate-limited, not refused", kind, st)
		}
	}
}

func TestRateLimited(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		status int
		header http.Header
		github bool
		want   time.Duration // the wait; -1 for no rate limit
	}{
		{"429, seconds", 429, http.Header{"Retry-After": {"7"}}, false, 7 * time.Second},
		{"429, a date", 429, http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, false, 90 * time.Second},
		{"429, nothing said", 429, nil, false, defaultLimited},
		{"429, zero", 429, http.Header{"Retry-After": {"0"}}, false, minLimited},
		{"429, a day", 429, http.Header{"Retry-After": {"86400"}}, false, maxLimited},
		{"429, past int64", 429, http.Header{"Retry-After": {"99999999999999999999"}}, false, maxLimited},
		{"429, a date past", 429, http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, false, minLimited},
		{"429, negative", 429, http.Header{"Retry-After": {"-5"}}, false, defaultLimited},
		{"429, garbage", 429, http.Header{"Retry-After": {"soon"}}, false, defaultLimited},
		{"github 403, garbage Retry-After, limit spent", 403, http.Header{"Retry-After": {"-1"}, "X-Ratelimit-Reset": {strconv.FormatInt(now.Add(2*time.Minute).Unix(), 10)}}, true, 2 * time.Minute},
		{"503 with Retry-After", 503, http.Header{"Retry-After": {"3"}}, false, 3 * time.Second},
		{"503 without", 503, nil, false, -1},
		{"400", 400, http.Header{"Retry-After": {"3"}}, false, -1},
		{"github 403, limit spent", 403, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(now.Add(2*time.Minute).Unix(), 10)}}, true, 2 * time.Minute},
		{"github 403 with Retry-After", 403, http.Header{"Retry-After": {"20"}}, true, 20 * time.Second},
		{"github 403, refused", 403, nil, true, -1},
		{"oauth2 403 with Retry-After", 403, http.Header{"Retry-After": {"20"}}, false, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rl := rateLimited(KindOAuth2, tt.status, tt.header, now, tt.github)
			switch {
			case tt.want < 0 && rl != nil:
				t.Errorf("rateLimited = %v, want none", rl)
			case tt.want >= 0 && rl == nil:
				t.Errorf("rateLimited = none, want a wait of %v", tt.want)
			case rl != nil && rl.Until.Sub(now) != tt.want:
				t.Errorf("wait = %v, want %v", rl.Until.Sub(now), tt.want)
			}
		})
	}
}
