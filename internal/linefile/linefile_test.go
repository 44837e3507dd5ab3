package linefile

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestEach_BoundsALine: Each passes every line of at most max bytes
// whole (the last with no newline too), and one longer to long alone,
// with its offset and length.
func TestEach_BoundsALine(t *testing.T) {
	in := "1234567\n" + "123456789\n" + "12345678" + strings.Repeat("x", 3*readBuf) + "\n" + "ab\n" + "end"
	var got []string
	err := Each(strings.NewReader(in), 8, func(off int64, line []byte) error {
		got = append(got, fmt.Sprintf("%d:%q", off, line))
		return nil
	}, func(off, n int64) error {
		got = append(got, fmt.Sprintf("%d:long %d", off, n))
		return nil
	})
	long := 8 + 3*readBuf + 1
	want := []string{`0:"1234567\n"`, "8:long 10", fmt.Sprintf("18:long %d", long), fmt.Sprintf("%d:\"ab\\n\"", 18+long), fmt.Sprintf("%d:\"end\"", 21+long)}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("Each = %v, %v; want %v", got, err, want)
	}
}
