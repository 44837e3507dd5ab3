package storetest

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

func testCredentials(t *testing.T, s store.Store) {
	ctx := t.Context()
	creds := []store.Credential{
		{ID: "fountain", Sealed: []byte{0, 1, 2, 0xff}, UpdatedAt: at(1)},
		{ID: "anthropic", Sealed: []byte("sealed-anthropic"), UpdatedAt: at(2)},
		{ID: "owner:alpha", Sealed: []byte("sealed-owner"), UpdatedAt: at(3)},
		{ID: "visitor:github:ann", Sealed: []byte("sealed-visitor"), UpdatedAt: at(4)},
	}
	for _, c := range creds {
		must(t, fmt.Sprintf("SetCredential(%q)", c.ID), s.SetCredential(ctx, c))
	}
	for _, want := range creds {
		got, err := s.Credential(ctx, want.ID)
		read(t, fmt.Sprintf("Credential(%q)", want.ID), want, got, err)
	}

	replaced := store.Credential{ID: "anthropic", Sealed: []byte("sealed-anthropic-2"), UpdatedAt: at(5)}
	must(t, "SetCredential(anthropic) again", s.SetCredential(ctx, replaced))
	got, err := s.Credential(ctx, "anthropic")
	read(t, "Credential(anthropic) after replacing", replaced, got, err)

	list := answer(s.ListCredentials(ctx)).must(t, "ListCredentials()")
	for _, c := range list {
		if c.Sealed != nil {
			t.Errorf("ListCredentials() holds %q's sealed value, want Sealed nil", c.ID)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	want := []store.Credential{
		{ID: "anthropic", UpdatedAt: at(5)},
		{ID: "fountain", UpdatedAt: at(1)},
		{ID: "owner:alpha", UpdatedAt: at(3)},
		{ID: "visitor:github:ann", UpdatedAt: at(4)},
	}
	same(t, "ListCredentials()", want, list)

	must(t, "DeleteCredential(fountain)", s.DeleteCredential(ctx, "fountain"))
	_, err = s.Credential(ctx, "fountain")
	wantErr(t, "Credential(fountain) after delete", err, store.ErrNotFound)
	wantErr(t, "DeleteCredential(fountain) again", s.DeleteCredential(ctx, "fountain"), store.ErrNotFound)
	if list, err := s.ListCredentials(ctx); err != nil || len(list) != 3 {
		t.Errorf("ListCredentials() after delete = %d, %v, want 3", len(list), err)
	}
}

func testSecrets(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	mustCreateBox(t, s, "beta")
	secrets := []store.Secret{
		{Box: "alpha", Name: "OPENAI", Host: "https://api.openai.com", Sealed: []byte("sealed-a-openai"), UpdatedAt: at(1), BodyFields: []string{"client_secret", "api_key"},
			Rules: []string{"GET /v1/models", "POST /v1/*/completions", "* /v1/files/**"}, Rate: "120/m"},
		{Box: "alpha", Name: "GITHUB", Host: "https://api.github.com", Sealed: []byte("sealed-a-github"), UpdatedAt: at(2), BodyFields: []string{"key"}, Rules: []string{"GET /repos/acme/**"}, Rate: "5/s"},
		{Box: "beta", Name: "GITHUB", Host: "https://github.example.com/api", Sealed: []byte("sealed-b-github"), UpdatedAt: at(3)},
	}
	for _, sec := range secrets {
		must(t, fmt.Sprintf("SetSecret(%q, %q)", sec.Box, sec.Name), s.SetSecret(ctx, sec))
	}
	for _, want := range secrets {
		got, err := s.Secret(ctx, want.Box, want.Name)
		read(t, fmt.Sprintf("Secret(%q, %q)", want.Box, want.Name), want, got, err)
	}

	// Replacing a secret replaces its body fields, rules and rate too:
	// none named is none kept.
	replaced := store.Secret{Box: "alpha", Name: "GITHUB", Host: "https://ghe.example.com", Sealed: []byte("sealed-a-github-2"), UpdatedAt: at(4)}
	must(t, "SetSecret(alpha, GITHUB) again", s.SetSecret(ctx, replaced))
	got, err := s.Secret(ctx, "alpha", "GITHUB")
	read(t, "Secret(alpha, GITHUB) after replacing", replaced, got, err)
	if got, err := s.Secret(ctx, "beta", "GITHUB"); err != nil || !bytes.Equal(got.Sealed, secrets[2].Sealed) {
		t.Errorf("Secret(beta, GITHUB) = %q, %v, want %q: another box's secret of that name changed", got.Sealed, err, secrets[2].Sealed)
	}

	list := answer(s.ListSecrets(ctx, "alpha")).must(t, "ListSecrets(alpha)")
	for _, sec := range list {
		if sec.Sealed != nil {
			t.Errorf("ListSecrets(alpha) holds %q's sealed value, want Sealed nil", sec.Name)
		}
	}
	want := []store.Secret{
		{Box: "alpha", Name: "GITHUB", Host: "https://ghe.example.com", UpdatedAt: at(4)},
		{Box: "alpha", Name: "OPENAI", Host: "https://api.openai.com", UpdatedAt: at(1), BodyFields: []string{"client_secret", "api_key"},
			Rules: []string{"GET /v1/models", "POST /v1/*/completions", "* /v1/files/**"}, Rate: "120/m"},
	}
	same(t, "ListSecrets(alpha) (want by name)", want, list)

	must(t, "DeleteSecret(alpha, GITHUB)", s.DeleteSecret(ctx, "alpha", "GITHUB"))
	_, err = s.Secret(ctx, "alpha", "GITHUB")
	wantErr(t, "Secret(alpha, GITHUB) after delete", err, store.ErrNotFound)
	wantErr(t, "DeleteSecret(alpha, GITHUB) again", s.DeleteSecret(ctx, "alpha", "GITHUB"), store.ErrNotFound)
	wantErr(t, "Secret(beta, GITHUB) after deleting alpha's", second(s.Secret(ctx, "beta", "GITHUB")), nil)
	if list, err := s.ListSecrets(ctx, "alpha"); err != nil || len(list) != 1 {
		t.Errorf("ListSecrets(alpha) after delete = %v, %v, want OPENAI only", list, err)
	}
}

func testFeedback(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	mustCreateBox(t, s, "beta")
	batches := []store.FeedbackBatch{
		{Box: "alpha", At: at(3), Words: []string{"agent"}, Body: []byte(`{"entries":[1]}`)},
		{Box: "beta", At: at(1), Words: []string{"passive"}, Body: []byte(`{"counts":{}}`)},
		{Box: "alpha", At: at(1), Words: []string{"agent", "passive"}, Body: []byte(`{"entries":[2],"counts":{}}`)},
		{Box: "alpha", At: at(2), Body: []byte{}},
	}
	seen := map[int64]bool{}
	var last int64
	for i := range batches {
		added := answer(s.AddFeedback(ctx, batches[i], store.FeedbackBound{})).must(t, fmt.Sprintf("AddFeedback(%q)", batches[i].Box))
		id := added.ID
		if seen[id] {
			t.Errorf("AddFeedback returned ID %d twice", id)
		}
		if batches[i].Box == "alpha" && id <= last {
			t.Errorf("AddFeedback(alpha) = ID %d after %d, want IDs that grow", id, last)
		}
		if batches[i].Box == "alpha" {
			last = id
		}
		if added.Dropped != 0 || added.DroppedBytes != 0 {
			t.Errorf("AddFeedback(%q) with no bound = %+v, want nothing dropped", batches[i].Box, added)
		}
		seen[id] = true
		batches[i].ID = id
	}
	got, more := listFeedback(t, s, store.FeedbackQuery{Box: "alpha", Limit: store.MaxFeedbackPage})
	want := []store.FeedbackBatch{batches[0], batches[2], batches[3]}
	same(t, "ListFeedback(alpha) (want oldest stored first)", want, got)
	if more {
		t.Errorf("ListFeedback(alpha) of every batch says more follow")
	}
	got, _ = listFeedback(t, s, store.FeedbackQuery{Box: "beta", Limit: 10})
	same(t, "ListFeedback(beta)", []store.FeedbackBatch{batches[1]}, got)
	kept, err := s.CountFeedback(ctx, "alpha")
	read(t, "CountFeedback(alpha)", store.FeedbackKept{Batches: 3, Bytes: int64(len(batches[0].Body) + len(batches[2].Body))}, kept, err)
	kept, err = s.CountFeedback(ctx, "nobox")
	read(t, "CountFeedback(nobox)", store.FeedbackKept{}, kept, err)
	if got, more = listFeedback(t, s, store.FeedbackQuery{Box: "nobox", Limit: 10}); len(got) != 0 || more {
		t.Errorf("ListFeedback(nobox) = %d batches, more %v, want none", len(got), more)
	}
}

// listFeedback is s.ListFeedback(q), stopping the test on an error.
func listFeedback(t *testing.T, s store.Store, q store.FeedbackQuery) ([]store.FeedbackBatch, bool) {
	t.Helper()
	page, more, err := s.ListFeedback(t.Context(), q)
	must(t, fmt.Sprintf("ListFeedback(%+v)", q), err)
	return page, more
}

// testFeedbackPages: ListFeedback returns a box's batches a page at a
// time, in either order, each page starting after the cursor the last
// one ended at, and refuses a limit out of range.
func testFeedbackPages(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	mustCreateBox(t, s, "beta")
	var ids []int64
	for i := range 7 {
		for _, box := range []string{"alpha", "beta"} {
			added := answer(s.AddFeedback(ctx, store.FeedbackBatch{Box: box, At: at(i), Words: []string{"agent"},
				Body: []byte(fmt.Sprintf(`{"entries":[%d]}`, i))}, store.FeedbackBound{})).must(t, "AddFeedback")
			if box == "alpha" {
				ids = append(ids, added.ID)
			}
		}
	}
	newest := []int64{ids[6], ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]}
	size := int64(len(`{"entries":[0]}`))
	tests := []struct {
		name        string
		newestFirst bool
		maxBytes    int64
		pages       int
		want        []int64
	}{
		{"oldest first", false, 0, 3, ids},
		{"newest first", true, 0, 3, newest},
		{"oldest first, two bodies' bytes a page", false, 2 * size, 4, ids},
		{"newest first, a page ends past its bytes", true, size + 1, 4, newest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int64
			var after int64
			pages := 0
			for more := true; more; {
				if pages++; pages > 10 {
					t.Fatalf("ListFeedback pages never end: %v", got)
				}
				var page []store.FeedbackBatch
				page, more = listFeedback(t, s, store.FeedbackQuery{Box: "alpha", After: after, Limit: 3, NewestFirst: tt.newestFirst, MaxBytes: tt.maxBytes})
				if len(page) > 3 || len(page) == 0 {
					t.Fatalf("ListFeedback(alpha, limit 3, after %d) = %d batches, want 1 to 3", after, len(page))
				}
				for _, f := range page {
					if f.Box != "alpha" {
						t.Errorf("ListFeedback(alpha) holds batch %d of %q", f.ID, f.Box)
					}
					got = append(got, f.ID)
				}
				after = page[len(page)-1].ID
			}
			same(t, "ListFeedback(alpha) page by page", tt.want, got)
			if pages != tt.pages {
				t.Errorf("ListFeedback(alpha) in %d pages, want %d", pages, tt.pages)
			}
		})
	}
	for _, limit := range []int{0, -1, store.MaxFeedbackPage + 1} {
		if _, _, err := s.ListFeedback(ctx, store.FeedbackQuery{Box: "alpha", Limit: limit}); err == nil {
			t.Errorf("ListFeedback(limit %d) = nil error, want one", limit)
		}
	}
}

