package protocol

import "testing"

// benchDeclaration is a realistic kept report: four capabilities of this
// broker's, with the words a working box declares.
func benchDeclaration(b *testing.B) *Declaration {
	b.Helper()
	d, err := ParseDeclarationReport([]byte(`{"capabilities":[`+
		`{"name":"inference","broker":"lobby","scope":["agent","decide"]},`+
		`{"name":"egress","broker":"lobby","scope":["GITHUB","OPENAI","STRIPE_TEST"]},`+
		`{"name":"feedback","broker":"lobby","scope":["agent","passive"]},`+
		`{"name":"fountain","broker":"lobby","scope":["conversations","sandboxes"]},`+
		`{"name":"inference","broker":"door","scope":["agent"]}]}`), "lobby")
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func BenchmarkDeclaredRefusal_Allowed(b *testing.B) {
	d := benchDeclaration(b)
	b.ReportAllocs()
	for b.Loop() {
		if msg := DeclaredRefusal(d, "lobby", "fountain", "sandboxes"); msg != "" {
			b.Fatal(msg)
		}
	}
}

func BenchmarkDeclaredRefusal_Refused(b *testing.B) {
	d := benchDeclaration(b)
	b.ReportAllocs()
	for b.Loop() {
		if msg := DeclaredRefusal(d, "lobby", "egress", "SLACK"); msg == "" {
			b.Fatal("allowed")
		}
	}
}

func BenchmarkRefusalBody(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = RefusalBody(TypePermission, "This box's inference capability does not list agent in its scope (it lists decide). Add \"agent\" to that scope in the box block of its chant.workspace.json.")
	}
}
