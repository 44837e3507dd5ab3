// Package storetest is the one suite every store.Store passes: Run checks
// each operation, its edge cases, its sentinel errors and the changes log,
// against whatever implementation open returns.
//
// store/sqlite runs it on a temporary file; store/postgres runs it against
// a real server.
package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/intentius/boxbroker/internal/store"
)

// Run runs the suite. open is called once per subtest and must return a
// new, empty store, closed by a t.Cleanup it registers.
func Run(t *testing.T, open func(t *testing.T) store.Store, opts ...Option) {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Store)
	}{
		{"Boxes", testBoxes},
		{"ConcurrentCreateBox", testConcurrentCreateBox},
		{"RotateToken", testRotateToken},
		{"BindAndReplaceToken", testBindAndReplaceToken},
		{"UpdateBox", testUpdateBox},
		{"DeleteBoxCascades", testDeleteBoxCascades},
		{"Declarations", testDeclarations},
		{"ConcurrentDeclarations", testConcurrentDeclarations},
		{"Credentials", testCredentials},
		{"Secrets", testSecrets},
		{"Feedback", testFeedback},
		{"FeedbackPages", testFeedbackPages},
		{"FeedbackBound", testFeedbackBound},
		{"ConcurrentFeedbackBound", testConcurrentFeedbackBound},
		{"Resources", testResources}, {"ResourceOfAReenrolledBox", testResourceOfAReenrolledBox},
		{"ReadsOfAReenrolledBox", testReadsOfAReenrolledBox},
		{"Grants", testGrants},
		{"Times", testTimes},
		{"NotFound", testNotFound},
		{"ChangesEveryWrite", testChangesEveryWrite},
		{"ChangesSince", testChangesSince},
		{"PruneChanges", testPruneChanges},
		{"ChangesReaderMissesNothing", testChangesReaderMissesNothing},
		{"Ping", testPing},
		{"Identity", testIdentity},
		{"AdminTokens", testAdminTokens},
		{"Sessions", testSessions},
		{"Audit", testAudit},
		{"AuditBatches", testAuditBatches},
		{"PruneAuditMany", testPruneAuditMany},
		{"ProxyCA", testProxyCA}, {"ConcurrentCreateProxyCA", testConcurrentCreateProxyCA}, {"ReplaceProxyCA", testReplaceProxyCA},
		{"Mints", testMints},
		{"Overview", testOverview},
		{"ListBoxPage", testListBoxPage},
		{"FleetSpend", testFleetSpend},
		{"Pool", testPool},
		{"AuditCosts", testAuditCosts},
		{"PromptCache", testPromptCache}, {"PromptCacheReplicaAhead", testPromptCacheReplicaAhead},
		{"DeclarationOfAReenrolledBox", testDeclarationOfAReenrolledBox}, {"DeclarationAsTheGraceEnds", testDeclarationAsTheGraceEnds},
		{"DeclarationAsTheTokenExpires", testDeclarationAsTheTokenExpires}, {"DeclarationOfToken", testDeclarationOfToken},
		{"Proposals", testProposals}, {"ConcurrentProposals", testConcurrentProposals}, {"ProposalOfAReenrolledBox", testProposalOfAReenrolledBox},
		{"ApprovalsOfAReenrolledBox", testApprovalsOfAReenrolledBox},
		{"FeedbackOfAReenrolledBox", testFeedbackOfAReenrolledBox},
		{"Budgets", testBudgets},
		{"ReserveAndSettle", testReserveAndSettle},
		{"ReservePrincipal", testReservePrincipal},
		{"ConcurrentReserve", testConcurrentReserve},
		{"ConcurrentReservePrincipalCeiling", testConcurrentReservePrincipalCeiling},
		{"ReleaseStale", testReleaseStale},
		{"Usage", testUsage},
		{"SpendGoesWithBox", testSpendGoesWithBox}, {"SpendOfAReenrolledBox", testSpendOfAReenrolledBox},
		{"WindowBudgets", testWindowBudgets},
		{"WindowReserveAndSettle", testWindowReserveAndSettle},
		{"ConcurrentWindowReserve", testConcurrentWindowReserve},
		{"RateLimits", testRateLimits},
		{"Alerts", testAlerts},
		{"ApplySpooledOnce", testApplySpooledOnce},
		{"ApplySpooledSumsAsOneByOne", testApplySpooledSumsAsOneByOne},
		{"ApplySpooledOverflowIsRejected", testApplySpooledOverflowIsRejected},
		{"RenewReservations", testRenewReservations},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, open(t))
		})
	}
	clockTests := []struct {
		name string
		run  func(t *testing.T, s store.Store, c *clock)
	}{
		{"ApplySpooledOnceAfterAClockJump", testApplySpooledOnceAfterAClockJump},
		{"PruneChangesAfterAClockJump", testPruneChangesAfterAClockJump},
	}
	for _, tt := range clockTests {
		t.Run(tt.name, func(t *testing.T) {
			if o.clocked == nil {
				t.Skip("the store's replica clock is not given (storetest.Clocked)")
			}
			c := new(clock)
			tt.run(t, o.clocked(t, c.now), c)
		})
	}
	replicaTests := []struct {
		name string
		run  func(t *testing.T, behind, on store.Store)
	}{
		{"ReservationOfAReplicaBehindIsKept", testReservationOfAReplicaBehindIsKept},
	}
	for _, tt := range replicaTests {
		t.Run(tt.name, func(t *testing.T) {
			if o.replicas == nil {
				t.Skip("two replicas of one store are not given (storetest.Replicas)")
			}
			behind, on := new(clock), new(clock)
			behind.jump(-time.Hour)
			rs := o.replicas(t, []func() time.Time{behind.now, on.now})
			tt.run(t, rs[0], rs[1])
		})
	}
}