// testFeedbackBound: AddFeedback keeps a box within its bound, of
// batches and of bytes, by dropping that box's oldest batches in the
// same write, never the new one and never another box's.
func testFeedbackBound(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	mustCreateBox(t, s, "beta")
	add := func(box string, size int, bound store.FeedbackBound) store.FeedbackAdded {
		t.Helper()
		body := []byte(`{"entries":["` + strings.Repeat("x", size-16) + `"]}`)
		return answer(s.AddFeedback(ctx, store.FeedbackBatch{Box: box, At: at(1), Words: []string{"agent"}, Body: body}, bound)).
			must(t, fmt.Sprintf("AddFeedback(%s, %d bytes)", box, size))
	}
	list := func(box string) []int64 {
		t.Helper()
		var ids []int64
		page, _ := listFeedback(t, s, store.FeedbackQuery{Box: box, Limit: store.MaxFeedbackPage})
		for _, f := range page {
			ids = append(ids, f.ID)
		}
		return ids
	}
	count := store.FeedbackBound{Batches: 3}
	beta := add("beta", 100, count)
	var ids []int64
	for i := range 10 {
		a := add("alpha", 100, count)
		ids = append(ids, a.ID)
		want := store.FeedbackAdded{ID: a.ID}
		if i >= 3 {
			want.Dropped, want.DroppedBytes = 1, 100
		}
		same(t, fmt.Sprintf("AddFeedback #%d to a box bound to 3 batches", i+1), want, a)
	}
	same(t, "ListFeedback(alpha) bound to 3 batches", ids[7:], list("alpha"))
	same(t, "ListFeedback(beta), another box", []int64{beta.ID}, list("beta"))

	// A tighter bound, as after a restart with a smaller flag, drops
	// every batch past it at once.
	a := add("alpha", 100, store.FeedbackBound{Batches: 1})
	same(t, "AddFeedback bound to 1 batch", store.FeedbackAdded{ID: a.ID, Dropped: 3, DroppedBytes: 300}, a)
	same(t, "ListFeedback(alpha) bound to 1 batch", []int64{a.ID}, list("alpha"))

	// Bytes: 250 hold two batches of 100, and a batch of 200 leaves room
	// for none of them; one larger than the bound is kept alone.
	byBytes := store.FeedbackBound{Batches: 100, Bytes: 250}
	b := add("alpha", 100, byBytes)
	same(t, "AddFeedback of 100 bytes bound to 250", store.FeedbackAdded{ID: b.ID}, b)
	c := add("alpha", 200, byBytes)
	same(t, "AddFeedback of 200 bytes bound to 250", store.FeedbackAdded{ID: c.ID, Dropped: 2, DroppedBytes: 200}, c)
	d := add("alpha", 300, byBytes)
	same(t, "AddFeedback of 300 bytes bound to 250", store.FeedbackAdded{ID: d.ID, Dropped: 1, DroppedBytes: 200}, d)
	same(t, "ListFeedback(alpha) bound to 250 bytes", []int64{d.ID}, list("alpha"))
	kept, err := s.CountFeedback(ctx, "alpha")
	read(t, "CountFeedback(alpha)", store.FeedbackKept{Batches: 1, Bytes: 300}, kept, err)
	same(t, "ListFeedback(beta) after alpha's drops", []int64{beta.ID}, list("beta"))

	// A bound of bytes that drops more batches than one page of the
	// oldest holds drops them all, oldest first.
	ids = nil
	for range 40 {
		ids = append(ids, add("beta", 100, store.FeedbackBound{}).ID)
	}
	e := add("beta", 100, byBytes)
	same(t, "AddFeedback of 100 bytes bound to 250 after 41 kept", store.FeedbackAdded{ID: e.ID, Dropped: 40, DroppedBytes: 4000}, e)
	same(t, "ListFeedback(beta) bound to 250 bytes", []int64{ids[39], e.ID}, list("beta"))
	kept, err = s.CountFeedback(ctx, "beta")
	read(t, "CountFeedback(beta)", store.FeedbackKept{Batches: 2, Bytes: 200}, kept, err)
}

