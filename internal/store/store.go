// Package store defines where boxbroker keeps its state: the Store
// interface, its domain types and its sentinel errors. Implementations live
// in store/sqlite (the embedded default) and store/postgres (several
// replicas), and both pass the one suite in store/storetest.
//
// Secrets and credentials reach a Store already sealed (see package
// secrets): a Store never sees a plaintext value. Tokens and grants reach it
// only as SHA-256 hashes.
package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Sentinel errors every implementation returns, translated from its driver's.
var (
	// ErrNotFound: the named row does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: a row with that key already exists.
	ErrExists = errors.New("already exists")
	// ErrUnavailable: the database did not answer; callers fail closed (503).
	ErrUnavailable = errors.New("store unavailable")
	// ErrRejected: the database answered and refused what was written
	// for what it holds — a constraint it breaks, a number out of its
	// column's range, a value of the wrong type, a row past the
	// database's limits — so that writing it again will be refused
	// again. A refusal of every write (a read-only database, a full
	// disk) is not ErrRejected but ErrUnavailable, or the driver's error.
	ErrRejected = errors.New("refused by the store")
	// ErrGraceEnded: the token a write was admitted with is a box's
	// token before its last rotation, whose grace (Box.OldUntil) has
	// ended by the database's clock as the write runs. It is an
	// ErrNotFound: no box holds that token any more.
	ErrGraceEnded = fmt.Errorf("the grace of the token before the rotation ended: %w", ErrNotFound)
	// ErrTokenExpired: the token a write was admitted with is a box's
	// token, whose expiry (Box.ExpiresAt) has come by the database's
	// clock as the write runs. It is an ErrNotFound: the box no longer
	// takes that token.
	ErrTokenExpired = fmt.Errorf("the token expired: %w", ErrNotFound)
)

// Store is all of boxbroker's persistent state. Every method is safe for
// concurrent use. Methods return ErrNotFound for a missing row and
// ErrUnavailable when the database cannot be reached.
type Store interface {
	Boxes
	Declarations
	Credentials
	Secrets
	Feedback
	Resources
	Grants
	Changes
	Spend
	Windows
	RateLimits
	Alerts
	AdminTokens
	Sessions
	Audit
	ProxyAuthority
	Mints
	Overview
	Pool
	Spooled
	AuditCosts
	PromptCache
	Proposals
	// Identity is the store's identity: made once, by the first start
	// that migrated the store to it, and the same for every replica that
	// shares the store. A replica's journal and spool name it, so that
	// they are replayed into no other store.
	Identity(ctx context.Context) (string, error)
	// Ping reports whether the database answers.
	Ping(ctx context.Context) error
	// Close releases the database.
	Close() error
}

// Notifier is implemented by a Store that can tell a cache at once that a
// change was logged, so that the cache reads the log then rather than at
// its next poll. Polling stays the cache's guarantee; a notification only
// shortens the wait.
type Notifier interface {
	// Listen calls notify once it listens, and then soon after every
	// change it can hear of — logged by any process (PostgreSQL), or
	// through this Store alone (SQLite) — until ctx ends (returning ctx's error)
	// or it can no longer listen (returning why, wrapping ErrUnavailable
	// when the database cannot be reached). It calls notify on the
	// goroutine that called Listen.
	Listen(ctx context.Context, notify func()) error
}

// Box is one enrolled box. TokenHash is the SHA-256 of its token, hex.
// PayerKind is "shared" (the default) or "owner"; PayerPrincipal is "" when
// unknown.
type Box struct {
	Name           string
	TokenHash      string
	CreatedAt      time.Time
	Consent        bool
	Paused         bool
	PayerKind      string
	PayerPrincipal string
	// From are the source addresses the box's token is taken from (its
	// token is bound to where the box runs); nil: any address.
	From []netip.Prefix
	// TokenTTL is the lifetime each token of the box is given as it is
	// minted (0: none); ExpiresAt is when its token stops being taken
	// (zero: never).
	TokenTTL  time.Duration
	ExpiresAt time.Time
	// OldTokenHash is the hash of the token the box had before its last
	// rotation, still taken until OldUntil (a rotation's grace); "" when
	// there is none.
	OldTokenHash string
	OldUntil     time.Time
}

