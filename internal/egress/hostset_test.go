//go:build unix

package egress

import (
	"context"
	"testing"
	"time"
)

// TestHostForms_KeptUntilWhatItIsMadeFromChanges: a box's search set at
// a host is made once and used again, and made anew when the secret
// called with is set again, when a value is sent there for the box, when
// its list is read again, and when it went unused for setIdle; another
// box's calls never change it.
func TestHostForms_KeptUntilWhatItIsMadeFromChanges(t *testing.T) {
	c, st := benchEgress(t, 2, 2)
	now := time.Now()
	c.cfg.Now = func() time.Time { return now }
	ctx := context.Background()
	const host = "api.example.com"
	sec := st.secs["box-00000"]["S000"]
	get := func() *hostSet {
		t.Helper()
		hs, err := c.hostForms(ctx, "box-00000", "", sec, "", host)
		if err != nil {
			t.Fatal(err)
		}
		return hs
	}
	first := get()
	if get() != first {
		t.Fatalf("hostForms made the set again with nothing changed")
	}
	c.written.sentValue(host, "box-00001", "S000", "sk_live_another_box_value", now)
	if get() != first {
		t.Errorf("another box's value made box-00000's set again")
	}
	if _, ok := first.seen["sk_live_another_box_value"]; ok {
		t.Errorf("box-00000's set holds another box's value")
	}
	tests := []struct {
		name   string
		change func()
	}{
		{"a value sent for the box", func() { c.written.sentValue(host, "box-00000", "S001", "sk_live_a_new_value_sent", now) }},
		{"the secret set again", func() { sec.Sealed = append([]byte(nil), st.secs["box-00000"]["S001"].Sealed...) }},
		{"the list read again", func() { now = now.Add(listFor) }},
		{"unused for setIdle", func() { now = now.Add(setIdle) }},
	}
	prev := first
	for _, tt := range tests {
		tt.change()
		if got := get(); got == prev {
			t.Errorf("after %s, hostForms = the kept set, want one made anew", tt.name)
		} else {
			prev = got
		}
	}
	if _, ok := prev.seen["sk_live_a_new_value_sent"]; !ok {
		t.Errorf("the set made anew lacks the value sent for the box")
	}
}
