package deadline

import (
	"context"
	"net/netip"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// The methods of store.Store, each its store call under do (or do0), or
// (the few that only the admin API and the CLI make, and Close) the call
// as it is. Go has no generic forwarding of an interface's methods, so
// each is written here once; the compiler refuses the package until a
// method a new sub-interface adds to store.Store is.

// Ping reports whether the database answers within the deadline.
func (s *Store) Ping(ctx context.Context) error {
	return do0(s, ctx, "ping", s.st.Ping)
}

func (s *Store) Identity(ctx context.Context) (string, error) {
	return do(s, ctx, "read the store's identity", s.st.Identity)
}

// Unwrap is the store beneath.
func (s *Store) Unwrap() store.Store { return s.st }

// Boxes.

func (s *Store) CreateBox(ctx context.Context, b store.Box) error {
	return do0(s, ctx, "create box", func(ctx context.Context) error { return s.st.CreateBox(ctx, b) })
}

func (s *Store) Box(ctx context.Context, name string) (store.Box, error) {
	return do(s, ctx, "read box", func(ctx context.Context) (store.Box, error) { return s.st.Box(ctx, name) })
}

func (s *Store) BoxByTokenHash(ctx context.Context, hash string) (store.Box, error) {
	return do(s, ctx, "look up token", func(ctx context.Context) (store.Box, error) { return s.st.BoxByTokenHash(ctx, hash) })
}

func (s *Store) ListBoxes(ctx context.Context) ([]store.Box, error) {
	return do(s, ctx, "list boxes", s.st.ListBoxes)
}

func (s *Store) DeleteBox(ctx context.Context, name string) error {
	return do0(s, ctx, "delete box", func(ctx context.Context) error { return s.st.DeleteBox(ctx, name) })
}

func (s *Store) RotateToken(ctx context.Context, name, newHash string) error {
	return do0(s, ctx, "rotate token", func(ctx context.Context) error { return s.st.RotateToken(ctx, name, newHash) })
}

func (s *Store) ReplaceToken(ctx context.Context, name string, r store.Rotation) error {
	return do0(s, ctx, "replace token", func(ctx context.Context) error { return s.st.ReplaceToken(ctx, name, r) })
}

func (s *Store) BindBox(ctx context.Context, name string, from []netip.Prefix) error {
	return do0(s, ctx, "bind box", func(ctx context.Context) error { return s.st.BindBox(ctx, name, from) })
}

func (s *Store) UpdateBox(ctx context.Context, b store.Box) error {
	return do0(s, ctx, "update box", func(ctx context.Context) error { return s.st.UpdateBox(ctx, b) })
}

// Declarations.

func (s *Store) SaveDeclaration(ctx context.Context, box string, doc []byte, at time.Time) error {
	return do0(s, ctx, "save declaration", func(ctx context.Context) error { return s.st.SaveDeclaration(ctx, box, doc, at) })
}

func (s *Store) Declaration(ctx context.Context, box string) ([]byte, time.Time, error) {
	type decl struct {
		doc []byte
		at  time.Time
	}
	d, err := do(s, ctx, "read declaration", func(ctx context.Context) (decl, error) {
		doc, at, err := s.st.Declaration(ctx, box)
		return decl{doc, at}, err
	})
	return d.doc, d.at, err
}

// Credentials.

func (s *Store) SetCredential(ctx context.Context, c store.Credential) error {
	return do0(s, ctx, "set credential", func(ctx context.Context) error { return s.st.SetCredential(ctx, c) })
}

func (s *Store) Credential(ctx context.Context, id string) (store.Credential, error) {
	return do(s, ctx, "read credential", func(ctx context.Context) (store.Credential, error) { return s.st.Credential(ctx, id) })
}

func (s *Store) DeleteCredential(ctx context.Context, id string) error {
	return do0(s, ctx, "delete credential", func(ctx context.Context) error { return s.st.DeleteCredential(ctx, id) })
}

func (s *Store) ListCredentials(ctx context.Context) ([]store.Credential, error) {
	return do(s, ctx, "list credentials", s.st.ListCredentials)
}

// Secrets.

func (s *Store) SetSecret(ctx context.Context, sec store.Secret) error {
	return do0(s, ctx, "set secret", func(ctx context.Context) error { return s.st.SetSecret(ctx, sec) })
}

func (s *Store) Secret(ctx context.Context, box, name string) (store.Secret, error) {
	return do(s, ctx, "read secret", func(ctx context.Context) (store.Secret, error) { return s.st.Secret(ctx, box, name) })
}

func (s *Store) ListSecrets(ctx context.Context, box string) ([]store.Secret, error) {
	return do(s, ctx, "list secrets", func(ctx context.Context) ([]store.Secret, error) { return s.st.ListSecrets(ctx, box) })
}

func (s *Store) DeleteSecret(ctx context.Context, box, name string) error {
	return do0(s, ctx, "delete secret", func(ctx context.Context) error { return s.st.DeleteSecret(ctx, box, name) })
}

// Feedback.

func (s *Store) AddFeedback(ctx context.Context, f store.FeedbackBatch) (int64, error) {
	return do(s, ctx, "add feedback", func(ctx context.Context) (int64, error) { return s.st.AddFeedback(ctx, f) })
}

func (s *Store) ListFeedback(ctx context.Context, box string) ([]store.FeedbackBatch, error) {
	return do(s, ctx, "list feedback", func(ctx context.Context) ([]store.FeedbackBatch, error) { return s.st.ListFeedback(ctx, box) })
}

// Resources.

func (s *Store) AddResource(ctx context.Context, r store.Resource) error {
	return do0(s, ctx, "add resource", func(ctx context.Context) error { return s.st.AddResource(ctx, r) })
}

func (s *Store) ResourceOwner(ctx context.Context, kind, id string) (string, error) {
	return do(s, ctx, "read resource owner", func(ctx context.Context) (string, error) { return s.st.ResourceOwner(ctx, kind, id) })
}

func (s *Store) ListResources(ctx context.Context, box string) ([]store.Resource, error) {
	return do(s, ctx, "list resources", func(ctx context.Context) ([]store.Resource, error) { return s.st.ListResources(ctx, box) })
}

func (s *Store) DeleteResource(ctx context.Context, kind, id string) error {
	return do0(s, ctx, "delete resource", func(ctx context.Context) error { return s.st.DeleteResource(ctx, kind, id) })
}

// Grants.

func (s *Store) CreateGrant(ctx context.Context, g store.Grant) error {
	return do0(s, ctx, "create grant", func(ctx context.Context) error { return s.st.CreateGrant(ctx, g) })
}

func (s *Store) GrantByHash(ctx context.Context, hash string) (store.Grant, error) {
	return do(s, ctx, "look up grant", func(ctx context.Context) (store.Grant, error) { return s.st.GrantByHash(ctx, hash) })
}

func (s *Store) ListGrants(ctx context.Context, box string) ([]store.Grant, error) {
	return do(s, ctx, "list grants", func(ctx context.Context) ([]store.Grant, error) { return s.st.ListGrants(ctx, box) })
}

func (s *Store) RevokeGrant(ctx context.Context, id string, at time.Time) error {
	return do0(s, ctx, "revoke grant", func(ctx context.Context) error { return s.st.RevokeGrant(ctx, id, at) })
}

// Changes.

func (s *Store) ChangesSince(ctx context.Context, after int64, limit int) ([]store.Change, error) {
	return do(s, ctx, "read change log", func(ctx context.Context) ([]store.Change, error) { return s.st.ChangesSince(ctx, after, limit) })
}

func (s *Store) LastChange(ctx context.Context) (int64, error) {
	return do(s, ctx, "read change log", s.st.LastChange)
}

func (s *Store) PruneChanges(ctx context.Context, before time.Time) error {
	return do0(s, ctx, "prune change log", func(ctx context.Context) error { return s.st.PruneChanges(ctx, before) })
}

// Spend.

func (s *Store) SetBudget(ctx context.Context, b store.Budget) error {
	return do0(s, ctx, "set budget", func(ctx context.Context) error { return s.st.SetBudget(ctx, b) })
}

func (s *Store) ListBudgets(ctx context.Context, box string) ([]store.Budget, error) {
	return do(s, ctx, "list budgets", func(ctx context.Context) ([]store.Budget, error) { return s.st.ListBudgets(ctx, box) })
}

func (s *Store) DeleteBudget(ctx context.Context, box, principal string) error {
	return do0(s, ctx, "delete budget", func(ctx context.Context) error { return s.st.DeleteBudget(ctx, box, principal) })
}

func (s *Store) Reserve(ctx context.Context, r store.Reservation) (int64, error) {
	return do(s, ctx, "reserve", func(ctx context.Context) (int64, error) { return s.st.Reserve(ctx, r) })
}

func (s *Store) Settle(ctx context.Context, st store.Settlement) error {
	return do0(s, ctx, "settle", func(ctx context.Context) error { return s.st.Settle(ctx, st) })
}

func (s *Store) ReleaseStale(ctx context.Context, before time.Time) (int, error) {
	return do(s, ctx, "release stale reservations", func(ctx context.Context) (int, error) { return s.st.ReleaseStale(ctx, before) })
}

func (s *Store) RenewReservations(ctx context.Context, ids []int64, at time.Time) error {
	return do0(s, ctx, "renew reservations", func(ctx context.Context) error { return s.st.RenewReservations(ctx, ids, at) })
}

func (s *Store) Tallies(ctx context.Context, box, month string) ([]store.Tally, error) {
	return do(s, ctx, "read tallies", func(ctx context.Context) ([]store.Tally, error) { return s.st.Tallies(ctx, box, month) })
}

func (s *Store) ListUsage(ctx context.Context, box, month string) ([]store.Usage, error) {
	return do(s, ctx, "list usage", func(ctx context.Context) ([]store.Usage, error) { return s.st.ListUsage(ctx, box, month) })
}

// AdminTokens.

func (s *Store) CreateAdminToken(ctx context.Context, t store.AdminToken) error {
	return do0(s, ctx, "create admin token", func(ctx context.Context) error { return s.st.CreateAdminToken(ctx, t) })
}

func (s *Store) AdminTokenByHash(ctx context.Context, hash string) (store.AdminToken, error) {
	return do(s, ctx, "look up admin token", func(ctx context.Context) (store.AdminToken, error) { return s.st.AdminTokenByHash(ctx, hash) })
}

func (s *Store) AdminToken(ctx context.Context, id string) (store.AdminToken, error) {
	return do(s, ctx, "read admin token", func(ctx context.Context) (store.AdminToken, error) { return s.st.AdminToken(ctx, id) })
}

func (s *Store) ListAdminTokens(ctx context.Context) ([]store.AdminToken, error) {
	return do(s, ctx, "list admin tokens", s.st.ListAdminTokens)
}

func (s *Store) DeleteAdminToken(ctx context.Context, id string) error {
	return do0(s, ctx, "delete admin token", func(ctx context.Context) error { return s.st.DeleteAdminToken(ctx, id) })
}

// Sessions.

func (s *Store) EndSession(ctx context.Context, id string, expires, now time.Time) error {
	return do0(s, ctx, "end session", func(ctx context.Context) error { return s.st.EndSession(ctx, id, expires, now) })
}

func (s *Store) SessionEnded(ctx context.Context, id string) (bool, error) {
	return do(s, ctx, "read session", func(ctx context.Context) (bool, error) { return s.st.SessionEnded(ctx, id) })
}

// Audit.

func (s *Store) AddAudit(ctx context.Context, entries []store.AuditEntry) error {
	return do0(s, ctx, "add audit entries", func(ctx context.Context) error { return s.st.AddAudit(ctx, entries) })
}

func (s *Store) ListAudit(ctx context.Context, q store.AuditQuery) ([]store.AuditEntry, error) {
	return do(s, ctx, "list audit", func(ctx context.Context) ([]store.AuditEntry, error) { return s.st.ListAudit(ctx, q) })
}

func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	return do(s, ctx, "prune audit", func(ctx context.Context) (int64, error) { return s.st.PruneAudit(ctx, before) })
}

