package sso

import (
	"strings"
	"testing"
)

func TestRoleOf(t *testing.T) {
	tests := []struct {
		name      string
		claim     string
		operators []string
		viewers   []string
		claims    map[string]any
		want      Role
		wantOK    bool
	}{
		{"operator by email", "email", []string{"a@x.com"}, nil, map[string]any{"email": "a@x.com", "email_verified": true}, Operator, true},
		{"unverified email", "email", []string{"a@x.com"}, []string{"*"}, map[string]any{"email": "a@x.com", "email_verified": false}, "", false},
		{"viewer by email", "email", []string{"a@x.com"}, []string{"b@x.com"}, map[string]any{"email": "b@x.com", "email_verified": true}, Viewer, true},
		{"stranger", "email", []string{"a@x.com"}, []string{"b@x.com"}, map[string]any{"email": "c@x.com", "email_verified": true}, "", false},
		{"everyone a viewer", "email", []string{"a@x.com"}, []string{"*"}, map[string]any{"email": "c@x.com", "email_verified": true}, Viewer, true},
		{"operator by group", "groups", []string{"ops"}, []string{"staff"}, map[string]any{"groups": []any{"staff", "ops"}}, Operator, true},
		{"viewer by group", "groups", []string{"ops"}, []string{"staff"}, map[string]any{"groups": []any{"staff"}}, Viewer, true},
		{"group claim not a list of strings", "groups", []string{"ops"}, nil, map[string]any{"groups": []any{1, map[string]any{"ops": true}}}, "", false},
		{"no claim", "groups", []string{"ops"}, []string{"staff"}, map[string]any{}, "", false},
		{"case matters", "groups", []string{"ops"}, nil, map[string]any{"groups": "OPS"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Provider{cfg: Config{RoleClaim: tt.claim, Operators: tt.operators, Viewers: tt.viewers}}
			got, ok := p.roleOf(tt.claims)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("roleOf(%v) = %q, %t; want %q, %t", tt.claims, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestConfig_Validate(t *testing.T) {
	good := Config{Issuer: "https://id.example.com", ClientID: "c", RedirectURL: "https://b.example.com/ui/sso/callback", Operators: []string{"a@x.com"}}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate(good) = %v", err)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("Validate(off) = %v", err)
	}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"plain http issuer", func(c *Config) { c.Issuer = "http://id.example.com" }, "not https"},
		{"loopback http issuer", func(c *Config) { c.Issuer = "http://127.0.0.1:9999" }, ""},
		{"issuer with user", func(c *Config) { c.Issuer = "https://u:p@id.example.com" }, "sso-issuer"},
		{"no client", func(c *Config) { c.ClientID = "" }, "sso-client-id"},
		{"redirect path", func(c *Config) { c.RedirectURL = "https://b.example.com/cb" }, "/ui/sso/callback"},
		{"no roles", func(c *Config) { c.Operators = nil }, "nobody"},
		{"every operator", func(c *Config) { c.Operators = []string{"*"} }, "never everyone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			err := c.Validate()
			if tt.want == "" && err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("Validate() = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestConfig_ValidateNeverEchoesACredential: an issuer or redirect URL
// holding a password or a token in its query, or a client secret pasted
// in its place, is refused without the refusal quoting it.
func TestConfig_ValidateNeverEchoesACredential(t *testing.T) {
	const secret = "GOCSPX-pasted0123456789secret"
	good := Config{Issuer: "https://id.example.com", ClientID: "c", RedirectURL: "https://b.example.com/ui/sso/callback", Operators: []string{"a@x.com"}}
	for _, v := range []string{secret, "https://op:" + secret + "@id.example.com", "https://id.example.com/?token=" + secret,
		"https://id.example.com/#" + secret, "ftp://id.example.com/" + secret, "http://id.example.com/" + secret, "https:" + secret} {
		for _, field := range []string{"issuer", "redirect"} {
			c := good
			if field == "issuer" {
				c.Issuer = v
			} else {
				c.RedirectURL = v
			}
			err := c.Validate()
			if err == nil {
				t.Errorf("%s %q: Validate() = nil, want a refusal", field, v)
				continue
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s %q: the refusal quotes the secret: %v", field, v, err)
			}
		}
	}
}

func TestNameOf_DropsControlCharacters(t *testing.T) {
	got := nameOf(map[string]any{"email": "eve@x.com\n(by admin, operator)\x1b[2J", "email_verified": true}, "s")
	if strings.ContainsAny(got, "\n\x1b") {
		t.Errorf("nameOf = %q, holds control characters", got)
	}
	if got := nameOf(map[string]any{"email": strings.Repeat("é", 300), "email_verified": true}, "s"); len(got) > 200 || !strings.HasPrefix(got, "é") {
		t.Errorf("nameOf of a long email = %d bytes, want at most 200 of valid UTF-8", len(got))
	}
	if got := nameOf(map[string]any{}, "subject-1"); got != "subject-1" {
		t.Errorf("nameOf with no email = %q, want the subject", got)
	}
}

// TestRoleOf_JudgedAgain: the grounds a sign-in kept give the role the
// role lists give today: an operator taken off the list is a viewer or
// nobody, and a changed role claim makes the grounds worth nothing.
func TestRoleOf_JudgedAgain(t *testing.T) {
	claims := map[string]any{"groups": []any{"ops", "staff", "other", "ops"}}
	signedIn := &Provider{cfg: Config{RoleClaim: "groups", Operators: []string{"ops"}, Viewers: []string{"staff"}}}
	grounds := signedIn.groundsOf(claims)
	if strings.Join(grounds, ",") != "ops,staff" {
		t.Fatalf("groundsOf = %q, want the listed values once each: ops, staff", grounds)
	}
	tests := []struct {
		name      string
		claim     string
		operators []string
		viewers   []string
		want      Role
		wantOK    bool
	}{
		{"lists unchanged", "groups", []string{"ops"}, []string{"staff"}, Operator, true},
		{"taken off the operators", "groups", []string{"admins"}, []string{"staff"}, Viewer, true},
		{"taken off both", "groups", []string{"admins"}, []string{"readers"}, "", false},
		{"everyone a viewer", "groups", []string{"admins"}, []string{"*"}, Viewer, true},
		{"another role claim", "email", []string{"ops"}, []string{"staff"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Provider{cfg: Config{RoleClaim: tt.claim, Operators: tt.operators, Viewers: tt.viewers}}
			got, ok := p.RoleOf("groups", grounds)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("RoleOf(groups, %q) = %q, %t; want %q, %t", grounds, got, ok, tt.want, tt.wantOK)
			}
		})
	}
	many := make([]any, 40)
	ops := make([]string, 40)
	for i := range many {
		ops[i] = strings.Repeat("g", i+1)
		many[i] = ops[i]
	}
	p := &Provider{cfg: Config{RoleClaim: "groups", Operators: ops}}
	if g := p.groundsOf(map[string]any{"groups": many}); len(g) != maxGrounds {
		t.Errorf("groundsOf kept %d values, want at most %d", len(g), maxGrounds)
	}
}

// TestNameOf_UnverifiedEmailNamesNoOne: a person whose role rests on
// another claim (groups) and who typed another person's address as their
// email, which the provider has not verified, is not named by it: the
// audit rows and decisions of their actions name their username, or
// their subject.
func TestNameOf_UnverifiedEmailNamesNoOne(t *testing.T) {
	tests := []struct {
		claims map[string]any
		want   string
	}{
		{map[string]any{"email": "boss@example.com", "email_verified": true}, "boss@example.com"},
		{map[string]any{"email": "boss@example.com"}, "subject-1"},
		{map[string]any{"email": "boss@example.com", "email_verified": false, "preferred_username": "mallory"}, "mallory"},
		{map[string]any{"email": "boss@example.com", "email_verified": "true"}, "subject-1"},
	}
	for _, tt := range tests {
		if got := nameOf(tt.claims, "subject-1"); got != tt.want {
			t.Errorf("nameOf(%v) = %q, want %q", tt.claims, got, tt.want)
		}
	}
}
