package storetest

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// boxes is the store's boxes, read by name and by token hash.
func boxes(s store.Store) concept[store.Box] {
	return concept[store.Box]{set: "CreateBox", key: func(b store.Box) string { return fmt.Sprintf("%q", b.Name) }, write: s.CreateBox, reads: []reader[store.Box]{
		{"Box", nil, func(ctx context.Context, b store.Box) (store.Box, error) { return s.Box(ctx, b.Name) }},
		{"BoxByTokenHash", func(b store.Box) string { return fmt.Sprintf("%q", b.TokenHash) },
			func(ctx context.Context, b store.Box) (store.Box, error) { return s.BoxByTokenHash(ctx, b.TokenHash) }},
	}}
}

func testBoxes(t *testing.T, s store.Store) {
	ctx := t.Context()
	alpha := store.Box{Name: "alpha", TokenHash: hash("ta"), CreatedAt: at(1), Consent: true, Paused: false, PayerKind: "owner", PayerPrincipal: "github:ann"}
	beta := store.Box{Name: "beta", TokenHash: hash("tb"), CreatedAt: at(2), Consent: false, Paused: true, PayerKind: "shared"}
	c := boxes(s)
	c.sets(t, beta, alpha)
	c.gets(t, "", alpha, beta)

	answer(s.ListBoxes(ctx)).is(t, "ListBoxes() (want by name)", []store.Box{alpha, beta})

	c.refuses(t, s, map[string]store.Box{
		"same name":          {Name: "alpha", TokenHash: hash("other"), CreatedAt: at(3)},
		"same hash":          {Name: "gamma", TokenHash: alpha.TokenHash, CreatedAt: at(3)},
		"same name and hash": beta,
	})
	c.gets(t, " after a refused duplicate", alpha)
	wantErr(t, "Box(gamma), whose hash a refused duplicate named", second(s.Box(ctx, "gamma")), store.ErrNotFound)

	t.Run("payer kind defaults to shared", func(t *testing.T) {
		b := store.Box{Name: "delta", TokenHash: hash("td"), CreatedAt: at(4)}
		must(t, "CreateBox(delta)", s.CreateBox(ctx, b))
		got, err := s.Box(ctx, "delta")
		if err != nil || got.PayerKind != "shared" {
			t.Errorf("Box(delta).PayerKind = %q, %v, want %q", got.PayerKind, err, "shared")
		}
	})
}

func testConcurrentCreateBox(t *testing.T, s store.Store) {
	const n = 10
	errs := atOnce(n, func(i int) error {
		return s.CreateBox(t.Context(), store.Box{Name: "racer", TokenHash: hash(fmt.Sprint("racer", i)), CreatedAt: at(i)})
	})
	created := 0
	for i, err := range errs {
		switch {
		case err == nil:
			created++
		default:
			wantErr(t, fmt.Sprintf("CreateBox(racer) #%d", i), err, store.ErrExists)
		}
	}
	if created != 1 {
		t.Errorf("%d concurrent CreateBox(racer) succeeded %d times, want 1", n, created)
	}
}

func testRotateToken(t *testing.T, s store.Store) {
	ctx := t.Context()
	b := mustCreateBox(t, s, "alpha")
	other := mustCreateBox(t, s, "beta")
	newHash := hash("rotated")
	must(t, "RotateToken(alpha)", s.RotateToken(ctx, "alpha", newHash))
	wantErr(t, "BoxByTokenHash(old hash)", second(s.BoxByTokenHash(ctx, b.TokenHash)), store.ErrNotFound)
	b.TokenHash = newHash
	answer(s.BoxByTokenHash(ctx, newHash)).is(t, "BoxByTokenHash(new hash) (want alpha after RotateToken)", b)

	refused(t, s, "RotateToken(alpha, beta's hash)", func(ctx context.Context) error { return s.RotateToken(ctx, "alpha", other.TokenHash) }, store.ErrExists)
	answer(s.BoxByTokenHash(ctx, other.TokenHash)).is(t, "BoxByTokenHash(beta's hash) (want beta)", other)
}

