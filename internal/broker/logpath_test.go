package broker_test

import (
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/broker"
)

func TestLogPath(t *testing.T) {
	p := broker.TokenPrefix
	tok := p + strings.Repeat("x", 43)
	tests := []struct{ in, want string }{
		{"/egress/ECHO/v1", "/egress/ECHO/v1"},
		{"/egress/ECHO/bot" + tok + "/getMe", "/egress/ECHO/bot" + p + "…/getMe"},
		{"/a/" + tok + "/" + tok, "/a/" + p + "…/" + p + "…"},
		{"/" + p, "/" + p + "…"},
	}
	for _, tt := range tests {
		if got := broker.LogPath(tt.in); got != tt.want {
			t.Errorf("LogPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
