package storetest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// addFeedback adds f as a batch of its box admitted with the box's token
// (tokenOf) would.
func addFeedback(ctx context.Context, s store.Store, f store.FeedbackBatch, bound store.FeedbackBound) (store.FeedbackAdded, error) {
	return s.AddFeedback(ctx, f, tokenOf(f.Box), bound)
}

// credentials is the store's credentials, by ID.
func credentials(s store.Store) concept[store.Credential] {
	return concept[store.Credential]{set: "SetCredential", del: "DeleteCredential", key: func(c store.Credential) string { return fmt.Sprintf("%q", c.ID) },
		write: s.SetCredential, remove: func(ctx context.Context, c store.Credential) error { return s.DeleteCredential(ctx, c.ID) },
		reads: []reader[store.Credential]{{"Credential", nil, func(ctx context.Context, c store.Credential) (store.Credential, error) {
			return s.Credential(ctx, c.ID)
		}}}}
}

func testCredentials(t *testing.T, s store.Store) {
	ctx := t.Context()
	creds := []store.Credential{
		{ID: "fountain", Sealed: []byte{0, 1, 2, 0xff}, UpdatedAt: at(1)},
		{ID: "anthropic", Sealed: []byte("sealed-anthropic"), UpdatedAt: at(2)},
		{ID: "owner:alpha", Sealed: []byte("sealed-owner"), UpdatedAt: at(3)},
		{ID: "visitor:github:ann", Sealed: []byte("sealed-visitor"), UpdatedAt: at(4)},
	}
	c := credentials(s)
	c.sets(t, creds...)
	c.gets(t, "", creds...)
	c.replaces(t, store.Credential{ID: "anthropic", Sealed: []byte("sealed-anthropic-2"), UpdatedAt: at(5)})

	list := answer(s.ListCredentials(ctx)).must(t, "ListCredentials()")
	noSealed(t, "ListCredentials()", list, func(c store.Credential) (string, []byte) { return c.ID, c.Sealed })
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	want := []store.Credential{
		{ID: "anthropic", UpdatedAt: at(5)},
		{ID: "fountain", UpdatedAt: at(1)},
		{ID: "owner:alpha", UpdatedAt: at(3)},
		{ID: "visitor:github:ann", UpdatedAt: at(4)},
	}
	same(t, "ListCredentials()", want, list)

	c.removes(t, creds[0])
	if list, err := s.ListCredentials(ctx); err != nil || len(list) != 3 {
		t.Errorf("ListCredentials() after delete = %d, %v, want 3", len(list), err)
	}
}

// secrets is the store's secrets, by box and name.
func secrets(s store.Store) concept[store.Secret] {
	return concept[store.Secret]{set: "SetSecret", del: "DeleteSecret", key: func(sec store.Secret) string { return fmt.Sprintf("%q, %q", sec.Box, sec.Name) },
		write: s.SetSecret, remove: func(ctx context.Context, sec store.Secret) error { return s.DeleteSecret(ctx, sec.Box, sec.Name) },
		reads: []reader[store.Secret]{{"Secret", nil, func(ctx context.Context, sec store.Secret) (store.Secret, error) {
			return s.Secret(ctx, sec.Box, sec.Name)
		}}}}
}