func testUpdateBox(t *testing.T, s store.Store) {
	ctx := t.Context()
	b := mustCreateBox(t, s, "alpha")
	update := store.Box{
		Name:           "alpha",
		TokenHash:      hash("not applied"),
		CreatedAt:      at(99),
		Consent:        true,
		Paused:         true,
		PayerKind:      "owner",
		PayerPrincipal: "github:ann",
	}
	must(t, "UpdateBox(alpha)", s.UpdateBox(ctx, update))
	want := b
	want.Consent, want.Paused, want.PayerKind, want.PayerPrincipal = true, true, "owner", "github:ann"
	answer(s.Box(ctx, "alpha")).is(t, "Box(alpha) after UpdateBox (want only settings changed)", want)

	back := store.Box{Name: "alpha", PayerKind: "shared"}
	must(t, "UpdateBox(alpha)", s.UpdateBox(ctx, back))
	answer(s.Box(ctx, "alpha")).is(t, "Box(alpha) after resetting settings", b)

	// ChangeBox writes what it is given and leaves the rest: a pause and
	// a payer made from reads of the same row each stand.
	on, owner := true, "owner"
	must(t, "ChangeBox(alpha, paused)", s.ChangeBox(ctx, "alpha", store.BoxChange{Paused: &on}))
	must(t, "ChangeBox(alpha, payer)", s.ChangeBox(ctx, "alpha", store.BoxChange{PayerKind: &owner, PayerPrincipal: "github:ann"}))
	want = b
	want.Paused, want.PayerKind, want.PayerPrincipal = true, "owner", "github:ann"
	answer(s.Box(ctx, "alpha")).is(t, "Box(alpha) after ChangeBox of paused, then of the payer", want)
	must(t, "ChangeBox(alpha, consent)", s.ChangeBox(ctx, "alpha", store.BoxChange{Consent: &on}))
	want.Consent = true
	answer(s.Box(ctx, "alpha")).is(t, "Box(alpha) after ChangeBox of consent", want)
	shared := "shared"
	must(t, "ChangeBox(alpha, shared)", s.ChangeBox(ctx, "alpha", store.BoxChange{PayerKind: &shared}))
	want.PayerKind, want.PayerPrincipal = "shared", ""
	answer(s.Box(ctx, "alpha")).is(t, "Box(alpha) after ChangeBox to shared", want)
}

