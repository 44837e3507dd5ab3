package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// TestCLI_CommandOfSeveralWithNoWordSaysItsUsage: every command of
// several, given none of its words (bare, or with flags only), is a usage
// error (exit 2) saying its own usage, and with -h says it as help (exit
// 0); main says it for all of them, from the command table.
func TestCLI_CommandOfSeveralWithNoWordSaysItsUsage(t *testing.T) {
	dir := t.TempDir()
	for name, cmd := range commands() {
		if len(cmd.subs) == 0 {
			continue
		}
		if cmd.usage == "" {
			t.Errorf("command %s takes words but has no usage", name)
			continue
		}
		want := "boxbroker " + name + ": usage: " + cmd.usage + "\n"
		for _, args := range [][]string{{name}, {name, "--data", dir}} {
			if _, errs, code := run(t, dir, "", args...); code != 2 || errs != want {
				t.Errorf("boxbroker %v = %d %q, want 2 %q", args, code, errs, want)
			}
		}
		if _, errs, code := run(t, dir, "", name, "-h"); code != 0 || !strings.HasPrefix(errs, want) {
			t.Errorf("boxbroker %s -h = %d %q, want 0 and %q first", name, code, errs, want)
		}
	}
}

func TestReadAtMost(t *testing.T) {
	tests := []struct {
		name, in string
		want     string
		wantErr  string
	}{
		{"empty", "", "", ""},
		{"at the bound", "abcd", "abcd", ""},
		{"over the bound", "abcde", "", "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := readAtMost(strings.NewReader(tt.in), 4, "read it", "too long")
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("readAtMost(%q) = %q, %v, want error %q", tt.in, b, err, tt.wantErr)
				}
				return
			}
			if err != nil || string(b) != tt.want {
				t.Fatalf("readAtMost(%q) = %q, %v, want %q", tt.in, b, err, tt.want)
			}
		})
	}
	boom := errors.New("boom")
	if _, err := readAtMost(iotest.ErrReader(boom), 4, "read it", "too long"); !errors.Is(err, boom) || err.Error() != "read it: boom" {
		t.Errorf("readAtMost(failing reader) = %v, want %q wrapping it", err, "read it: boom")
	}
}

// TestEnvValue: each kind of variable serve reads is its default unset,
// its value when it parses, and otherwise noted, saying what it should
// be, with the default given.
func TestEnvValue(t *testing.T) {
	env := map[string]string{
		"ENV_D": "2m", "ENV_F": "0.5", "ENV_I": "7", "ENV_B": "false",
		"ENV_BD": "2", "ENV_BF": "x", "ENV_BI": "7.5", "ENV_BB": "nope",
	}
	e := &envReader{c: &cli{getenv: func(k string) string { return env[k] }}}
	if got := envValue(e, "ENV_D", time.Second); got != 2*time.Minute {
		t.Errorf("duration = %v, want 2m", got)
	}
	if got := envValue(e, "ENV_F", 1.0); got != 0.5 {
		t.Errorf("float = %v, want 0.5", got)
	}
	if got := envValue(e, "ENV_I", int64(1)); got != 7 {
		t.Errorf("int = %v, want 7", got)
	}
	if got := envValue(e, "ENV_B", true); got {
		t.Errorf("boolean = %v, want false", got)
	}
	if got := envValue(e, "ENV_UNSET", int64(3)); got != 3 {
		t.Errorf("int of an unset variable = %v, want its default 3", got)
	}
	if len(e.bad) != 0 {
		t.Fatalf("good values noted as bad: %v", e.bad)
	}
	if envValue(e, "ENV_BD", time.Second) != time.Second || envValue(e, "ENV_BF", 1.0) != 1 ||
		envValue(e, "ENV_BI", int64(1)) != 1 || !envValue(e, "ENV_BB", true) {
		t.Errorf("a malformed value did not give the default")
	}
	want := map[string]string{
		"env-bd": `ENV_BD="2" is not a duration such as 30s, 10m or 720h`,
		"env-bf": `ENV_BF="x" is not a number such as 5 or 0.5`,
		"env-bi": `ENV_BI="7.5" is not a whole number such as 256`,
		"env-bb": `ENV_BB="nope" is not true or false`,
	}
	for k, w := range want {
		if e.bad[k] != w {
			t.Errorf("noted for %s = %q, want %q", k, e.bad[k], w)
		}
	}
}

func TestParseSub(t *testing.T) {
	unknown := errors.New("unknown word")
	want := map[string]arity{"list": {0, "x list takes no arguments"}, "remove": {1, "x remove takes one NAME"}}
	tests := []struct {
		sub     string
		args    []string
		wantPos []string
		wantErr string
	}{
		{"list", nil, nil, ""},
		{"list", []string{"a"}, nil, "usage: x list takes no arguments"},
		{"remove", []string{"--flag", "a"}, []string{"a"}, ""},
		{"remove", nil, nil, "usage: x remove takes one NAME"},
		{"drop", []string{"a"}, nil, "unknown word"},
		{"list", []string{"--nope"}, nil, "usage: flag provided but not defined: -nope (see boxbroker x -h)"},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("boxbroker x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Bool("flag", false, "")
		pos, err := parseSub(fs, tt.args, tt.sub, want, unknown)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("parseSub(%s %q) = %q, %v, want error %q", tt.sub, tt.args, pos, err, tt.wantErr)
			}
			continue
		}
		if err != nil || strings.Join(pos, " ") != strings.Join(tt.wantPos, " ") {
			t.Errorf("parseSub(%s %q) = %q, %v, want %q", tt.sub, tt.args, pos, err, tt.wantPos)
		}
	}
}

func TestRows(t *testing.T) {
	var b bytes.Buffer
	type row struct {
		name string
		n    int64
		ok   bool
	}
	err := rows(&b, "NAME\tN\tOK", []row{{"a", 1, true}, {"long-name", 22, false}}, func(r row) []any { return []any{r.name, r.n, r.ok} })
	want := "NAME       N   OK\na          1   true\nlong-name  22  false\n"
	if err != nil || b.String() != want {
		t.Errorf("rows = %q, %v, want %q", b.String(), err, want)
	}
}