// Spooled.

func (s *Store) ApplySpooled(ctx context.Context, key string, settle []store.Settlement, audit []store.AuditEntry) (bool, error) {
	return do(s, ctx, "apply spooled batch", func(ctx context.Context) (bool, error) { return s.st.ApplySpooled(ctx, key, settle, audit) })
}

func (s *Store) SetPoolEntry(ctx context.Context, e store.PoolEntry) error {
	return do0(s, ctx, "set pool entry", func(ctx context.Context) error { return s.st.SetPoolEntry(ctx, e) })
}

func (s *Store) PoolEntries(ctx context.Context) ([]store.PoolEntry, error) {
	return do(s, ctx, "read pool", func(ctx context.Context) ([]store.PoolEntry, error) { return s.st.PoolEntries(ctx) })
}

func (s *Store) DeletePoolEntry(ctx context.Context, name string) error {
	return do0(s, ctx, "delete pool entry", func(ctx context.Context) error { return s.st.DeletePoolEntry(ctx, name) })
}

func (s *Store) SetMintState(ctx context.Context, st store.MintState) error {
	return do0(s, ctx, "set mint state", func(ctx context.Context) error { return s.st.SetMintState(ctx, st) })
}

func (s *Store) MintState(ctx context.Context, box, name string) (store.MintState, error) {
	return do(s, ctx, "read mint state", func(ctx context.Context) (store.MintState, error) { return s.st.MintState(ctx, box, name) })
}