// Option gives Run more than open.
type Option func(*options)

type options struct {
	clocked  func(t *testing.T, now func() time.Time) store.Store
	replicas func(t *testing.T, nows []func() time.Time) []store.Store
}

// Replicas gives Run open, which opens a new, empty database and one
// store on it for each of nows, whose replica's clock it is (as
// Clocked's): the cases of replicas whose clocks differ run on them, and
// are skipped without it.
func Replicas(open func(t *testing.T, nows []func() time.Time) []store.Store) Option {
	return func(o *options) { o.replicas = open }
}

// Clocked gives Run open, which opens a new, empty store as Run's open
// does, whose replica's clock (the time the store reads of the replica
// it runs in) is now: the cases that move a replica's clock run on it,
// and are skipped without it.
func Clocked(open func(t *testing.T, now func() time.Time) store.Store) Option {
	return func(o *options) { o.clocked = open }
}

// clock is a replica's clock that a case moves: the machine's, plus
// what jump added.
type clock struct{ ahead atomic.Int64 }

func (c *clock) now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

// jump moves the clock d ahead.
func (c *clock) jump(d time.Duration) { c.ahead.Add(int64(d)) }

// at is the suite's clock, n seconds after a fixed time given in a zone
// other than UTC and with nanoseconds, so that the suite sees stores
// normalise both.
func at(n int) time.Time {
	return time.Date(2026, 10, 3, 14, 30, 15+n, 123456789, time.FixedZone("CEST", 2*60*60))
}

// sameTime reports whether got is want as a store keeps it: in UTC, exact
// to at least the microsecond.
func sameTime(got, want time.Time) bool {
	if want.IsZero() {
		return got.IsZero()
	}
	return got.Location() == time.UTC && !got.Before(want.Truncate(time.Microsecond)) && !got.After(want)
}

// diff compares domain values as a store keeps them: times by sameTime,
// nil and empty slices alike.
func diff(want, got any) string {
	return cmp.Diff(want, got,
		cmp.Comparer(func(a, b time.Time) bool { return sameTime(a, b) || sameTime(b, a) }),
		cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
		cmpopts.EquateEmpty())
}

