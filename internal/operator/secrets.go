package operator

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/intentius/boxbroker/internal/mint"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// MaxValue bounds a credential's or a secret's value, in bytes.
const MaxValue = 16 << 10

// MinSecretLen is the shortest plain secret value taken: the broker swaps
// the value out of every answer to a box, and a shorter one would match
// ordinary text.
const MinSecretLen = 8

// SecretView is an egress secret's name, host and when it was set; never
// its value.
type SecretView struct {
	Name      string `json:"name"`
	Host      string `json:"host"`
	UpdatedAt string `json:"updatedAt"`
	// Kind is a minted or signing secret's kind (github-app, oauth2,
	// aws-sigv4, hmac); "" for a plain value.
	Kind string `json:"kind,omitempty"`
	// State is where a minted or signing secret stands (mint.State):
	// "token valid until …", "REFUSED since …: the OAuth grant needs
	// renewing (…)", …; "" for a plain value. Listed secrets only.
	State string `json:"state,omitempty"`
	// BodyFields are the top-level form or JSON body fields in which the
	// broker writes the value (store.Secret.BodyFields); omitted for none.
	BodyFields []string `json:"bodyFields,omitempty"`
	// Rules are what the secret may be spent on, each "METHOD PATTERN"
	// (store.Secret.Rules); omitted for none: every method and path.
	Rules []string `json:"rules,omitempty"`
	// Rate is each box's rate for the secret, N/PERIOD (store.Secret.Rate);
	// omitted for none.
	Rate string `json:"rate,omitempty"`
}

// secretView is how the admin API shows sec, with no State.
func secretView(sec store.Secret) SecretView {
	return SecretView{Name: sec.Name, Host: sec.Host, UpdatedAt: formatTime(sec.UpdatedAt), Kind: sec.Kind, BodyFields: sec.BodyFields, Rules: sec.Rules, Rate: sec.Rate}
}

// SecretList is the answer to GET /api/boxes/{name}/secrets.
type SecretList struct {
	Secrets []SecretView `json:"secrets"`
}

// SecretValue is the body of PUT /api/boxes/{name}/secrets/{secret}.
type SecretValue struct {
	Host  string `json:"host"`
	Value string `json:"value"`
	// BodyFields, when given, name the top-level fields of a form or JSON
	// request body in which the broker writes the value where the field's
	// whole value is the box's token (protocol.CheckBodyFields); none
	// means the value is written only in header values and the query.
	BodyFields []string `json:"bodyFields,omitempty"`
	// Rules, when given, are what the secret may be spent on, each
	// "METHOD PATTERN" as protocol.ParseSecretRule reads it, such as
	// "GET /repos/acme/**"; none allows every method and path. They
	// replace the rules the secret held.
	Rules []string `json:"rules,omitempty"`
	// Rate, when given, is each box's rate for the secret, N/PERIOD with
	// PERIOD s, m or h, such as "120/m"; "" for none.
	Rate string `json:"rate,omitempty"`
	// Kind, when set, is what the broker mints or signs with (mint.Kinds),
	// Value being its JSON configuration; "" or "plain" for a plain value.
	// Only the CLI on a data directory sets it; the admin API takes plain
	// values only.
	Kind string `json:"-"`
	// Keep keeps the body fields, rules and rate the secret holds instead
	// of replacing them (the owner's page, which has no fields for them),
	// so that setting a value never widens them.
	Keep bool `json:"-"`
}

// CheckValue refuses a value that is empty, only spaces (which a header
// sends as empty), begins or ends with a space (which a header drops and
// a body field or the query keeps, so the one value would work in one
// place and not in another), too long, or holds a byte that cannot go in
// a header. The message never repeats the value.
func CheckValue(what, v string) error {
	if v == "" {
		return Errorf(Invalid, "The %s's value is empty.", what)
	}
	if strings.Trim(v, " ") == "" {
		return Errorf(Invalid, "The %s's value is only spaces.", what)
	}
	if strings.HasPrefix(v, " ") || strings.HasSuffix(v, " ") {
		return Errorf(Invalid, "The %s's value begins or ends with a space, which a header drops but a body field or query keeps; set it without the space.", what)
	}
	if len(v) > MaxValue {
		return Errorf(Invalid, "The %s's value is over %d bytes.", what, MaxValue)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] == 0x7f {
			return Errorf(Invalid, "The %s's value holds a control character (a line break?) at byte %d.", what, i)
		}
	}
	return nil
}