func testSecrets(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	mustCreateBox(t, s, "beta")
	all := []store.Secret{
		{Box: "alpha", Name: "OPENAI", Host: "https://api.openai.com", Sealed: []byte("sealed-a-openai"), UpdatedAt: at(1), BodyFields: []string{"client_secret", "api_key"},
			Rules: []string{"GET /v1/models", "POST /v1/*/completions", "* /v1/files/**"}, Rate: "120/m"},
		{Box: "alpha", Name: "GITHUB", Host: "https://api.github.com", Sealed: []byte("sealed-a-github"), UpdatedAt: at(2), BodyFields: []string{"key"}, Rules: []string{"GET /repos/acme/**"}, Rate: "5/s"},
		{Box: "beta", Name: "GITHUB", Host: "https://github.example.com/api", Sealed: []byte("sealed-b-github"), UpdatedAt: at(3)},
	}
	c := secrets(s)
	c.sets(t, all...)
	c.gets(t, "", all...)

	// Replacing a secret replaces its body fields, rules and rate too:
	// none named is none kept; another box's secret of that name stays.
	c.replaces(t, store.Secret{Box: "alpha", Name: "GITHUB", Host: "https://ghe.example.com", Sealed: []byte("sealed-a-github-2"), UpdatedAt: at(4)})
	c.gets(t, " after replacing alpha's", all[2])

	list := answer(s.ListSecrets(ctx, "alpha")).must(t, "ListSecrets(alpha)")
	noSealed(t, "ListSecrets(alpha)", list, func(sec store.Secret) (string, []byte) { return sec.Name, sec.Sealed })
	want := []store.Secret{
		{Box: "alpha", Name: "GITHUB", Host: "https://ghe.example.com", UpdatedAt: at(4)},
		{Box: "alpha", Name: "OPENAI", Host: "https://api.openai.com", UpdatedAt: at(1), BodyFields: []string{"client_secret", "api_key"},
			Rules: []string{"GET /v1/models", "POST /v1/*/completions", "* /v1/files/**"}, Rate: "120/m"},
	}
	same(t, "ListSecrets(alpha) (want by name)", want, list)

	c.removes(t, all[1])
	c.gets(t, " after deleting alpha's", all[2])
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
		added := answer(addFeedback(ctx, s, batches[i], store.FeedbackBound{})).must(t, fmt.Sprintf("AddFeedback(%q)", batches[i].Box))
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
	answer(s.CountFeedback(ctx, "alpha")).is(t, "CountFeedback(alpha)", store.FeedbackKept{Batches: 3, Bytes: int64(len(batches[0].Body) + len(batches[2].Body))})
	answer(s.CountFeedback(ctx, "nobox")).is(t, "CountFeedback(nobox)", store.FeedbackKept{})
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
			added := answer(addFeedback(ctx, s, store.FeedbackBatch{Box: box, At: at(i), Words: []string{"agent"},
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
		return answer(addFeedback(ctx, s, store.FeedbackBatch{Box: box, At: at(1), Words: []string{"agent"}, Body: body}, bound)).
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
	answer(s.CountFeedback(ctx, "alpha")).is(t, "CountFeedback(alpha)", store.FeedbackKept{Batches: 1, Bytes: 300})
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
	answer(s.CountFeedback(ctx, "beta")).is(t, "CountFeedback(beta)", store.FeedbackKept{Batches: 2, Bytes: 200})
}

// testConcurrentFeedbackBound: appends to one box at once, as replicas
// make them, each keep the box within its bound, and between them drop
// every batch past it once: what the box keeps is what it counts.
func testConcurrentFeedbackBound(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	const writers, each, bound = 8, 5, 3
	dropped := make([]int, writers)
	errs := atOnce(writers, func(w int) error {
		for i := range each {
			a, err := addFeedback(ctx, s, store.FeedbackBatch{Box: "alpha", At: at(i), Words: []string{"agent"},
				Body: []byte(fmt.Sprintf(`{"entries":[%d,%d]}`, w, i))}, store.FeedbackBound{Batches: bound})
			if err != nil {
				return err
			}
			dropped[w] += a.Dropped
		}
		return nil
	})
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
	answer(s.CountFeedback(ctx, "alpha")).is(t, "CountFeedback(alpha) after appends at once", store.FeedbackKept{Batches: bound, Bytes: bytes})
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
		answer(s.ResourceOwner(ctx, tt.kind, tt.id)).is(t, fmt.Sprintf("ResourceOwner(%q, %q)", tt.kind, tt.id), tt.want)
	}

	wantErr(t, "AddResource(alpha, sandbox/sb-1) again", s.AddResource(ctx, store.Resource{Box: "alpha", Kind: store.ResourceSandbox, ID: "sb-1", At: at(9)}), nil)
	refused(t, s, "AddResource(beta, alpha's sandbox/sb-1)", func(ctx context.Context) error {
		return s.AddResource(ctx, store.Resource{Box: "beta", Kind: store.ResourceSandbox, ID: "sb-1", At: at(9)})
	}, store.ErrExists)
	answer(s.ResourceOwner(ctx, store.ResourceSandbox, "sb-1")).is(t, "ResourceOwner(sandbox, sb-1) after another box claimed it", "alpha")

	list := answer(s.ListResources(ctx, "alpha")).must(t, "ListResources(alpha)")
	sort.Slice(list, func(i, j int) bool { return list[i].Kind+"/"+list[i].ID < list[j].Kind+"/"+list[j].ID })
	same(t, "ListResources(alpha)", []store.Resource{rs[1], rs[0]}, list)

	must(t, "DeleteResource(sandbox, sb-1)", s.DeleteResource(ctx, store.ResourceSandbox, "sb-1"))
	wantErr(t, "ResourceOwner(sandbox, sb-1) after delete", second(s.ResourceOwner(ctx, store.ResourceSandbox, "sb-1")), store.ErrNotFound)
	wantErr(t, "DeleteResource(sandbox, sb-1) again", s.DeleteResource(ctx, store.ResourceSandbox, "sb-1"), store.ErrNotFound)
	answer(s.ResourceOwner(ctx, store.ResourceConversation, "sb-1")).is(t, "ResourceOwner(conversation, sb-1) after deleting sandbox/sb-1", "beta")
	wantErr(t, "AddResource(beta, sandbox/sb-1) after delete", s.AddResource(ctx, store.Resource{Box: "beta", Kind: store.ResourceSandbox, ID: "sb-1", At: at(10)}), nil)
}

// testResourceOfAReenrolledBox: a resource made by a request admitted
// with the token of a box removed since is not recorded as one of the
// box added under its name; one made with a box's token before its
// rotation is recorded within the grace and not past it, nor once the
// token is replaced with no grace.
func testResourceOfAReenrolledBox(t *testing.T, s store.Store) {
	ctx := t.Context()
	old := mustCreateBox(t, s, "alpha")
	must(t, "DeleteBox(alpha)", s.DeleteBox(ctx, "alpha"))
	must(t, "CreateBox(alpha) anew", s.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: hash("token-alpha-2"), CreatedAt: at(1), PayerKind: "shared"}))
	conversation := func(id string) store.Resource {
		return store.Resource{Box: "alpha", Kind: store.ResourceConversation, ID: id, At: at(2)}
	}
	wantErr(t, "AddBoxResource(alpha, c-old) with the removed box's token", s.AddBoxResource(ctx, conversation("c-old"), old.TokenHash), store.ErrNotFound)
	wantErr(t, "ResourceOwner(c-old)", second(s.ResourceOwner(ctx, store.ResourceConversation, "c-old")), store.ErrNotFound)

	must(t, "AddBoxResource(alpha, c-1) with its own token", s.AddBoxResource(ctx, conversation("c-1"), hash("token-alpha-2")))
	must(t, "AddBoxResource(alpha, c-1) again", s.AddBoxResource(ctx, conversation("c-1"), hash("token-alpha-2")))
	must(t, "ReplaceToken(alpha)", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-3"), GraceUntil: time.Now().Add(time.Hour)}))
	must(t, "AddBoxResource(alpha, c-2) with its token before the rotation", s.AddBoxResource(ctx, conversation("c-2"), hash("token-alpha-2")))
	wantErr(t, "AddBoxResource(alpha, c-3) with another box's token", s.AddBoxResource(ctx, conversation("c-3"), hash("token-beta")), store.ErrNotFound)
	must(t, "ReplaceToken(alpha)", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-4"), GraceUntil: time.Now().Add(-time.Second)}))
	wantErr(t, "AddBoxResource(alpha, c-4) with its token before the rotation, past the grace", s.AddBoxResource(ctx, conversation("c-4"), hash("token-alpha-3")), store.ErrGraceEnded)
	must(t, "RotateToken(alpha)", s.RotateToken(ctx, "alpha", hash("token-alpha-5")))
	wantErr(t, "AddBoxResource(alpha, c-5) with its token before a rotation with no grace", s.AddBoxResource(ctx, conversation("c-5"), hash("token-alpha-4")), store.ErrNotFound)
	list := answer(s.ListResources(ctx, "alpha")).must(t, "ListResources(alpha)")
	if len(list) != 2 || list[0].ID != "c-1" || list[1].ID != "c-2" {
		t.Errorf("ListResources(alpha) = %+v; want c-1 and c-2", list)
	}
}

// testReadsOfAReenrolledBox: the secret, the owner's credential and the
// resources a request reads by its box's name are read only while the box holds the token
// the request was admitted with: one of a box removed since reads none
// of the box added under its name (nor the ids it owns as its own); one
// with a box's token before its rotation reads the box's within the
// grace and none past it, nor once the token is replaced with no grace,
// nor past the token's expiry.
func testReadsOfAReenrolledBox(t *testing.T, s store.Store) {
	ctx := t.Context()
	old := mustCreateBox(t, s, "alpha")
	mustCreateBox(t, s, "beta")
	must(t, "SetSecret(alpha, GITHUB) of the box to be removed", s.SetSecret(ctx, store.Secret{Box: "alpha", Name: "GITHUB", Host: "https://old.example", Sealed: []byte("sealed-old"), UpdatedAt: at(1)}))
	must(t, "DeleteBox(alpha)", s.DeleteBox(ctx, "alpha"))
	must(t, "CreateBox(alpha) anew", s.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: hash("token-alpha-2"), CreatedAt: at(1), PayerKind: "shared"}))
	sec := store.Secret{Box: "alpha", Name: "GITHUB", Host: "https://new.example", Sealed: []byte("sealed-new"), UpdatedAt: at(2)}
	must(t, "SetSecret(alpha, GITHUB) of the new box", s.SetSecret(ctx, sec))
	cred := store.Credential{ID: "owner:alpha", Sealed: []byte("sealed-new-owner"), UpdatedAt: at(2)}
	must(t, "SetCredential(owner:alpha) of the new box's owner", s.SetCredential(ctx, cred))
	must(t, "AddResource(alpha, sandbox/sb-new)", s.AddResource(ctx, store.Resource{Box: "alpha", Kind: store.ResourceSandbox, ID: "sb-new", At: at(3)}))
	must(t, "AddResource(beta, sandbox/sb-beta)", s.AddResource(ctx, store.Resource{Box: "beta", Kind: store.ResourceSandbox, ID: "sb-beta", At: at(3)}))
	reads := func(call, tokenHash string, want bool) {
		t.Helper()
		if got, err := s.SecretOfToken(ctx, "alpha", tokenHash, "GITHUB"); want {
			read(t, "SecretOfToken(alpha, GITHUB) "+call, sec, got, err)
		} else {
			wantErr(t, "SecretOfToken(alpha, GITHUB) "+call, err, store.ErrNotFound)
		}
		if got, err := s.CredentialOfToken(ctx, "owner:alpha", "alpha", tokenHash); want {
			read(t, "CredentialOfToken(owner:alpha, alpha) "+call, cred, got, err)
		} else {
			wantErr(t, "CredentialOfToken(owner:alpha, alpha) "+call, err, store.ErrNotFound)
		}
		if got, err := s.ResourceOwnerOfToken(ctx, "alpha", tokenHash, store.ResourceSandbox, "sb-new"); want {
			read(t, "ResourceOwnerOfToken(alpha, sandbox, sb-new) "+call, "alpha", got, err)
		} else {
			wantErr(t, "ResourceOwnerOfToken(alpha, sandbox, sb-new) "+call, err, store.ErrNotFound)
		}
		if got, err := s.ResourceOwnerOfToken(ctx, "alpha", tokenHash, store.ResourceSandbox, "sb-beta"); want {
			read(t, "ResourceOwnerOfToken(alpha, sandbox, sb-beta) "+call, "beta", got, err)
		} else {
			wantErr(t, "ResourceOwnerOfToken(alpha, sandbox, sb-beta) "+call, err, store.ErrNotFound)
		}
		list, err := s.ListResourcesOfToken(ctx, "alpha", tokenHash)
		if err != nil || (len(list) == 1) != want || len(list) > 1 || (want && list[0].ID != "sb-new") {
			t.Errorf("ListResourcesOfToken(alpha) %s = %+v, %v; want sb-new: %v", call, list, err, want)
		}
	}
	reads("with the removed box's token", old.TokenHash, false)
	reads("with another box's token", tokenOf("beta"), false)
	reads("with its own token", hash("token-alpha-2"), true)
	wantErr(t, "SecretOfToken(alpha, OPENAI) with its own token", second(s.SecretOfToken(ctx, "alpha", hash("token-alpha-2"), "OPENAI")), store.ErrNotFound)
	wantErr(t, "CredentialOfToken(owner:beta, alpha) with its own token", second(s.CredentialOfToken(ctx, "owner:beta", "alpha", hash("token-alpha-2"))), store.ErrNotFound)
	wantErr(t, "ResourceOwnerOfToken(alpha, sandbox, sb-none) with its own token", second(s.ResourceOwnerOfToken(ctx, "alpha", hash("token-alpha-2"), store.ResourceSandbox, "sb-none")), store.ErrNotFound)

	alphasTokenLife(t, s, reads)
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
	c := concept[store.Grant]{set: "CreateGrant", key: func(g store.Grant) string { return fmt.Sprintf("%q", g.ID) }, write: s.CreateGrant,
		reads: []reader[store.Grant]{{"GrantByHash", func(g store.Grant) string { return g.ID + "'s hash" },
			func(ctx context.Context, g store.Grant) (store.Grant, error) { return s.GrantByHash(ctx, g.Hash) }}}}
	c.sets(t, grants...)
	c.gets(t, "", grants...)
	c.refuses(t, s, map[string]store.Grant{
		"same ID":   {ID: "g1", Hash: hash("other"), Box: "alpha", Principal: "github:dee", CreatedAt: at(50)},
		"same hash": {ID: "g9", Hash: hash("v1"), Box: "beta", Principal: "github:dee", CreatedAt: at(50)},
	})

	answer(s.ListGrants(ctx, "alpha")).is(t, "ListGrants(alpha) (want newest first)", []store.Grant{grants[2], grants[0], grants[1]})

	must(t, "RevokeGrant(g1)", s.RevokeGrant(ctx, "g1", at(100)))
	got := answer(s.GrantByHash(ctx, hash("v1"))).must(t, "GrantByHash(g1's hash)")
	want := grants[1]
	want.RevokedAt = at(100)
	same(t, "GrantByHash(g1's hash) after RevokeGrant", want, got)
	answer(s.GrantByHash(ctx, hash("v2"))).is(t, "GrantByHash(g2's hash) (want it unrevoked: revoking g1 touched g2)", grants[0])
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

// testFeedbackOfAReenrolledBox: a batch admitted with the token of a box
// removed since is not kept as one of the box added under its name
// (whose owner may not have consented); one admitted with a box's token
// before its rotation is kept within the grace and not past it.
func testFeedbackOfAReenrolledBox(t *testing.T, s store.Store) {
	ctx := t.Context()
	old := mustCreateBox(t, s, "alpha")
	must(t, "DeleteBox(alpha)", s.DeleteBox(ctx, "alpha"))
	must(t, "CreateBox(alpha) anew", s.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: hash("token-alpha-2"), CreatedAt: at(1), PayerKind: "shared"}))
	batch := func(n int) store.FeedbackBatch {
		return store.FeedbackBatch{Box: "alpha", At: at(n), Words: []string{"agent"}, Body: []byte(fmt.Sprintf(`{"entries":[%d]}`, n))}
	}
	wantErr(t, "AddFeedback(alpha) with the removed box's token", second(s.AddFeedback(ctx, batch(2), old.TokenHash, store.FeedbackBound{})), store.ErrNotFound)
	answer(s.CountFeedback(ctx, "alpha")).is(t, "CountFeedback(alpha) after a batch with the removed box's token", store.FeedbackKept{})

	must(t, "AddFeedback(alpha) with its own token", second(s.AddFeedback(ctx, batch(3), hash("token-alpha-2"), store.FeedbackBound{})))
	must(t, "ReplaceToken(alpha)", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-3"), GraceUntil: time.Now().Add(time.Hour)}))
	must(t, "AddFeedback(alpha) with its token before the rotation", second(s.AddFeedback(ctx, batch(4), hash("token-alpha-2"), store.FeedbackBound{})))
	wantErr(t, "AddFeedback(alpha) with another box's token", second(s.AddFeedback(ctx, batch(5), hash("token-beta"), store.FeedbackBound{})), store.ErrNotFound)
	must(t, "ReplaceToken(alpha)", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-4"), GraceUntil: time.Now().Add(-time.Second)}))
	err := second(s.AddFeedback(ctx, batch(6), hash("token-alpha-3"), store.FeedbackBound{}))
	wantErr(t, "AddFeedback(alpha) with its token before the rotation, past the grace", err, store.ErrGraceEnded)
	wantErr(t, "AddFeedback(alpha) with its token before the rotation, past the grace", err, store.ErrNotFound)
	// A token replaced with no grace is no box's: the batch is refused,
	// and the box is the one enrolled before (capability.TokenGone tells
	// the two apart by its CreatedAt).
	must(t, "RotateToken(alpha)", s.RotateToken(ctx, "alpha", hash("token-alpha-5")))
	wantErr(t, "AddFeedback(alpha) with its token before a rotation with no grace", second(s.AddFeedback(ctx, batch(7), hash("token-alpha-4"), store.FeedbackBound{})), store.ErrNotFound)
	if b, err := s.Box(ctx, "alpha"); err != nil || !sameTime(b.CreatedAt, at(1)) {
		t.Errorf("Box(alpha) after RotateToken = created %v, %v; want the box created at(1)", b.CreatedAt, err)
	}
	answer(s.CountFeedback(ctx, "alpha")).is(t, "CountFeedback(alpha)", store.FeedbackKept{Batches: 2, Bytes: 2 * int64(len(`{"entries":[3]}`))})
}
