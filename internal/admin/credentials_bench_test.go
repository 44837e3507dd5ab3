package admin_test

import (
	"fmt"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/payer"
)

// BenchmarkListCredentials500 is GET /api/credentials over 500 visitors'
// credentials, each read and opened to say its kind.
func BenchmarkListCredentials500(b *testing.B) {
	br := brokertest.New(b, brokertest.Options{})
	for i := 0; i < 500; i++ {
		br.SetCredential(payer.VisitorAnthropic(fmt.Sprintf("github:v%d", i)), "sk-ant-api03-BENCH-0123456789")
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := br.Admin("GET", "/api/credentials", br.AdminToken, nil); r.StatusCode != 200 {
			b.Fatal(r.StatusCode)
		}
	}
}