// testConcurrentFeedbackBound: appends to one box at once, as replicas
// make them, each keep the box within its bound, and between them drop
// every batch past it once: what the box keeps is what it counts.
func testConcurrentFeedbackBound(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	const writers, each, bound = 8, 5, 3
	dropped := make([]int, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				a, err := s.AddFeedback(ctx, store.FeedbackBatch{Box: "alpha", At: at(i), Words: []string{"agent"},
					Body: []byte(fmt.Sprintf(`{"entries":[%d,%d]}`, w, i))}, store.FeedbackBound{Batches: bound})
				if err != nil {
					errs[w] = err
					return
				}
				dropped[w] += a.Dropped
			}
		})
	}
	wg.Wait()
	total := 0
	for w := range writers {
		must(t, fmt.Sprintf("AddFeedback(alpha) by writer %d of %d at once", w, writers), errs[w])
		total += dropped[w]
	}
	if total != writers*each-bound {
		t.Errorf("%d appends at once to a box bound to %d dropped %d, want %d", writers*each, bound, total, writers*each-bound)
	}
	page, _ := listFeedback(t, s, store.FeedbackQuery{Box: "alpha", Limit: store.MaxFeedbackPage})
	var bytes int64
	for _, f := range page {
		bytes += int64(len(f.Body))
	}
	kept, err := s.CountFeedback(ctx, "alpha")
	read(t, "CountFeedback(alpha) after appends at once", store.FeedbackKept{Batches: bound, Bytes: bytes}, kept, err)
	if len(page) != bound {
		t.Errorf("ListFeedback(alpha) after appends at once = %d batches, want %d", len(page), bound)
	}
}

