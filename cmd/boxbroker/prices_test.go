package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLI_Prices: `boxbroker prices` prints the table with its date and
// what an unknown model is charged as; --json prints it as a price file
// that --prices takes back; --unpriced-as names a model of the table.
func TestCLI_Prices(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := run(t, dir, "", "prices")
	if code != 0 {
		t.Fatalf("prices = %d, %s", code, errs)
	}
	for _, want := range []string{"checked 20", "claude-opus-5-5", "4.00", "20.00", "claude-haiku-4-5", "as claude-opus-4-1 (--unpriced-as)"} {
		if !strings.Contains(out, want) {
			t.Errorf("prices printed %q, want it to contain %q", out, want)
		}
	}
	file, _, code := run(t, dir, "", "prices", "--json")
	if code != 0 || !strings.Contains(file, `"$checked"`) || !strings.Contains(file, `"claude-opus-5-5": {"input":4,"output":20,`) {
		t.Fatalf("prices --json = %d, %s", code, file)
	}
	path := filepath.Join(dir, "prices.json")
	edited := strings.Replace(file, `"claude-opus-5-5": {"input":4,`, `"claude-opus-5-5": {"input":40,`, 1)
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	again, errs, code := run(t, dir, "", "prices", "--prices", path, "--json")
	if code != 0 || again != edited {
		t.Errorf("prices --prices FILE --json = %d %s, want the file back:\n%s\ngot:\n%s", code, errs, edited, again)
	}
	out, _, code = run(t, dir, "", "prices", "--unpriced-as", "claude-haiku-4-5")
	if code != 0 || !strings.Contains(out, "as claude-haiku-4-5 (--unpriced-as)") {
		t.Errorf("prices --unpriced-as claude-haiku-4-5 = %d, %s", code, out)
	}
	if _, errs, code := run(t, dir, "", "prices", "--unpriced-as", "claude-nosuch"); code != 1 || !strings.Contains(errs, "claude-nosuch") {
		t.Errorf("prices --unpriced-as claude-nosuch = %d, %s, want 1 and an error naming it", code, errs)
	}
	if _, errs, code := run(t, dir, "", "prices", "extra"); code != 2 {
		t.Errorf("prices extra = %d, %s, want 2", code, errs)
	}
	if _, errs, code := run(t, dir, "", "help"); code != 0 || !strings.Contains(errs, "prices") {
		t.Errorf("help = %d, %s, want prices listed", code, errs)
	}
}
