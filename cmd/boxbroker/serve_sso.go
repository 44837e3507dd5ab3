package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"strings"

	"github.com/intentius/boxbroker/internal/filelock"
	"github.com/intentius/boxbroker/internal/sso"
)

// maxSecretFile bounds --sso-client-secret-file.
const maxSecretFile = 4 << 10

// ssoFlags adds serve's single sign-on flags to fs, defaulting from the
// environment variables each names, and returns the function that, after
// parsing, makes the sso.Config. The client secret is read from
// BOXBROKER_SSO_CLIENT_SECRET or from the file --sso-client-secret-file
// names, never from a flag's value.
func ssoFlags(fs *flag.FlagSet, c *cli) func() (sso.Config, error) {
	issuer := fs.String("sso-issuer", c.getenv("BOXBROKER_SSO_ISSUER"), "OpenID Connect issuer URL for single sign-on to the owner's page; empty: off (BOXBROKER_SSO_ISSUER)")
	clientID := fs.String("sso-client-id", c.getenv("BOXBROKER_SSO_CLIENT_ID"), "client ID registered at the identity provider (BOXBROKER_SSO_CLIENT_ID)")
	secretFile := c.secretPathFlag(fs, "sso-client-secret-file", "BOXBROKER_SSO_CLIENT_SECRET_FILE", "file holding the client's secret; or set BOXBROKER_SSO_CLIENT_SECRET; neither: a public client (BOXBROKER_SSO_CLIENT_SECRET_FILE)")
	redirect := fs.String("sso-redirect-url", c.getenv("BOXBROKER_SSO_REDIRECT_URL"), "the owner's page's callback as browsers reach it, ending in "+sso.CallbackPath+" (BOXBROKER_SSO_REDIRECT_URL)")
	scopes := fs.String("sso-scopes", c.getenv("BOXBROKER_SSO_SCOPES"), "scopes asked for besides openid, comma-separated; empty: email,profile (BOXBROKER_SSO_SCOPES)")
	claim := fs.String("sso-role-claim", c.envOr("BOXBROKER_SSO_ROLE_CLAIM", "email"), "ID token claim (a string or a list) the roles are read from, such as email or groups (BOXBROKER_SSO_ROLE_CLAIM)")
	operators := fs.String("sso-operators", c.getenv("BOXBROKER_SSO_OPERATORS"), "the claim's values, comma-separated, that make an operator: sees and acts (BOXBROKER_SSO_OPERATORS)")
	viewers := fs.String("sso-viewers", c.getenv("BOXBROKER_SSO_VIEWERS"), "the claim's values, comma-separated, that make a viewer: sees only; * for everyone the provider signs in (BOXBROKER_SSO_VIEWERS)")
	return func() (sso.Config, error) {
		cfg := sso.Config{Issuer: strings.TrimSpace(*issuer), ClientID: strings.TrimSpace(*clientID), RedirectURL: strings.TrimSpace(*redirect),
			RoleClaim: strings.TrimSpace(*claim), Scopes: list(*scopes), Operators: list(*operators), Viewers: list(*viewers)}
		if !cfg.Enabled() {
			return cfg, nil
		}
		cfg.ClientSecret = c.getenv("BOXBROKER_SSO_CLIENT_SECRET")
		if path := secretFile(); path != "" {
			if cfg.ClientSecret != "" {
				return cfg, fmt.Errorf("configuration: both BOXBROKER_SSO_CLIENT_SECRET and --sso-client-secret-file (BOXBROKER_SSO_CLIENT_SECRET_FILE) are set; set one")
			}
			s, err := readSecretFile(path)
			if err != nil {
				return cfg, err
			}
			cfg.ClientSecret = s
		}
		return cfg, cfg.Validate()
	}
}

// readSecretFile reads a secret from path: at most maxSecretFile bytes,
// its trailing line end dropped. Its errors never hold the content, nor
// path when it names no file it can open (it may be the secret itself).
func readSecretFile(path string) (string, error) {
	// Judged as opened (filelock.OpenRead): a FIFO is refused, not
	// waited on for a writer.
	f, err := filelock.OpenRead(path)
	if err != nil {
		return "", fmt.Errorf("configuration: --sso-client-secret-file (BOXBROKER_SSO_CLIENT_SECRET_FILE): %w", unnamed(err))
	}
	defer f.Close()
	b, err := readAtMost(f, maxSecretFile, "configuration: --sso-client-secret-file", fmt.Sprintf("configuration: --sso-client-secret-file %s is over %d bytes", path, maxSecretFile))
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("configuration: --sso-client-secret-file %s is empty", path)
	}
	return s, nil
}

// secretPathFlag adds to fs the flag name, the path of a file holding a
// secret, whose value is never shown: not as its default by -h, since its
// variable env is read only after parsing, when the flag was not given
// (what the returned function gives), nor by a refusal (unnamed). An
// operator may give the secret itself where its file's path is asked, as
// a container's secret is often put in a variable.
func (c *cli) secretPathFlag(fs *flag.FlagSet, name, env, usage string) func() string {
	p := fs.String(name, "", usage)
	return func() string {
		given := false
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
		if given {
			return *p
		}
		return c.getenv(env)
	}
}

// unnamed is err without the path a *fs.PathError names: the file could
// not be opened, so the path may be what an operator meant as its
// content.
func unnamed(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("cannot %s the file it names: %w", pe.Op, pe.Err)
	}
	return err
}

// list splits a comma-separated flag, dropping empty entries; nil when
// there are none.
func list(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