func testResources(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	mustCreateBox(t, s, "beta")
	rs := []store.Resource{
		{Box: "alpha", Kind: store.ResourceSandbox, ID: "sb-1", At: at(1)},
		{Box: "alpha", Kind: store.ResourceConversation, ID: "c-1", At: at(2)},
		{Box: "beta", Kind: store.ResourceVault, ID: "v-1", At: at(3)},
		{Box: "beta", Kind: store.ResourceConversation, ID: "sb-1", At: at(4)}, // same id, another kind
	}
	for _, r := range rs {
		must(t, fmt.Sprintf("AddResource(%q, %s/%s)", r.Box, r.Kind, r.ID), s.AddResource(ctx, r))
	}

	tests := []struct {
		kind, id string
		want     string
	}{
		{store.ResourceSandbox, "sb-1", "alpha"},
		{store.ResourceConversation, "c-1", "alpha"},
		{store.ResourceVault, "v-1", "beta"},
		{store.ResourceConversation, "sb-1", "beta"},
	}
	for _, tt := range tests {
		got, err := s.ResourceOwner(ctx, tt.kind, tt.id)
		if err != nil || got != tt.want {
			t.Errorf("ResourceOwner(%q, %q) = %q, %v, want %q", tt.kind, tt.id, got, err, tt.want)
		}
	}

	wantErr(t, "AddResource(alpha, sandbox/sb-1) again", s.AddResource(ctx, store.Resource{Box: "alpha", Kind: store.ResourceSandbox, ID: "sb-1", At: at(9)}), nil)
	seq := lastChange(t, s)
	err := s.AddResource(ctx, store.Resource{Box: "beta", Kind: store.ResourceSandbox, ID: "sb-1", At: at(9)})
	wantErr(t, "AddResource(beta, alpha's sandbox/sb-1)", err, store.ErrExists)
	noChange(t, s, "a refused AddResource", seq)
	if got, err := s.ResourceOwner(ctx, store.ResourceSandbox, "sb-1"); err != nil || got != "alpha" {
		t.Errorf("ResourceOwner(sandbox, sb-1) after another box claimed it = %q, %v, want alpha", got, err)
	}

	list := answer(s.ListResources(ctx, "alpha")).must(t, "ListResources(alpha)")
	sort.Slice(list, func(i, j int) bool { return list[i].Kind+"/"+list[i].ID < list[j].Kind+"/"+list[j].ID })
	same(t, "ListResources(alpha)", []store.Resource{rs[1], rs[0]}, list)

	must(t, "DeleteResource(sandbox, sb-1)", s.DeleteResource(ctx, store.ResourceSandbox, "sb-1"))
	_, err = s.ResourceOwner(ctx, store.ResourceSandbox, "sb-1")
	wantErr(t, "ResourceOwner(sandbox, sb-1) after delete", err, store.ErrNotFound)
	wantErr(t, "DeleteResource(sandbox, sb-1) again", s.DeleteResource(ctx, store.ResourceSandbox, "sb-1"), store.ErrNotFound)
	if got, err := s.ResourceOwner(ctx, store.ResourceConversation, "sb-1"); err != nil || got != "beta" {
		t.Errorf("ResourceOwner(conversation, sb-1) after deleting sandbox/sb-1 = %q, %v, want beta", got, err)
	}
	wantErr(t, "AddResource(beta, sandbox/sb-1) after delete", s.AddResource(ctx, store.Resource{Box: "beta", Kind: store.ResourceSandbox, ID: "sb-1", At: at(10)}), nil)
}

