package mint

import (
	"fmt"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// RateLimitedMark begins a kept state's Failure when the token endpoint
// limited the rate of mints (a *RateLimitedError) rather than refused.
const RateLimitedMark = "rate-limited: "

// State says, for the owner, where a secret stands: "" for a plain
// value, "signs each request" for a signing kind, and for a minted kind
// whether its token is valid and until when, or expired, or refused by
// the token endpoint (and what needs renewing), or rate-limited by it
// (which needs nothing renewed), or not minted yet.
// states are the box's kept states (store.Mints.ListMintStates); one
// kept for another configuration of the secret is not sec's. Never a
// value.
func State(sec store.Secret, states []store.MintState, now time.Time) string {
	switch sec.Kind {
	case "":
		return ""
	case KindSigV4, KindHMAC:
		return "signs each request"
	}
	for _, ms := range states {
		if ms.Name != sec.Name || ms.Of != Of(sec.Sealed) {
			continue
		}
		limited, isLimited := strings.CutPrefix(ms.Failure, RateLimitedMark)
		switch {
		case isLimited:
			return fmt.Sprintf("rate-limited by the token endpoint since %s, not refused: minted again when next used after the wait it asked (%s)",
				ms.UpdatedAt.UTC().Format(time.RFC3339), limited)
		case ms.Failure != "":
			what := "the OAuth grant needs renewing"
			if sec.Kind == KindGitHubApp {
				what = "the app's key or installation needs renewing"
			}
			return fmt.Sprintf("REFUSED since %s: %s (%s)", ms.UpdatedAt.UTC().Format(time.RFC3339), what, ms.Failure)
		case ms.ExpiresAt.IsZero():
			return "minted; no expiry given"
		case ms.ExpiresAt.After(now):
			return "token valid until " + ms.ExpiresAt.UTC().Format(time.RFC3339)
		default:
			return "token expired " + ms.ExpiresAt.UTC().Format(time.RFC3339) + "; minted again when next used"
		}
	}
	return "not minted yet"
}