// ErrHostHoldsValue refuses a secret whose host holds its value: the
// refusal of a bad host repeats the host, and so would repeat the value.
var ErrHostHoldsValue = Errorf(Invalid,
	"The host holds the secret's value; the value goes only in the value field, and the host is the base URL it may be sent to, such as https://api.stripe.com.")

// HoldsValue reports whether any of fields holds value, one long enough
// (MinSecretLen) to be told from ordinary text: a field whose refusal
// repeats it must be refused, before it is checked, without it.
func HoldsValue(value string, fields ...string) bool {
	if len(value) < MinSecretLen {
		return false
	}
	for _, f := range fields {
		if strings.Contains(f, value) {
			return true
		}
	}
	return false
}

// SecretHost checks an egress secret's host (protocol.ParseSecretHost)
// and writes it in its canonical form.
func SecretHost(h string) (string, error) {
	u, err := protocol.ParseSecretHost(h)
	if err != nil || len(h) > 2048 {
		msg := "A secret's host is the one base URL it may be sent to, such as https://api.github.com: http(s), with a host and no credentials, query or fragment."
		if err != nil {
			// ParseSecretHost's text begins "the host ..." or with the
			// URL quoted: either way it follows "The secret's host".
			msg = "The secret's host " + strings.TrimPrefix(err.Error(), "the host ") + "."
		}
		return "", Errorf(Invalid, "%s", msg)
	}
	return u.String(), nil
}

// CheckSecretName refuses a name that is no secret name.
func CheckSecretName(name string) error {
	if !protocol.IsSecretName(name) {
		return Errorf(Invalid, "A secret name matches ^[A-Z][A-Z0-9_]{0,39}$: an upper-case letter, then up to 39 upper-case letters, digits or _.")
	}
	return nil
}

// RulesMessage is the audit log's message for setting the secret name
// with rules and rate (never its value): what it may be spent on.
func RulesMessage(name string, rules []string, rate string) string {
	what := "any method and path"
	if len(rules) > 0 {
		what = "only " + strings.Join(rules, " and ")
	}
	if rate == "" {
		rate = "no rate"
	} else {
		rate = "at most " + rate + " for each box"
	}
	return "set the secret " + name + ": it allows " + what + ", " + rate
}

// ListSecrets lists box's secrets: never a value; a minted or signing
// secret's kind and where it stands (mint.State), so that a refused OAuth
// grant is flagged. NotFound for no such box.
func (s *Service) ListSecrets(ctx context.Context, box string) ([]SecretView, error) {
	if _, err := s.StoredBox(ctx, box); err != nil {
		return nil, err
	}
	list, err := s.cfg.Store.ListSecrets(ctx, box)
	if err != nil {
		return nil, StoreError(err, "", "")
	}
	states, err := s.cfg.Store.ListMintStates(ctx, box)
	if err != nil {
		return nil, StoreError(err, "", "")
	}
	out := []SecretView{}
	for _, sec := range list {
		v := secretView(sec)
		if sec.Kind != "" {
			full, err := s.cfg.Store.Secret(ctx, box, sec.Name)
			if err != nil {
				return nil, StoreError(err, "", "")
			}
			v.State = mint.State(full, states, s.cfg.Now())
		}
		out = append(out, v)
	}
	return out, nil
}