func testGrants(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	mustCreateBox(t, s, "beta")
	grants := []store.Grant{
		{ID: "g2", Hash: hash("v2"), Box: "alpha", Principal: "github:bob", CreatedAt: at(20), ExpiresAt: at(920)},
		{ID: "g1", Hash: hash("v1"), Box: "alpha", Principal: "github:ann", CreatedAt: at(10), ExpiresAt: at(910)},
		{ID: "g3", Hash: hash("v3"), Box: "alpha", Principal: "github:cy", CreatedAt: at(30), ExpiresAt: at(-1000)}, // expired: just data
		{ID: "g4", Hash: hash("v4"), Box: "beta", Principal: "github:ann", CreatedAt: at(40)},                       // no expiry
	}
	for _, g := range grants {
		must(t, fmt.Sprintf("CreateGrant(%q)", g.ID), s.CreateGrant(ctx, g))
	}
	for _, want := range grants {
		got, err := s.GrantByHash(ctx, want.Hash)
		read(t, fmt.Sprintf("GrantByHash(%s's hash)", want.ID), want, got, err)
	}

	dups := []struct {
		name  string
		grant store.Grant
	}{
		{"same ID", store.Grant{ID: "g1", Hash: hash("other"), Box: "alpha", Principal: "github:dee", CreatedAt: at(50)}},
		{"same hash", store.Grant{ID: "g9", Hash: hash("v1"), Box: "beta", Principal: "github:dee", CreatedAt: at(50)}},
	}
	for _, tt := range dups {
		t.Run(tt.name, func(t *testing.T) {
			seq := lastChange(t, s)
			wantErr(t, fmt.Sprintf("CreateGrant(%q)", tt.grant.ID), s.CreateGrant(ctx, tt.grant), store.ErrExists)
			noChange(t, s, "a refused CreateGrant", seq)
		})
	}

	list := answer(s.ListGrants(ctx, "alpha")).must(t, "ListGrants(alpha)")
	same(t, "ListGrants(alpha) (want newest first)", []store.Grant{grants[2], grants[0], grants[1]}, list)

	must(t, "RevokeGrant(g1)", s.RevokeGrant(ctx, "g1", at(100)))
	got := answer(s.GrantByHash(ctx, hash("v1"))).must(t, "GrantByHash(g1's hash)")
	want := grants[1]
	want.RevokedAt = at(100)
	same(t, "GrantByHash(g1's hash) after RevokeGrant", want, got)
	if got, err := s.GrantByHash(ctx, hash("v2")); err != nil || !got.RevokedAt.IsZero() {
		t.Errorf("GrantByHash(g2's hash).RevokedAt = %v, %v, want zero: revoking g1 touched g2", got.RevokedAt, err)
	}
}