// Rotation is how ReplaceToken replaces a box's token.
type Rotation struct {
	// Hash is the new token's hash.
	Hash string
	// TTL is the lifetime the box's tokens are given from now on (0:
	// none), and ExpiresAt when the new one expires (zero: never).
	TTL       time.Duration
	ExpiresAt time.Time
	// GraceUntil, when not zero, keeps the old token taken until then
	// (or until it expires, whichever is sooner); zero forgets it at
	// once.
	GraceUntil time.Time
}

// ParseFrom reads the source addresses a box's token is bound to: CIDRs
// or single addresses, comma-separated; "any" or "" is nil (any address).
// A single address is its own /32 (or /128). It returns an error naming
// the first entry it cannot read.
func ParseFrom(s string) ([]netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "any") {
		return nil, nil
	}
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if p, err := netip.ParsePrefix(part); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("source %q is neither a CIDR (10.0.0.0/8) nor an address", part)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// FormatFrom writes from as ParseFrom reads it: comma-separated CIDRs,
// "" for nil.
func FormatFrom(from []netip.Prefix) string {
	parts := make([]string, len(from))
	for i, p := range from {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// Admits reports whether the box's token may be used from addr: true
// when it is bound to no address, or addr is in one of From.
func (b *Box) Admits(addr netip.Addr) bool {
	if len(b.From) == 0 {
		return true
	}
	addr = addr.Unmap()
	for _, p := range b.From {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// Boxes keeps boxes and their token hashes.
type Boxes interface {
	// CreateBox adds a box; ErrExists if the name or the hash is taken.
	CreateBox(ctx context.Context, b Box) error
	// Box returns the box named name, or ErrNotFound.
	Box(ctx context.Context, name string) (Box, error)
	// BoxByTokenHash returns the box whose token, or old token still
	// kept (OldTokenHash, whatever its OldUntil), hashes to hash, or
	// ErrNotFound.
	BoxByTokenHash(ctx context.Context, hash string) (Box, error)
	// ListBoxes returns every box, by name.
	ListBoxes(ctx context.Context) ([]Box, error)
	// DeleteBox removes a box and everything kept for it; ErrNotFound if none.
	DeleteBox(ctx context.Context, name string) error
	// RotateToken replaces a box's token hash at once, forgetting any
	// old token still in its grace; its expiry and TTL are unchanged.
	// ErrNotFound if none.
	RotateToken(ctx context.Context, name, newHash string) error
	// ReplaceToken replaces a box's token as r says: the new hash, its
	// TTL and expiry, and the old token kept until r.GraceUntil (capped
	// at the old token's own expiry). ErrNotFound if none.
	ReplaceToken(ctx context.Context, name string, r Rotation) error
	// BindBox binds a box's token to the source addresses from (nil:
	// any); ErrNotFound if none.
	BindBox(ctx context.Context, name string, from []netip.Prefix) error
	// UpdateBox writes a box's settings (Consent, Paused, PayerKind,
	// PayerPrincipal); ErrNotFound if none. Name, TokenHash, CreatedAt,
	// From and the token's lifetimes are not changed.
	UpdateBox(ctx context.Context, b Box) error
	// ChangeBox changes the settings of the box named name that c holds,
	// and no other, in one statement; ErrNotFound if none. An action
	// that changes one setting calls it rather than reading the box and
	// writing it back whole (UpdateBox), which would undo a change made
	// meanwhile by another: a pause by a payer's change, say.
	ChangeBox(ctx context.Context, name string, c BoxChange) error
}

// BoxChange is what ChangeBox changes of a box: each field that is not
// nil. PayerKind, when not nil, is set with PayerPrincipal.
type BoxChange struct {
	Consent        *bool
	Paused         *bool
	PayerKind      *string
	PayerPrincipal string
}

// Declarations keeps each box's last declaration report, as kept.
type Declarations interface {
	// SaveDeclaration replaces the box's last report with doc (the kept
	// declaration, JSON) taken at at, unless the report kept was taken
	// later (reports racing are kept by when they were taken, not by
	// which write lands last), and returns the report kept as the write
	// commits: doc at at, or the later one it left in place;
	// ErrNotFound if the box does not exist or no longer holds the token
	// that hashes to tokenHash (its token, or the one it had before its
	// last rotation): a report admitted with the token of a box removed
	// is not kept as the report of a box added since under its name.
	// ErrGraceEnded (an ErrNotFound) if tokenHash is the one before the
	// rotation and its grace has ended by the database's clock as the
	// report is saved, although it had not as the report was admitted;
	// ErrTokenExpired (an ErrNotFound) if tokenHash is the box's token
	// and its expiry has come by the database's clock as the report is
	// saved.
	SaveDeclaration(ctx context.Context, box, tokenHash string, doc []byte, at time.Time) (KeptDeclaration, error)
	// Declaration returns the box's last kept report and when it was taken,
	// or ErrNotFound if it never reported.
	Declaration(ctx context.Context, box string) (doc []byte, at time.Time, err error)
	// DeclarationOfToken is Declaration for a request of box admitted
	// with the token that hashes to tokenHash, the report the rule
	// judges it by: read while the box holds that token (its token,
	// before its expiry, or the one before its last rotation, within
	// the grace, by the database's clock), in the same statement, and
	// ErrNotFound otherwise, so that a request of a box removed, or
	// whose token was replaced, since it was admitted is judged by no
	// report of the box added under its name. A box holding the token
	// that never reported has doc nil, and no error.
	DeclarationOfToken(ctx context.Context, box, tokenHash string) (doc []byte, at time.Time, err error)
}

// Credential is one sealed credential. ID names whose it is: "anthropic"
// and "fountain" for the operator's, "owner:<box>" for a box owner's
// Anthropic credential, "visitor:<principal>" for a visitor's.
type Credential struct {
	ID        string
	Sealed    []byte
	UpdatedAt time.Time
}

// Credentials keeps sealed credentials.
type Credentials interface {
	// SetCredential creates or replaces a credential.
	SetCredential(ctx context.Context, c Credential) error
	// Credential returns the credential with that ID, or ErrNotFound.
	Credential(ctx context.Context, id string) (Credential, error)
	// CredentialOfToken is Credential for a request of box admitted with
	// the token that hashes to tokenHash: the credential is read while
	// the box holds that token (as Secrets.SecretOfToken reads), in the
	// same statement, and is ErrNotFound otherwise, so that a request of
	// a box removed, or whose token was replaced, since it was admitted
	// is paid by no owner's credential of the box added under its name.
	CredentialOfToken(ctx context.Context, id, box, tokenHash string) (Credential, error)
	// DeleteCredential removes it; ErrNotFound if none.
	DeleteCredential(ctx context.Context, id string) error
	// ListCredentials returns every credential's ID and UpdatedAt, Sealed left nil.
	ListCredentials(ctx context.Context) ([]Credential, error)
}

// Secret is an egress secret the owner saved for a box: its name, the one
// base URL it may be sent to, and its sealed value.
type Secret struct {
	Box       string
	Name      string
	Host      string
	Sealed    []byte
	UpdatedAt time.Time
	// Kind is what the sealed value is: "" for a value the broker sends
	// as it is, or one of the kinds of package mint ("github-app",
	// "oauth2", "aws-sigv4", "hmac"), whose sealed configuration the
	// broker mints or signs with.
	Kind string
	// BodyFields names the top-level fields of a form or JSON request
	// body whose whole value, when it is the box's token, egress replaces
	// by the value (protocol.IsBodyField names one; at most
	// protocol.MaxBodyFields). Nil for none: the value is then written
	// only in header values and the query.
	BodyFields []string
	// Rules are what the secret may be spent on, each "METHOD PATTERN"
	// as protocol.ParseSecretRule reads it (at most
	// protocol.MaxSecretRules); nil allows every method and path.
	Rules []string
	// Rate is each box's rate for the secret, N/PERIOD as
	// protocol.ParseSecretRate reads it; "" for none.
	Rate string
}

// Secrets keeps egress secrets.
type Secrets interface {
	// SetSecret creates or replaces a box's secret; ErrNotFound if no box.
	SetSecret(ctx context.Context, s Secret) error
	// Secret returns a box's secret, or ErrNotFound.
	Secret(ctx context.Context, box, name string) (Secret, error)
	// SecretOfToken is Secret for a request of box admitted with the
	// token that hashes to tokenHash: the secret is read while the box
	// holds that token (its token, before its expiry, or the one before
	// its last rotation, within the grace, by the database's clock), in
	// the same statement, and is ErrNotFound otherwise, so that a
	// request of a box removed, or whose token was replaced, since it
	// was admitted is given no value of the box added under its name,
	// nor of its own.
	SecretOfToken(ctx context.Context, box, tokenHash, name string) (Secret, error)
	// ListSecrets returns a box's secrets by name, Sealed left nil.
	ListSecrets(ctx context.Context, box string) ([]Secret, error)
	// DeleteSecret removes a box's secret; ErrNotFound if none.
	DeleteSecret(ctx context.Context, box, name string) error
}

// Resource kinds a box can own at Fountain.
const (
	ResourceConversation = "conversation"
	ResourceSandbox      = "sandbox"
	ResourceVault        = "vault"
)

// Resource is a Fountain id recorded as one box's own.
type Resource struct {
	Box  string
	Kind string
	ID   string
	At   time.Time
}

// Resources records which box owns which Fountain ids.
type Resources interface {
	// AddResource records r as r.Box's; ErrExists if another box owns it
	// (recording it again for the same box is not an error).
	AddResource(ctx context.Context, r Resource) error
	// AddBoxResource records r, made by a request of r.Box admitted with
	// the token that hashes to tokenHash, as AddResource does, only while
	// the box holds that token (its token, or the one before its last
	// rotation, within the grace): ErrNotFound otherwise (ErrGraceEnded,
	// ErrTokenExpired as for SaveDeclaration), so that what a box
	// removed meanwhile made is not recorded as the box added since under
	// its name.
	AddBoxResource(ctx context.Context, r Resource, tokenHash string) error
	// ResourceOwner returns the box that owns kind/id, or ErrNotFound.
	ResourceOwner(ctx context.Context, kind, id string) (string, error)
	// ResourceOwnerOfToken is ResourceOwner for a request of box
	// admitted with the token that hashes to tokenHash: the owner is
	// read while the box holds that token (as SecretOfToken reads), in
	// the same statement, and is ErrNotFound otherwise, so that a
	// request of a box removed, or whose token was replaced, since it
	// was admitted finds no id of the box added under its name to be
	// its own.
	ResourceOwnerOfToken(ctx context.Context, box, tokenHash, kind, id string) (string, error)
	// ListResources returns a box's resources.
	ListResources(ctx context.Context, box string) ([]Resource, error)
	// ListResourcesOfToken is ListResources for a request of box
	// admitted with the token that hashes to tokenHash: read while the
	// box holds that token, in the same statement, and none otherwise.
	ListResourcesOfToken(ctx context.Context, box, tokenHash string) ([]Resource, error)
	// DeleteResource forgets kind/id; ErrNotFound if unknown.
	DeleteResource(ctx context.Context, kind, id string) error
}

// Grant is a grant issued to a person for one box. Hash is the SHA-256 of
// its value, hex; the value itself is never stored. RevokedAt is zero
// while the grant stands.
type Grant struct {
	ID        string
	Hash      string
	Box       string
	Principal string
	CreatedAt time.Time
	ExpiresAt time.Time
	RevokedAt time.Time
}

// Grants keeps grants.
type Grants interface {
	// CreateGrant stores a grant; ErrExists if its ID or hash is taken,
	// ErrNotFound if no box.
	CreateGrant(ctx context.Context, g Grant) error
	// GrantByHash returns the grant whose value hashes to hash, or ErrNotFound.
	GrantByHash(ctx context.Context, hash string) (Grant, error)
	// ListGrants returns a box's grants, newest first.
	ListGrants(ctx context.Context, box string) ([]Grant, error)
	// RevokeGrant marks a grant revoked at at; ErrNotFound if none.
	RevokeGrant(ctx context.Context, id string, at time.Time) error
}

// Change kinds: what a write touched, for caches to drop.
const (
	ChangeBox         = "box"         // Key: box name (created, removed, token rotated, settings)
	ChangeDeclaration = "declaration" // Key: box name
	ChangeCredential  = "credential"  // Key: credential ID
	ChangeSecret      = "secret"      // Key: box + "/" + name
	ChangeGrant       = "grant"       // Key: grant hash
	ChangeResource    = "resource"    // Key: kind + "/" + id
	ChangeBudget      = "budget"      // Key: box name (a budget of the box or of a principal on it set or removed)
)

// Change is one write, recorded in the same transaction as the write
// itself, so that every replica's cache can drop what it touched.
type Change struct {
	Seq  int64
	Kind string
	Key  string
}

// Changes is the log of writes, read by caches on every replica.
type Changes interface {
	// ChangesSince returns up to limit changes with Seq > after, in order.
	// Changes are pruned after a while (PruneChanges), so a cache that has
	// not read them for longer than that must drop everything.
	ChangesSince(ctx context.Context, after int64, limit int) ([]Change, error)
	// LastChange returns the highest Seq written so far (0 for none).
	LastChange(ctx context.Context) (int64, error)
	// PruneChanges forgets changes older than keep by the store's clock
	// (PostgreSQL's clock_timestamp(), SQLite's machine's), not the
	// caller's: a replica whose clock runs ahead forgets no change
	// another replica has yet to read.
	PruneChanges(ctx context.Context, keep time.Duration) error
}

// AdminToken is a token that authenticates to the admin API. Hash is the
// SHA-256 of its value, hex; the value itself is never stored. ID names it
// in lists and for revoking; Name is the operator's note. Role is what
// it may do: AdminOperator or AdminViewer; any other value, "" included,
// is taken as a viewer's (CanWrite) and refused by the store on create.
type AdminToken struct {
	ID        string
	Hash      string
	Name      string
	CreatedAt time.Time
	Role      AdminRole
}

// AdminRole is what an admin token may do.
type AdminRole string

// The admin tokens' roles.
const (
	// AdminOperator may do everything the admin API and the owner's page do.
	AdminOperator AdminRole = "operator"
	// AdminViewer reads (the admin API's GET routes, every page of the
	// owner's page) and changes nothing.
	AdminViewer AdminRole = "viewer"
)

// CanWrite reports whether a token of role r may change anything: only
// an operator's. Any role but AdminOperator reads only.
func (r AdminRole) CanWrite() bool { return r == AdminOperator }

// Valid reports whether r is one of the roles.
func (r AdminRole) Valid() bool { return r == AdminOperator || r == AdminViewer }

// AdminTokens keeps the admin API's tokens. They are read on each admin
// request and never cached, so their writes record no change.
type AdminTokens interface {
	// CreateAdminToken stores t; ErrExists if its ID or hash is taken,
	// an error if its Role is not Valid.
	CreateAdminToken(ctx context.Context, t AdminToken) error
	// AdminTokenByHash returns the token whose value hashes to hash, or ErrNotFound.
	AdminTokenByHash(ctx context.Context, hash string) (AdminToken, error)
	// AdminToken returns the token with that ID, or ErrNotFound.
	AdminToken(ctx context.Context, id string) (AdminToken, error)
	// ListAdminTokens returns every token, oldest first, Hash left empty.
	ListAdminTokens(ctx context.Context) ([]AdminToken, error)
	// DeleteAdminToken removes the token with that ID; ErrNotFound if none.
	DeleteAdminToken(ctx context.Context, id string) error
}

// Sessions keeps the owner's page sessions that were signed out. A
// session lives in its cookie, sealed under the master key, until it
// expires; one signed out before then is recorded here, so that every
// replica refuses its cookie. Sessions are read on each owner's page
// request and never cached, so their writes record no change.
type Sessions interface {
	// EndSession records that the session id has ended; it is refused
	// until expires, its own expiry, and forgotten after. Ending a session
	// already ended is no error. It also forgets every ended session whose
	// expiry is before now.
	EndSession(ctx context.Context, id string, expires, now time.Time) error
	// SessionEnded reports whether the session id has been ended.
	SessionEnded(ctx context.Context, id string) (bool, error)
}

// AuditEntry is one box-facing request kept in the audit log: every
// refusal and every request served for a box. It holds no token, value,
// query or body; Route is a template, not the path.
type AuditEntry struct {
	ID int64
	// Box is the box whose token the request carried; "" when none was
	// recognised.
	Box        string
	At         time.Time
	Method     string
	Route      string
	Capability string
	Words      []string
	Status     int
	// Reason is why the broker refused the request; "" when it did not.
	Reason string
	// Message is the refusal message the box was shown.
	Message        string
	Duration       time.Duration
	UpstreamStatus int
	// PaidBy names the entry of the operator's credential pool whose
	// credential the last upstream call was made with; "" when none was.
	PaidBy string
	// Bytes is the size of the answer's body as sent to the box.
	Bytes int64
	// Cost is the measured cost of the request's model calls in
	// micro-dollars, as the spend meter priced them when the call
	// settled; 0 when none was priced.
	Cost int64
}

// AuditQuery selects audit entries.
type AuditQuery struct {
	// Box is the box whose entries to list; "" for every entry.
	Box string
	// Since, when not zero, leaves out entries before it.
	Since time.Time
	// RefusalsOnly leaves out entries with no Reason.
	RefusalsOnly bool
	// Limit is the most entries returned (the newest); it must be positive.
	Limit int
}

// Audit keeps the audit log. Entries are never cached, so writes record
// no change; removing a box keeps its entries until they are pruned.
type Audit interface {
	// AddAudit stores entries (their IDs ignored) in one write.
	AddAudit(ctx context.Context, entries []AuditEntry) error
	// ListAudit returns the entries q selects, newest first.
	ListAudit(ctx context.Context, q AuditQuery) ([]AuditEntry, error)
	// PruneAudit forgets entries before before and says how many.
	PruneAudit(ctx context.Context, before time.Time) (int64, error)
}

// JoinBodyFields is how a store keeps a Secret's BodyFields in one
// column: comma-separated, "" for none. (A body field's name holds no
// comma: see protocol.IsBodyField.)
func JoinBodyFields(fields []string) string { return strings.Join(fields, ",") }

// JoinRules is how a store keeps a Secret's Rules in one column: one a
// line, "" for none. (A rule holds no line break: see
// protocol.ParseSecretRule.)
func JoinRules(rules []string) string { return strings.Join(rules, "\n") }

// SplitRules reads what JoinRules wrote: nil for "".
func SplitRules(s string) []string { return split(s, "\n") }

// SplitBodyFields reads what JoinBodyFields wrote: nil for "".
func SplitBodyFields(s string) []string { return split(s, ",") }

// split is s split at sep, nil for "".
func split(s, sep string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, sep)
}
