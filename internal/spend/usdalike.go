package spend

import (
	"fmt"
	"strings"
)

// usdAlike returns a formatter of micro-dollars in dollars with as many
// decimals (2 to 6) as the finest of vals needs.
func usdAlike(vals ...int64) func(int64) string {
	decimals := 2
	for _, v := range vals {
		frac := strings.TrimRight(fmt.Sprintf("%06d", abs(v)%1_000_000), "0")
		decimals = max(decimals, len(frac))
	}
	return func(micros int64) string {
		sign := ""
		if micros < 0 {
			sign, micros = "-", -micros
		}
		frac := fmt.Sprintf("%06d", micros%1_000_000)[:decimals]
		return fmt.Sprintf("%s$%d.%s", sign, micros/1_000_000, frac)
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