func testTimes(t *testing.T, s store.Store) {
	ctx := t.Context()
	tests := []struct {
		name string
		at   time.Time
	}{
		{"zone east of UTC", time.Date(2026, 1, 2, 3, 4, 5, 6007008, time.FixedZone("X", 5*60*60+30*60))},
		{"zone west of UTC", time.Date(2026, 7, 8, 23, 59, 59, 999999999, time.FixedZone("Y", -7*60*60))},
		{"whole microseconds", time.Date(2030, 12, 31, 0, 0, 0, 123456000, time.UTC)},
		{"before 1970", time.Date(1969, 12, 31, 23, 59, 59, 500000000, time.UTC)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("box%d", i)
			must(t, fmt.Sprintf("CreateBox(%q)", name), s.CreateBox(ctx, store.Box{Name: name, TokenHash: hash(name), CreatedAt: tt.at}))
			got := answer(s.Box(ctx, name)).must(t, fmt.Sprintf("Box(%q)", name))
			if !sameTime(got.CreatedAt, tt.at) {
				t.Errorf("Box(%q).CreatedAt = %v, want %v in UTC, exact to the microsecond", name, got.CreatedAt, tt.at)
			}
		})
	}
}

func testPing(t *testing.T, s store.Store) {
	wantErr(t, "Ping()", s.Ping(t.Context()), nil)
}
