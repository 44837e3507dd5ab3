package capability_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports_PointOneWay holds the layering: no capability imports the
// box-facing handler, and neither the admin API nor the meter imports a
// capability, so that who pays and what the owner manages never depend on
// one capability's code.
func TestImports_PointOneWay(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list imports with")
	}
	const mod = "github.com/intentius/boxbroker/internal/"
	capabilities := []string{"inference", "decide", "egress", "feedback", "fountain"}
	tests := []struct {
		pkg       string
		forbidden []string
	}{
		{"admin", append([]string{"broker"}, capabilities...)},
		{"spend", append([]string{"broker"}, capabilities...)},
	}
	for _, c := range capabilities {
		tests = append(tests, struct {
			pkg       string
			forbidden []string
		}{c, []string{"broker"}})
	}
	for _, tt := range tests {
		out, err := exec.Command(goBin, "list", "-deps", mod+tt.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", tt.pkg, err)
		}
		deps := strings.Fields(string(out))
		for _, f := range tt.forbidden {
			for _, d := range deps {
				if d == mod+f {
					t.Errorf("internal/%s imports internal/%s (directly or not); it must not", tt.pkg, f)
				}
			}
		}
	}
}