func testDeleteBoxCascades(t *testing.T, s store.Store) {
	ctx := t.Context()
	doomed := mustCreateBox(t, s, "doomed")
	kept := mustCreateBox(t, s, "kept")
	for _, box := range []string{"doomed", "kept"} {
		must(t, fmt.Sprintf("SaveDeclaration(%q)", box), second(s.SaveDeclaration(ctx, box, tokenOf(box), []byte(`{"capabilities":[]}`), at(1))))
		must(t, fmt.Sprintf("SetSecret(%q)", box), s.SetSecret(ctx, store.Secret{Box: box, Name: "GITHUB", Host: "https://api.github.com", Sealed: []byte("sealed"), UpdatedAt: at(1)}))
		must(t, fmt.Sprintf("AddFeedback(%q)", box), second(addFeedback(ctx, s, store.FeedbackBatch{Box: box, At: at(1), Words: []string{"agent"}, Body: []byte(`{}`)}, store.FeedbackBound{})))
		must(t, fmt.Sprintf("AddResource(%q)", box), s.AddResource(ctx, store.Resource{Box: box, Kind: store.ResourceSandbox, ID: "sb-" + box, At: at(1)}))
		must(t, fmt.Sprintf("CreateGrant(%q)", box), s.CreateGrant(ctx, store.Grant{ID: "g-" + box, Hash: hash("grant-" + box), Box: box, Principal: "github:ann", CreatedAt: at(1), ExpiresAt: at(600)}))
	}
	must(t, "SetSecret(doomed, OPENAI)", s.SetSecret(ctx, store.Secret{Box: "doomed", Name: "OPENAI", Host: "https://api.openai.com", Sealed: []byte("sealed"), UpdatedAt: at(1)}))

	seq := lastChange(t, s)
	must(t, "DeleteBox(doomed)", s.DeleteBox(ctx, "doomed"))
	want := keys([]store.Change{
		{Kind: store.ChangeBox, Key: "doomed"},
		{Kind: store.ChangeDeclaration, Key: "doomed"},
		{Kind: store.ChangeSecret, Key: "doomed/GITHUB"},
		{Kind: store.ChangeSecret, Key: "doomed/OPENAI"},
		{Kind: store.ChangeResource, Key: "sandbox/sb-doomed"},
		{Kind: store.ChangeGrant, Key: hash("grant-doomed")},
	})
	same(t, "changes of DeleteBox(doomed) (want one for every cached row)", want, keys(changesAfter(t, s, seq)))

	gone := []struct {
		call string
		err  error
	}{
		{"Box(doomed)", second(s.Box(ctx, "doomed"))},
		{"BoxByTokenHash(doomed's hash)", second(s.BoxByTokenHash(ctx, doomed.TokenHash))},
		{"Declaration(doomed)", third(s.Declaration(ctx, "doomed"))},
		{"Secret(doomed, GITHUB)", second(s.Secret(ctx, "doomed", "GITHUB"))},
		{"ResourceOwner(sandbox, sb-doomed)", second(s.ResourceOwner(ctx, store.ResourceSandbox, "sb-doomed"))},
		{"GrantByHash(doomed's grant)", second(s.GrantByHash(ctx, hash("grant-doomed")))},
		{"DeleteBox(doomed) again", s.DeleteBox(ctx, "doomed")},
	}
	for _, g := range gone {
		wantErr(t, g.call, g.err, store.ErrNotFound)
	}
	answer(s.ListSecrets(ctx, "doomed")).none(t, "ListSecrets(doomed)")
	if fb, _, err := s.ListFeedback(ctx, store.FeedbackQuery{Box: "doomed", Limit: 10}); err != nil || len(fb) != 0 {
		t.Errorf("ListFeedback(doomed) = %d batches, %v, want none", len(fb), err)
	}
	answer(s.ListResources(ctx, "doomed")).none(t, "ListResources(doomed)")
	answer(s.ListGrants(ctx, "doomed")).none(t, "ListGrants(doomed)")

	// The other box keeps everything.
	answer(s.Box(ctx, "kept")).is(t, "Box(kept) (want it kept)", kept)
	kepts := []struct {
		call string
		err  error
	}{
		{"Declaration(kept)", third(s.Declaration(ctx, "kept"))},
		{"Secret(kept, GITHUB)", second(s.Secret(ctx, "kept", "GITHUB"))},
		{"ResourceOwner(sandbox, sb-kept)", second(s.ResourceOwner(ctx, store.ResourceSandbox, "sb-kept"))},
		{"GrantByHash(kept's grant)", second(s.GrantByHash(ctx, hash("grant-kept")))},
	}
	for _, k := range kepts {
		wantErr(t, k.call, k.err, nil)
	}
	if fb, _, err := s.ListFeedback(ctx, store.FeedbackQuery{Box: "kept", Limit: 10}); err != nil || len(fb) != 1 {
		t.Errorf("ListFeedback(kept) = %d batches, %v, want 1", len(fb), err)
	}

	// A box made again under the name starts empty, and what the deleted
	// box owned can be another's.
	mustCreateBox(t, s, "doomed")
	wantErr(t, "Declaration(doomed) of a new box of that name", third(s.Declaration(ctx, "doomed")), store.ErrNotFound)
	answer(s.CountFeedback(ctx, "doomed")).is(t, "CountFeedback(doomed) of a new box of that name", store.FeedbackKept{})
	wantErr(t, "AddResource(kept, sb-doomed) of the deleted box's resource", s.AddResource(ctx, store.Resource{Box: "kept", Kind: store.ResourceSandbox, ID: "sb-doomed", At: at(2)}), nil)
}