// SetSecret seals sv's value under the keyring and sets it as box's egress
// secret name, sent only to sv's host, with its body fields, rules and
// rate. Invalid for a bad name, host, value, kind, body field, rule or
// rate, or a host holding the value (ErrHostHoldsValue); NotFound for no
// such box.
func (s *Service) SetSecret(ctx context.Context, box, name string, sv SecretValue) (SecretView, error) {
	if HoldsValue(sv.Value, sv.Host) {
		return SecretView{}, ErrHostHoldsValue
	}
	if _, err := s.StoredBox(ctx, box); err != nil {
		return SecretView{}, err
	}
	if err := CheckSecretName(name); err != nil {
		return SecretView{}, err
	}
	host, err := SecretHost(sv.Host)
	if err != nil {
		return SecretView{}, err
	}
	if err := protocol.CheckBodyFields(sv.BodyFields); err != nil {
		return SecretView{}, Errorf(Invalid, "bodyFields: %s.", err)
	}
	rules, rate, err := protocol.CheckSecretRules(sv.Rules, sv.Rate)
	if err != nil {
		return SecretView{}, Errorf(Invalid, "rules or rate: %s.", err)
	}
	kind := sv.Kind
	if kind == "plain" {
		kind = ""
	}
	if kind != "" {
		spec, err := mint.Parse(kind, []byte(sv.Value))
		if err != nil {
			return SecretView{}, Errorf(Invalid, "--kind %s: %s", kind, err)
		}
		if _, signs := spec.(mint.Signer); signs && len(sv.BodyFields) > 0 {
			return SecretView{}, Errorf(Invalid, "bodyFields: a %s secret signs requests and writes no value, so it takes no body field.", kind)
		}
	} else {
		if err := CheckValue("secret", sv.Value); err != nil {
			return SecretView{}, err
		}
		if len(sv.Value) < MinSecretLen {
			return SecretView{}, Errorf(Invalid,
				"The secret's value is shorter than %d bytes: the broker keeps it out of answers by matching it, and a value that short would match ordinary text.", MinSecretLen)
		}
	}
	if s.cfg.Keyring == nil {
		return SecretView{}, fmt.Errorf("set secret %s of box %s: the operator service has no keyring", name, box)
	}
	plain := []byte(sv.Value)
	sealed, err := s.cfg.Keyring.Seal(plain, secrets.SecretAD(box, name))
	secrets.Zero(plain)
	if err != nil {
		return SecretView{}, fmt.Errorf("seal secret %s of box %s: %w", name, box, err)
	}
	sec := store.Secret{Box: box, Name: name, Host: host, Sealed: sealed, UpdatedAt: s.cfg.Now().UTC(), Kind: kind, BodyFields: sv.BodyFields, Rules: rules, Rate: rate}
	if sv.Keep {
		if old, err := s.cfg.Store.Secret(ctx, box, name); err == nil {
			if old.Kind == "" && kind == "" {
				sec.BodyFields = old.BodyFields
			}
			sec.Rules, sec.Rate = old.Rules, old.Rate
		}
	}
	if err := s.cfg.Store.SetSecret(ctx, sec); err != nil {
		return SecretView{}, StoreError(err, NoBox(box), "")
	}
	if err := s.wrote(ctx, store.ChangeSecret, box+"/"+name, box, http.StatusOK, RulesMessage(name, sec.Rules, sec.Rate), "secret", name, "host", host, "kind", kind, "body_fields", sec.BodyFields); err != nil {
		return SecretView{}, err
	}
	return secretView(sec), nil
}

// SetSecretRules sets what box's egress secret name may be spent on, its
// rules and rate (as SecretValue's), keeping its value, host, kind and
// body fields. Invalid for a bad name, rule or rate; NotFound when box
// has no secret of that name.
func (s *Service) SetSecretRules(ctx context.Context, box, name string, rules []string, rate string) (SecretView, error) {
	if err := CheckBoxName(box); err != nil {
		return SecretView{}, err
	}
	if err := CheckSecretName(name); err != nil {
		return SecretView{}, err
	}
	rules, rate, err := protocol.CheckSecretRules(rules, rate)
	if err != nil {
		return SecretView{}, Errorf(Invalid, "Rules or rate: %s.", err)
	}
	sec, err := s.cfg.Store.Secret(ctx, box, name)
	if err != nil {
		return SecretView{}, StoreError(err, fmt.Sprintf("Box %s has no secret named %s.", box, name), "")
	}
	sec.Rules, sec.Rate, sec.UpdatedAt = rules, rate, s.cfg.Now().UTC()
	if err := s.cfg.Store.SetSecret(ctx, sec); err != nil {
		return SecretView{}, StoreError(err, NoBox(box), "")
	}
	if err := s.wrote(ctx, store.ChangeSecret, box+"/"+name, box, http.StatusOK, RulesMessage(name, rules, rate), "secret", name, "rules", rules, "rate", rate); err != nil {
		return SecretView{}, err
	}
	return secretView(sec), nil
}

// RemoveSecret removes box's egress secret name. NotFound when box has
// none of that name.
func (s *Service) RemoveSecret(ctx context.Context, box, name string) error {
	if err := CheckBoxName(box); err != nil {
		return err
	}
	if err := CheckSecretName(name); err != nil {
		return err
	}
	if err := s.cfg.Store.DeleteSecret(ctx, box, name); err != nil {
		return StoreError(err, fmt.Sprintf("Box %s has no secret %s.", box, name), "")
	}
	return s.wrote(ctx, store.ChangeSecret, box+"/"+name, box, http.StatusNoContent, "removed secret "+name, "secret", name)
}
