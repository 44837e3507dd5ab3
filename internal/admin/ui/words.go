package ui

import (
	"fmt"
	"math"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/spend"
)

// reasonText is how the page names a refusal's reason: in words where
// the word alone would not say what happened.
func reasonText(reason string) string {
	switch reason {
	case capability.ReasonOutside:
		return "token used from outside its box"
	case capability.ReasonExpired:
		return "token expired"
	case capability.ReasonTokenSeen:
		return "a host holds the box's token"
	}
	return reason
}

// ratio writes a hit ratio as a percentage, "—" for none.
func ratio(r *float64) string {
	if r == nil {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", 100**r)
}

// usd writes dollars as the page shows them: to the cent from a dollar
// up, and below that to the micro-dollar, so that a small measured cost
// never reads as $0.00.
func usd(v float64) string {
	if math.Abs(v) >= 1 {
		return fmt.Sprintf("$%.2f", v)
	}
	return spend.FormatDollars(v)
}

// size writes a count of bytes as the page shows it: whole bytes below a
// kilobyte, and one decimal in kB, MB or GB (powers of 1000) above, the
// unit joined to the number by a no-break space.
func size(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%d\u00a0B", n)
	}
	v := float64(n)
	for _, unit := range []string{"kB", "MB", "GB"} {
		v /= 1000
		if v < 999.95 || unit == "GB" {
			return fmt.Sprintf("%.1f\u00a0%s", v, unit)
		}
	}
	return ""
}

func deref(p *string, none string) string {
	if p == nil {
		return none
	}
	return *p
}

func derefInt(p *int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

// ago says how long before now the protocol time at was.
func ago(at string, now time.Time) string {
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return at
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}