// testDeclarationOfAReenrolledBox: a report admitted with the token of a
// box removed since is not kept as the report of the box added under its
// name; one admitted with a box's token before its rotation, within the
// grace, is.
func testDeclarationOfAReenrolledBox(t *testing.T, s store.Store) {
	ctx := t.Context()
	old := mustCreateBox(t, s, "alpha")
	must(t, "DeleteBox(alpha)", s.DeleteBox(ctx, "alpha"))
	must(t, "CreateBox(alpha) anew", s.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: hash("token-alpha-2"), CreatedAt: at(1), PayerKind: "shared"}))
	wantErr(t, "SaveDeclaration(alpha) with the removed box's token", second(s.SaveDeclaration(ctx, "alpha", old.TokenHash, []byte(`{"capabilities":[],"listing":{"title":"Old"}}`), at(2))), store.ErrNotFound)
	wantErr(t, "Declaration(alpha) after a report with the removed box's token", third(s.Declaration(ctx, "alpha")), store.ErrNotFound)

	must(t, "SaveDeclaration(alpha) with its own token", second(s.SaveDeclaration(ctx, "alpha", hash("token-alpha-2"), []byte(`{"capabilities":[]}`), at(3))))
	must(t, "ReplaceToken(alpha)", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-3"), GraceUntil: time.Now().Add(time.Hour)}))
	must(t, "SaveDeclaration(alpha) with its token before the rotation", second(s.SaveDeclaration(ctx, "alpha", hash("token-alpha-2"), []byte(`{"capabilities":[]}`), at(4))))
	must(t, "SaveDeclaration(alpha) with its new token", second(s.SaveDeclaration(ctx, "alpha", hash("token-alpha-3"), []byte(`{"capabilities":[]}`), at(5))))
	wantErr(t, "SaveDeclaration(alpha) with another box's token", second(s.SaveDeclaration(ctx, "alpha", hash("token-beta"), []byte(`{"capabilities":[]}`), at(6))), store.ErrNotFound)
}