func (s *Store) ListMintStates(ctx context.Context, box string) ([]store.MintState, error) {
	return do(s, ctx, "list mint states", func(ctx context.Context) ([]store.MintState, error) { return s.st.ListMintStates(ctx, box) })
}

func (s *Store) ProxyCA(ctx context.Context) (store.ProxyCA, error) {
	return do(s, ctx, "read proxy CA", func(ctx context.Context) (store.ProxyCA, error) { return s.st.ProxyCA(ctx) })
}

func (s *Store) CreateProxyCA(ctx context.Context, ca store.ProxyCA) (store.ProxyCA, error) {
	return do(s, ctx, "create proxy CA", func(ctx context.Context) (store.ProxyCA, error) { return s.st.CreateProxyCA(ctx, ca) })
}

func (s *Store) ReplaceProxyCA(ctx context.Context, was, ca store.ProxyCA) (store.ProxyCA, error) {
	return do(s, ctx, "replace proxy CA", func(ctx context.Context) (store.ProxyCA, error) { return s.st.ReplaceProxyCA(ctx, was, ca) })
}

// Unbounded: the owner's page's overview and charts, called only by the
// admin API and the CLI, and Close.

func (s *Store) BoxActivity(ctx context.Context, since time.Time) ([]store.BoxActivity, error) {
	return s.st.BoxActivity(ctx, since)
}