// same fails the test unless got is want as a store keeps it (diff);
// what names got in the message.
func same(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := diff(want, got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

// read stops the test if the read call returned an error, and fails it
// unless what it returned, got, is want (same).
func read(t *testing.T, call string, want, got any, err error) {
	t.Helper()
	must(t, call, err)
	same(t, call, want, got)
}

// hash is the SHA-256 of v, hex, as tokens and grants are kept.
func hash(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// newBox is a box named name whose token is "token-"+name.
func newBox(name string) store.Box {
	return store.Box{Name: name, TokenHash: hash("token-" + name), CreatedAt: at(0), PayerKind: "shared"}
}

// tokenOf is the hash of the token of newBox(name).
func tokenOf(name string) string { return hash("token-" + name) }

// mustCreateBox creates newBox(name) and returns it.
func mustCreateBox(t testing.TB, s store.Store, name string) store.Box {
	t.Helper()
	b := newBox(name)
	must(t, fmt.Sprintf("CreateBox(%q)", name), s.CreateBox(t.Context(), b))
	return b
}

// wantErr fails unless errors.Is(err, want); want nil means err must be nil.
func wantErr(t *testing.T, call string, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("%s = %v, want nil", call, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("%s = %v, want %v", call, err, want)
	}
}

// lastChange returns s.LastChange, failing on error.
func lastChange(t *testing.T, s store.Store) int64 {
	t.Helper()
	return answer(s.LastChange(t.Context())).must(t, "LastChange()")
}

// changesAfter returns every change with Seq > after, checking that Seqs
// ascend strictly.
func changesAfter(t *testing.T, s store.Store, after int64) []store.Change {
	t.Helper()
	var all []store.Change
	for {
		cs := answer(s.ChangesSince(t.Context(), after, 100)).must(t, fmt.Sprintf("ChangesSince(%d, 100)", after))
		for _, c := range cs {
			if c.Seq <= after {
				t.Fatalf("ChangesSince: Seq %d after %d, want ascending", c.Seq, after)
			}
			after = c.Seq
		}
		all = append(all, cs...)
		if len(cs) < 100 {
			return all
		}
	}
}

// keys is the kind and key of each change, sorted, Seq dropped.
func keys(cs []store.Change) []store.Change {
	out := make([]store.Change, len(cs))
	for i, c := range cs {
		out[i] = store.Change{Kind: c.Kind, Key: c.Key}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// noChange fails if s recorded a change after seq.
func noChange(t *testing.T, s store.Store, call string, seq int64) {
	t.Helper()
	if cs := changesAfter(t, s, seq); len(cs) != 0 {
		t.Errorf("%s recorded changes %v, want none", call, keys(cs))
	}
}

// atOnce calls f(0) to f(n-1), each on a goroutine of its own, all at
// once, and returns what each returned.
func atOnce(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errs
}

// must stops the test if the call named call returned an error.
func must(t testing.TB, call string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s = %v, want nil", call, err)
	}
}

// answered is what a call returned: its value and its error.
type answered[T any] struct {
	v   T
	err error
}

// answer is what a call returned, for must:
// answer(s.ListBoxes(ctx)).must(t, "ListBoxes()").
func answer[T any](v T, err error) answered[T] { return answered[T]{v, err} }

// must stops the test if the call named call returned an error, and
// returns the call's value.
func (a answered[T]) must(t *testing.T, call string) T {
	t.Helper()
	must(t, call, a.err)
	return a.v
}

// is stops the test if the call named call returned an error, and fails
// it unless the call's value is want as a store keeps it (same).
func (a answered[T]) is(t *testing.T, call string, want T) {
	t.Helper()
	read(t, call, want, a.v, a.err)
}

// held stops the test unless the reservation named call returned no
// error and an ID (a reservation held), and returns the ID.
func (a answered[T]) held(t *testing.T, call string) T {
	t.Helper()
	if a.err != nil || reflect.ValueOf(a.v).IsZero() {
		t.Fatalf("%s = %v, %v, want an ID, nil", call, a.v, a.err)
	}
	return a.v
}

// none fails the test unless the call named call returned no error and
// an empty list.
func (a answered[T]) none(t *testing.T, call string) {
	t.Helper()
	if a.err != nil || reflect.ValueOf(a.v).Len() != 0 {
		t.Errorf("%s = %v, %v, want none", call, a.v, a.err)
	}
}