// testDeclarationAsTheGraceEnds: a report admitted with a box's token
// before its rotation is saved only while the grace lasts by the
// database's clock as it is saved: one saved a moment after the grace
// ended is refused (ErrGraceEnded, an ErrNotFound), and the report kept
// is left as it was.
func testDeclarationAsTheGraceEnds(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	kept := `{"capabilities":[]}`
	must(t, "SaveDeclaration(alpha)", second(s.SaveDeclaration(ctx, "alpha", tokenOf("alpha"), []byte(kept), at(1))))
	// The grace ended a second ago by the machine's clock, which the
	// database's is.
	must(t, "ReplaceToken(alpha)", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-2"), GraceUntil: time.Now().Add(-time.Second)}))
	lateReportRefused(t, s, tokenOf("alpha"), kept, store.ErrGraceEnded, "with its token before the rotation, past the grace")

	must(t, "SaveDeclaration(alpha) with its new token", second(s.SaveDeclaration(ctx, "alpha", hash("token-alpha-2"), []byte(kept), at(3))))
	must(t, "ReplaceToken(alpha)", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-3"), GraceUntil: time.Now().Add(time.Hour)}))
	must(t, "SaveDeclaration(alpha) with its token before the rotation, within the grace", second(s.SaveDeclaration(ctx, "alpha", hash("token-alpha-2"), []byte(kept), at(4))))
}

// testDeclarationAsTheTokenExpires: a report admitted with a box's
// token is saved only while the token has not expired by the database's
// clock as it is saved: one saved a moment after its expiry is refused
// (ErrTokenExpired, an ErrNotFound), and the report kept is left as it
// was.
func testDeclarationAsTheTokenExpires(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	kept := `{"capabilities":[]}`
	must(t, "SaveDeclaration(alpha)", second(s.SaveDeclaration(ctx, "alpha", tokenOf("alpha"), []byte(kept), at(1))))
	// The new token expired a second ago by the machine's clock, which
	// the database's is.
	must(t, "ReplaceToken(alpha)", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-2"), TTL: time.Minute, ExpiresAt: time.Now().Add(-time.Second)}))
	lateReportRefused(t, s, hash("token-alpha-2"), kept, store.ErrTokenExpired, "with its token, past its expiry")

	must(t, "ReplaceToken(alpha)", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-3"), TTL: time.Hour, ExpiresAt: time.Now().Add(time.Hour)}))
	must(t, "SaveDeclaration(alpha) with its token, before its expiry", second(s.SaveDeclaration(ctx, "alpha", hash("token-alpha-3"), []byte(kept), at(3))))
}

// testDeclarationOfToken: the report a request is judged by is read
// only while its box holds the token it was admitted with: a box that
// never reported has none (doc nil, no error); the token of a box
// removed, of another box, replaced with no grace, past its grace or its
// expiry reads nothing (ErrNotFound), and never the report of the box
// added under the name since; the token before a rotation, within the
// grace, reads the box's report as its new token does.
func testDeclarationOfToken(t *testing.T, s store.Store) {
	ctx := t.Context()
	reads := func(call, tokenHash, want string) {
		t.Helper()
		doc, at, err := s.DeclarationOfToken(ctx, "alpha", tokenHash)
		if err != nil || string(doc) != want || (doc == nil) != (want == "") || at.IsZero() != (want == "") {
			t.Errorf("DeclarationOfToken(alpha) %s = %q, %v, %v; want %q", call, doc, at, err, want)
		}
	}
	readsNone := func(call, tokenHash string) {
		t.Helper()
		wantErr(t, "DeclarationOfToken(alpha) "+call, third(s.DeclarationOfToken(ctx, "alpha", tokenHash)), store.ErrNotFound)
	}
	old := mustCreateBox(t, s, "alpha")
	mustCreateBox(t, s, "beta")
	reads("before any report", old.TokenHash, "")
	oldDoc := `{"capabilities":[],"listing":{"title":"Old"}}`
	must(t, "SaveDeclaration(alpha)", second(s.SaveDeclaration(ctx, "alpha", old.TokenHash, []byte(oldDoc), at(1))))
	reads("with its token", old.TokenHash, oldDoc)
	readsNone("with beta's token", tokenOf("beta"))
	readsNone("with no box's token", hash("nobody"))

	must(t, "DeleteBox(alpha)", s.DeleteBox(ctx, "alpha"))
	readsNone("of a removed box", old.TokenHash)
	must(t, "CreateBox(alpha) anew", s.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: hash("token-alpha-2"), CreatedAt: at(2), PayerKind: "shared"}))
	reads("of the new box, before any report", hash("token-alpha-2"), "")
	newDoc := `{"capabilities":[],"listing":{"title":"New"}}`
	must(t, "SaveDeclaration(alpha) of the new box", second(s.SaveDeclaration(ctx, "alpha", hash("token-alpha-2"), []byte(newDoc), at(3))))
	readsNone("with the removed box's token, the new box reported", old.TokenHash)
	reads("of the new box", hash("token-alpha-2"), newDoc)

	must(t, "ReplaceToken(alpha) with a grace", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-3"), GraceUntil: time.Now().Add(time.Hour)}))
	reads("with its token before the rotation, within the grace", hash("token-alpha-2"), newDoc)
	reads("with its new token", hash("token-alpha-3"), newDoc)
	// The grace ended a second ago by the machine's clock, which the
	// database's is.
	must(t, "ReplaceToken(alpha) past the grace", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-4"), GraceUntil: time.Now().Add(-time.Second)}))
	readsNone("with its token before the rotation, past the grace", hash("token-alpha-3"))
	must(t, "RotateToken(alpha) with no grace", s.RotateToken(ctx, "alpha", hash("token-alpha-5")))
	readsNone("with its token before a rotation with no grace", hash("token-alpha-4"))
	reads("with its token after a rotation with no grace", hash("token-alpha-5"), newDoc)
	must(t, "ReplaceToken(alpha) expired", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("token-alpha-6"), TTL: time.Minute, ExpiresAt: time.Now().Add(-time.Second)}))
	readsNone("with its token, past its expiry", hash("token-alpha-6"))
}

// lateReportRefused saves a report for alpha with tok, whose time has
// just ended (what says how), and checks that it is refused with want
// (an ErrNotFound) and leaves the kept report and the change log as they
// were.
func lateReportRefused(t *testing.T, s store.Store, tok, kept string, want error, what string) {
	t.Helper()
	seq := lastChange(t, s)
	err := second(s.SaveDeclaration(t.Context(), "alpha", tok, []byte(`{"capabilities":[],"late":true}`), at(2)))
	wantErr(t, "SaveDeclaration(alpha) "+what, err, want)
	wantErr(t, "SaveDeclaration(alpha) "+what, err, store.ErrNotFound)
	if doc, _, err := s.Declaration(t.Context(), "alpha"); err != nil || string(doc) != kept {
		t.Errorf("Declaration(alpha) after a report %s = %s, %v, want %s", what, doc, err, kept)
	}
	same(t, "changes of a report "+what+" (want none)", []store.Change(nil), keys(changesAfter(t, s, seq)))
}

func testDeclarations(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	mustCreateBox(t, s, "beta")
	wantErr(t, "Declaration(alpha) before any report", third(s.Declaration(ctx, "alpha")), store.ErrNotFound)

	tests := []struct {
		box string
		doc string
		at  time.Time
	}{
		{"alpha", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`, at(1)},
		{"beta", `{"capabilities":[]}`, at(2)},
		{"alpha", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent","decide"]}]}`, at(3)},
	}
	for _, tt := range tests {
		kept := answer(s.SaveDeclaration(ctx, tt.box, tokenOf(tt.box), []byte(tt.doc), tt.at)).must(t, fmt.Sprintf("SaveDeclaration(%q)", tt.box))
		if string(kept.Doc) != tt.doc || !sameTime(kept.At, tt.at) {
			t.Errorf("SaveDeclaration(%q) kept %s at %v, want its own, %s at %v", tt.box, kept.Doc, kept.At, tt.doc, tt.at)
		}
		doc, gotAt, err := s.Declaration(ctx, tt.box)
		must(t, fmt.Sprintf("Declaration(%q)", tt.box), err)
		if string(doc) != tt.doc || !sameTime(gotAt, tt.at) {
			t.Errorf("Declaration(%q) = %s at %v, want %s at %v", tt.box, doc, gotAt, tt.doc, tt.at)
		}
	}
	doc, _, err := s.Declaration(ctx, "beta")
	if err != nil || string(doc) != tests[1].doc {
		t.Errorf("Declaration(beta) = %s, %v, want %s: another box's report replaced it", doc, err, tests[1].doc)
	}

	// Two reports racing: the one taken earlier, written last, leaves
	// the later one kept, and says so; one taken at the same time
	// replaces it.
	latest := tests[2]
	kept := answer(s.SaveDeclaration(ctx, "alpha", tokenOf("alpha"), []byte(`{"capabilities":[],"stale":true}`), at(2))).must(t, "SaveDeclaration(alpha) taken before the kept one")
	if string(kept.Doc) != latest.doc || !sameTime(kept.At, latest.at) {
		t.Errorf("SaveDeclaration(alpha) taken before the kept one kept %s at %v, want the later one, %s at %v", kept.Doc, kept.At, latest.doc, latest.at)
	}
	doc, gotAt, err := s.Declaration(ctx, "alpha")
	if err != nil || string(doc) != latest.doc || !sameTime(gotAt, latest.at) {
		t.Errorf("Declaration(alpha) after an earlier report = %s at %v, %v, want %s at %v kept", doc, gotAt, err, latest.doc, latest.at)
	}
	tied := `{"capabilities":[],"tied":true}`
	kept = answer(s.SaveDeclaration(ctx, "alpha", tokenOf("alpha"), []byte(tied), latest.at)).must(t, "SaveDeclaration(alpha) taken with the kept one")
	if string(kept.Doc) != tied {
		t.Errorf("SaveDeclaration(alpha) taken with the kept one kept %s, want its own, %s", kept.Doc, tied)
	}
	if doc, _, err := s.Declaration(ctx, "alpha"); err != nil || string(doc) != tied {
		t.Errorf("Declaration(alpha) after a report taken at the same time = %s, %v, want %s", doc, err, tied)
	}
}

func testConcurrentDeclarations(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	seq := lastChange(t, s)
	const n = 20
	docOf := func(i int) string { return fmt.Sprintf(`{"capabilities":[],"n":%d}`, i) }
	docs := map[string]time.Time{}
	for i := range n {
		docs[docOf(i)] = at(i)
	}
	kept := make([]store.KeptDeclaration, n)
	for i, err := range atOnce(n, func(i int) error {
		var err error
		kept[i], err = s.SaveDeclaration(ctx, "alpha", tokenOf("alpha"), []byte(docOf(i)), at(i))
		return err
	}) {
		if err != nil {
			t.Errorf("SaveDeclaration(alpha) #%d of %d at once = %v, want nil", i, n, err)
			continue
		}
		// Each says what was kept as it committed: its own report or a
		// later one, doc and time of one save.
		k := kept[i]
		if wantAt, ok := docs[string(k.Doc)]; !ok || !sameTime(k.At, wantAt) || k.At.Before(at(i).Truncate(time.Microsecond)) {
			t.Errorf("SaveDeclaration(alpha) #%d of %d at once kept %s at %v, want one saved at or after %v", i, n, k.Doc, k.At, at(i))
		}
	}
	if k := kept[n-1]; string(k.Doc) != docOf(n-1) {
		t.Errorf("SaveDeclaration(alpha) #%d, the last taken, kept %s, want its own", n-1, k.Doc)
	}
	doc, gotAt, err := s.Declaration(ctx, "alpha")
	must(t, "Declaration(alpha)", err)
	wantAt, ok := docs[string(doc)]
	if !ok {
		t.Fatalf("Declaration(alpha) = %s, want one of the %d saved", doc, n)
	}
	if !sameTime(gotAt, wantAt) {
		t.Errorf("Declaration(alpha) = %s at %v, want at %v: doc and time from different saves", doc, gotAt, wantAt)
	}
	if !sameTime(gotAt, at(n-1)) {
		t.Errorf("Declaration(alpha) = %s at %v, want the one taken last, at %v", doc, gotAt, at(n-1))
	}
	if got := len(changesAfter(t, s, seq)); got != n {
		t.Errorf("%d concurrent SaveDeclaration recorded %d changes, want %d", n, got, n)
	}
}

// second is the error of a two-valued call.
func second[T any](_ T, err error) error { return err }

// third is the error of a three-valued call.
func third[T, U any](_ T, _ U, err error) error { return err }

// testBindAndReplaceToken: a box's binding to source addresses and its
// token's lifetimes are kept as CreateBox, BindBox and ReplaceToken write
// them, each write a change of the box; the old token of a rotation with
// a grace finds the box until the next rotation, and never outlives its
// own expiry.
func testBindAndReplaceToken(t *testing.T, s store.Store) {
	ctx := t.Context()
	from := answer(store.ParseFrom("10.1.0.0/16, 192.0.2.7,2001:db8::/32")).must(t, "ParseFrom()")
	b := store.Box{Name: "alpha", TokenHash: hash("t1"), CreatedAt: at(0), PayerKind: "shared",
		From: from, TokenTTL: time.Hour, ExpiresAt: at(3600)}
	must(t, "CreateBox()", s.CreateBox(ctx, b))
	if got, err := s.Box(ctx, "alpha"); err != nil || diff(b, got) != "" {
		t.Fatalf("Box(alpha) = %v, diff (-want +got):\n%s", err, diff(b, got))
	}

	seq := lastChange(t, s)
	narrower := []netip.Prefix{netip.MustParsePrefix("10.1.2.0/24")}
	must(t, "BindBox()", s.BindBox(ctx, "alpha", narrower))
	same(t, "BindBox changes (want one of box alpha)", []store.Change{{Kind: store.ChangeBox, Key: "alpha"}}, keys(changesAfter(t, s, seq)))
	b.From = narrower
	answer(s.BoxByTokenHash(ctx, b.TokenHash)).is(t, "after BindBox: BoxByTokenHash()", b)
	wantErr(t, "BindBox(nosuch)", s.BindBox(ctx, "nosuch", nil), store.ErrNotFound)

	// A rotation with a grace longer than the old token's life keeps it
	// only until it expires.
	seq = lastChange(t, s)
	r := store.Rotation{Hash: hash("t2"), TTL: 2 * time.Hour, ExpiresAt: at(7200), GraceUntil: at(9000)}
	must(t, "ReplaceToken()", s.ReplaceToken(ctx, "alpha", r))
	same(t, "ReplaceToken changes (want one of box alpha)", []store.Change{{Kind: store.ChangeBox, Key: "alpha"}}, keys(changesAfter(t, s, seq)))
	want := b
	want.TokenHash, want.TokenTTL, want.ExpiresAt, want.OldTokenHash, want.OldUntil = r.Hash, r.TTL, r.ExpiresAt, hash("t1"), at(3600)
	for _, h := range []string{hash("t1"), hash("t2")} {
		answer(s.BoxByTokenHash(ctx, h)).is(t, fmt.Sprintf("BoxByTokenHash(%s…)", h[:6]), want)
	}
	// A grace shorter than its life keeps it for the grace.
	r = store.Rotation{Hash: hash("t3"), GraceUntil: at(60)}
	must(t, "ReplaceToken()", s.ReplaceToken(ctx, "alpha", r))
	want.TokenHash, want.TokenTTL, want.ExpiresAt, want.OldTokenHash, want.OldUntil = r.Hash, 0, time.Time{}, hash("t2"), at(60)
	answer(s.BoxByTokenHash(ctx, hash("t2"))).is(t, "BoxByTokenHash(t2)", want)
	wantErr(t, "BoxByTokenHash(t1, two rotations ago)", second(s.BoxByTokenHash(ctx, hash("t1"))), store.ErrNotFound)
	// No grace, or RotateToken: the old token is forgotten at once.
	must(t, "ReplaceToken()", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("t4")}))
	wantErr(t, "BoxByTokenHash(t3, rotated with no grace)", second(s.BoxByTokenHash(ctx, hash("t3"))), store.ErrNotFound)
	must(t, "ReplaceToken()", s.ReplaceToken(ctx, "alpha", store.Rotation{Hash: hash("t5"), GraceUntil: at(60)}))
	must(t, "RotateToken()", s.RotateToken(ctx, "alpha", hash("t6")))
	wantErr(t, "BoxByTokenHash(t5, after RotateToken)", second(s.BoxByTokenHash(ctx, hash("t5"))), store.ErrNotFound)
	wantErr(t, "ReplaceToken(nosuch)", s.ReplaceToken(ctx, "nosuch", store.Rotation{Hash: hash("x")}), store.ErrNotFound)
}
