package admin_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/spend"
)

// TestAdmin_Prices: GET /api/prices is the table the broker charges by,
// its price file over the built-in table with its --unpriced-as, and
// reads back into the same table.
func TestAdmin_Prices(t *testing.T) {
	file := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(file, []byte(`{"$checked":"2026-11-30","$source":"our contract","claude-house-1":{"input":2,"output":9},"claude-3-haiku-20240307":null}`), 0o600); err != nil {
		t.Fatal(err)
	}
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) { c.Prices, c.UnpricedAs = file, "claude-house-1" }})
	var v operator.PriceTable
	decode(t, "GET /api/prices", b.Admin("GET", "/api/prices", b.AdminToken, nil), 200, &v)
	got, err := v.Prices()
	if err != nil {
		t.Fatalf("the answer's table: %v", err)
	}
	want, err := spend.LoadPrices(file)
	if err != nil {
		t.Fatal(err)
	}
	if want, err = want.WithUnpricedAs("claude-house-1"); err != nil {
		t.Fatal(err)
	}
	if v.Path != file || got.Checked() != "2026-11-30" || got.Source() != "our contract" || got.UnpricedAs() != "claude-house-1" ||
		!reflect.DeepEqual(got.Models(), want.Models()) || !reflect.DeepEqual(got.Removed(), []string{"claude-3-haiku-20240307"}) {
		t.Errorf("GET /api/prices = %s over %q, checked %s, unpriced as %s, removed %v; want the broker's table", v.Table, v.Path, got.Checked(), got.UnpricedAs(), got.Removed())
	}
	for _, id := range want.Models() {
		g, _ := got.Get(id)
		w, _ := want.Get(id)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("GET /api/prices prices %s at %+v, want %+v", id, g, w)
		}
	}
}