func (s *Store) AuditHours(ctx context.Context, box string, since time.Time) ([]store.HourCount, error) {
	return s.st.AuditHours(ctx, box, since)
}

func (s *Store) RefusalGroups(ctx context.Context, box string, since time.Time, limit int) ([]store.RefusalGroup, error) {
	return s.st.RefusalGroups(ctx, box, since, limit)
}

func (s *Store) MonthOverview(ctx context.Context, month string) ([]store.BoxMonth, error) {
	return s.st.MonthOverview(ctx, month)
}

func (s *Store) AllDeclarations(ctx context.Context) (map[string]store.KeptDeclaration, error) {
	return s.st.AllDeclarations(ctx)
}

func (s *Store) ListBoxPage(ctx context.Context, q store.BoxQuery) (store.BoxPage, error) {
	return do(s, ctx, "list box page", func(ctx context.Context) (store.BoxPage, error) { return s.st.ListBoxPage(ctx, q) })
}

func (s *Store) SecretNames(ctx context.Context) (map[string][]string, error) {
	return s.st.SecretNames(ctx)
}

func (s *Store) AuditPage(ctx context.Context, box string, offset, limit int) ([]store.AuditEntry, error) {
	return s.st.AuditPage(ctx, box, offset, limit)
}

func (s *Store) FleetUsage(ctx context.Context, month string) ([]store.Usage, error) {
	return s.st.FleetUsage(ctx, month)
}

func (s *Store) FleetTotal(ctx context.Context, month string) (store.MonthTotal, error) {
	return do(s, ctx, "fleet total", func(ctx context.Context) (store.MonthTotal, error) { return s.st.FleetTotal(ctx, month) })
}

func (s *Store) FleetTallies(ctx context.Context, month string) ([]store.Tally, error) {
	return s.st.FleetTallies(ctx, month)
}

func (s *Store) AuditDays(ctx context.Context, box string, since time.Time) ([]store.DayCost, error) {
	return s.st.AuditDays(ctx, box, since)
}

func (s *Store) Close() error { return s.st.Close() }

// PromptCache.

func (s *Store) ListCache(ctx context.Context, box, month string) ([]store.CacheUsage, error) {
	return do(s, ctx, "list prompt cache", func(ctx context.Context) ([]store.CacheUsage, error) { return s.st.ListCache(ctx, box, month) })
}

func (s *Store) ListCacheSince(ctx context.Context, box string, since time.Time) ([]store.CacheUsage, error) {
	return do(s, ctx, "list prompt cache by hour", func(ctx context.Context) ([]store.CacheUsage, error) {
		return s.st.ListCacheSince(ctx, box, since)
	})
}
