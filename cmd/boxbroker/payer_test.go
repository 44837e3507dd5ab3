package main

import (
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// TestCLI_PayerSharedSaysWhetherACredentialWasRemoved: box payer NAME
// shared says it removed the owner's credential only when there was one,
// run on the data directory and through --admin-url alike.
func TestCLI_PayerSharedSaysWhetherACredentialWasRemoved(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	const ownerKey = "sk-ant-api03-OWNER-REMOVED"
	steps := []struct {
		stdin string
		args  []string
		errs  string
	}{
		{"", []string{"box", "payer", "alpha", "shared"}, "alpha had no owner's credential to remove"},
		{ownerKey + "\n", []string{"box", "payer", "alpha", "owner"}, "set alpha's owner's credential"},
		{"", []string{"box", "payer", "alpha", "shared"}, "removed alpha's owner's credential"},
		{"", []string{"box", "payer", "alpha", "shared"}, "alpha had no owner's credential to remove"},
	}
	for _, where := range storeAndAdminAPI(t, b) {
		for _, tt := range steps {
			code, out, errs := runEnv(t, where.env, tt.stdin, tt.args...)
			if code != 0 || !strings.Contains(errs, tt.errs) || strings.Contains(out+errs, ownerKey) {
				t.Errorf("%s: boxbroker %s = %d %q %q, want 0 saying %q", where.name, strings.Join(tt.args, " "), code, out, errs, tt.errs)
			}
		}
	}
}

// TestCLI_ValueWithASpaceAtAnEndIsRefused: a credential, owner's key,
// visitor's key or secret piped in with a space before or after it is
// refused saying so, on the data directory and through --admin-url
// alike, and never printed.
func TestCLI_ValueWithASpaceAtAnEndIsRefused(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	const key = "sk-ant-api03-CLIEDGESPACE-0123456789"
	tests := [][]string{
		{"credential", "set", "anthropic"},
		{"box", "payer", "alpha", "owner"},
		{"visitor", "set", "github:ann"},
		{"secret", "set", "alpha", "STRIPE", "--host", "https://api.stripe.com"},
	}
	for _, where := range storeAndAdminAPI(t, b) {
		for _, stdin := range []string{" " + key + "\n", key + " \n"} {
			for _, args := range tests {
				code, out, errs := runEnv(t, where.env, stdin, args...)
				if code != 1 || !strings.Contains(errs, "begins or ends with a space") || strings.Contains(out+errs, key) {
					t.Errorf("%s: boxbroker %s < %q = %d %q %q, want 1 saying the value begins or ends with a space", where.name, strings.Join(args, " "), stdin, code, out, errs)
				}
			}
		}
	}
}
