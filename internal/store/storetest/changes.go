package storetest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

func testNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	tests := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Box", func(ctx context.Context) error { return second(s.Box(ctx, "nobox")) }},
		{"BoxByTokenHash", func(ctx context.Context) error { return second(s.BoxByTokenHash(ctx, hash("nobody"))) }},
		{"DeleteBox", func(ctx context.Context) error { return s.DeleteBox(ctx, "nobox") }},
		{"RotateToken", func(ctx context.Context) error { return s.RotateToken(ctx, "nobox", hash("new")) }},
		{"UpdateBox", func(ctx context.Context) error { return s.UpdateBox(ctx, store.Box{Name: "nobox", Paused: true}) }},
		{"ChangeBox", func(ctx context.Context) error {
			on := true
			return s.ChangeBox(ctx, "nobox", store.BoxChange{Paused: &on})
		}},
		{"SaveDeclaration of no box", func(ctx context.Context) error {
			return second(s.SaveDeclaration(ctx, "nobox", tokenOf("nobox"), []byte(`{"capabilities":[]}`), at(1)))
		}},
		{"Declaration of no box", func(ctx context.Context) error { return third(s.Declaration(ctx, "nobox")) }},
		{"Declaration never reported", func(ctx context.Context) error { return third(s.Declaration(ctx, "alpha")) }},
		{"Credential", func(ctx context.Context) error { return second(s.Credential(ctx, "anthropic")) }},
		{"DeleteCredential", func(ctx context.Context) error { return s.DeleteCredential(ctx, "anthropic") }},
		{"SetSecret of no box", func(ctx context.Context) error {
			return s.SetSecret(ctx, store.Secret{Box: "nobox", Name: "GITHUB", Host: "https://api.github.com", Sealed: []byte("x"), UpdatedAt: at(1)})
		}},
		{"Secret", func(ctx context.Context) error { return second(s.Secret(ctx, "alpha", "GITHUB")) }},
		{"DeleteSecret", func(ctx context.Context) error { return s.DeleteSecret(ctx, "alpha", "GITHUB") }},
		{"AddFeedback of no box", func(ctx context.Context) error {
			return second(addFeedback(ctx, s, store.FeedbackBatch{Box: "nobox", At: at(1), Words: []string{"agent"}, Body: []byte(`{}`)}, store.FeedbackBound{}))
		}},
		{"AddResource of no box", func(ctx context.Context) error {
			return s.AddResource(ctx, store.Resource{Box: "nobox", Kind: store.ResourceVault, ID: "v", At: at(1)})
		}},
		{"ResourceOwner", func(ctx context.Context) error { return second(s.ResourceOwner(ctx, store.ResourceVault, "v")) }},
		{"DeleteResource", func(ctx context.Context) error { return s.DeleteResource(ctx, store.ResourceVault, "v") }},
		{"CreateGrant of no box", func(ctx context.Context) error {
			return s.CreateGrant(ctx, store.Grant{ID: "g", Hash: hash("g"), Box: "nobox", Principal: "github:ann", CreatedAt: at(1), ExpiresAt: at(60)})
		}},
		{"GrantByHash", func(ctx context.Context) error { return second(s.GrantByHash(ctx, hash("g"))) }},
		{"RevokeGrant", func(ctx context.Context) error { return s.RevokeGrant(ctx, "g", at(2)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { refused(t, s, tt.name, tt.call, store.ErrNotFound) })
	}
	// Nothing a refused write named was made.
	wantErr(t, "Box(nobox) after refused writes", second(s.Box(ctx, "nobox")), store.ErrNotFound)
	wantErr(t, "ResourceOwner(vault, v) after a refused AddResource", second(s.ResourceOwner(ctx, store.ResourceVault, "v")), store.ErrNotFound)
}

func testChangesEveryWrite(t *testing.T, s store.Store) {
	if seq := lastChange(t, s); seq != 0 {
		t.Fatalf("LastChange() of an empty store = %d, want 0", seq)
	}
	grant := store.Grant{ID: "g1", Hash: hash("grant"), Box: "alpha", Principal: "github:ann", CreatedAt: at(1), ExpiresAt: at(60)}
	tests := []struct {
		name  string
		write func(ctx context.Context) error
		want  []store.Change
	}{
		{"CreateBox", func(ctx context.Context) error { return s.CreateBox(ctx, newBox("alpha")) },
			[]store.Change{{Kind: store.ChangeBox, Key: "alpha"}}},
		{"UpdateBox", func(ctx context.Context) error { return s.UpdateBox(ctx, store.Box{Name: "alpha", Consent: true}) },
			[]store.Change{{Kind: store.ChangeBox, Key: "alpha"}}},
		{"ChangeBox", func(ctx context.Context) error {
			on := true
			return s.ChangeBox(ctx, "alpha", store.BoxChange{Paused: &on})
		},
			[]store.Change{{Kind: store.ChangeBox, Key: "alpha"}}},
		{"RotateToken", func(ctx context.Context) error { return s.RotateToken(ctx, "alpha", hash("rotated")) },
			[]store.Change{{Kind: store.ChangeBox, Key: "alpha"}}},
		{"SaveDeclaration", func(ctx context.Context) error {
			return second(s.SaveDeclaration(ctx, "alpha", hash("rotated"), []byte(`{"capabilities":[]}`), at(2)))
		}, []store.Change{{Kind: store.ChangeDeclaration, Key: "alpha"}}},
		{"SetCredential", func(ctx context.Context) error {
			return s.SetCredential(ctx, store.Credential{ID: "owner:alpha", Sealed: []byte("x"), UpdatedAt: at(3)})
		}, []store.Change{{Kind: store.ChangeCredential, Key: "owner:alpha"}}},
		{"DeleteCredential", func(ctx context.Context) error { return s.DeleteCredential(ctx, "owner:alpha") },
			[]store.Change{{Kind: store.ChangeCredential, Key: "owner:alpha"}}},
		{"SetSecret", func(ctx context.Context) error {
			return s.SetSecret(ctx, store.Secret{Box: "alpha", Name: "GITHUB", Host: "https://api.github.com", Sealed: []byte("x"), UpdatedAt: at(4)})
		}, []store.Change{{Kind: store.ChangeSecret, Key: "alpha/GITHUB"}}},
		{"DeleteSecret", func(ctx context.Context) error { return s.DeleteSecret(ctx, "alpha", "GITHUB") },
			[]store.Change{{Kind: store.ChangeSecret, Key: "alpha/GITHUB"}}},
		{"SetSecret again", func(ctx context.Context) error {
			return s.SetSecret(ctx, store.Secret{Box: "alpha", Name: "OPENAI", Host: "https://api.openai.com", Sealed: []byte("x"), UpdatedAt: at(5)})
		}, []store.Change{{Kind: store.ChangeSecret, Key: "alpha/OPENAI"}}},
		{"AddResource", func(ctx context.Context) error {
			return s.AddResource(ctx, store.Resource{Box: "alpha", Kind: store.ResourceConversation, ID: "c1", At: at(6)})
		}, []store.Change{{Kind: store.ChangeResource, Key: "conversation/c1"}}},
		{"DeleteResource", func(ctx context.Context) error { return s.DeleteResource(ctx, store.ResourceConversation, "c1") },
			[]store.Change{{Kind: store.ChangeResource, Key: "conversation/c1"}}},
		{"AddResource again", func(ctx context.Context) error {
			return s.AddResource(ctx, store.Resource{Box: "alpha", Kind: store.ResourceVault, ID: "v1", At: at(7)})
		}, []store.Change{{Kind: store.ChangeResource, Key: "vault/v1"}}},
		{"CreateGrant", func(ctx context.Context) error { return s.CreateGrant(ctx, grant) },
			[]store.Change{{Kind: store.ChangeGrant, Key: grant.Hash}}},
		{"RevokeGrant", func(ctx context.Context) error { return s.RevokeGrant(ctx, "g1", at(8)) },
			[]store.Change{{Kind: store.ChangeGrant, Key: grant.Hash}}},
		{"DeleteBox", func(ctx context.Context) error { return s.DeleteBox(ctx, "alpha") },
			[]store.Change{
				{Kind: store.ChangeBox, Key: "alpha"},
				{Kind: store.ChangeDeclaration, Key: "alpha"},
				{Kind: store.ChangeSecret, Key: "alpha/OPENAI"},
				{Kind: store.ChangeResource, Key: "vault/v1"},
				{Kind: store.ChangeGrant, Key: grant.Hash},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := lastChange(t, s)
			must(t, tt.name, tt.write(t.Context()))
			got := changesAfter(t, s, before)
			same(t, fmt.Sprintf("changes of %s", tt.name), keys(tt.want), keys(got))
			if len(got) > 0 {
				if last := lastChange(t, s); last != got[len(got)-1].Seq {
					t.Errorf("LastChange() after %s = %d, want %d", tt.name, last, got[len(got)-1].Seq)
				}
			}
		})
	}
}

func testChangesSince(t *testing.T, s store.Store) {
	ctx := t.Context()
	names := []string{"a", "b", "c", "d", "e"}
	for _, name := range names {
		mustCreateBox(t, s, name)
	}
	all := changesAfter(t, s, 0)
	if len(all) != len(names) {
		t.Fatalf("ChangesSince(0) = %d changes, want %d", len(all), len(names))
	}
	for i, c := range all {
		if c.Kind != store.ChangeBox || c.Key != names[i] {
			t.Errorf("change %d = %s %q, want %s %q, in the order written", i, c.Kind, c.Key, store.ChangeBox, names[i])
		}
	}
	if last := lastChange(t, s); last != all[len(all)-1].Seq {
		t.Errorf("LastChange() = %d, want %d", last, all[len(all)-1].Seq)
	}

	tests := []struct {
		after int64
		limit int
		want  []store.Change
	}{
		{0, 2, all[:2]},
		{all[1].Seq, 2, all[2:4]},
		{all[3].Seq, 2, all[4:]},
		{all[4].Seq, 2, nil},
		{all[0].Seq, 100, all[1:]},
		{all[2].Seq, 1, all[3:4]},
	}
	for _, tt := range tests {
		answer(s.ChangesSince(ctx, tt.after, tt.limit)).is(t, fmt.Sprintf("ChangesSince(%d, %d)", tt.after, tt.limit), tt.want)
	}
}

// testPruneChangesAfterAClockJump: changes are pruned by the database's
// clock, not the replica's: a replica whose clock jumps two hours ahead
// and prunes what is older than an hour forgets none of the changes
// written a moment ago, which other replicas may not have read yet (a
// cache that misses a change goes on answering with what it dropped).
func testPruneChangesAfterAClockJump(t *testing.T, s store.Store, c *clock) {
	for _, name := range []string{"a", "b", "c"} {
		mustCreateBox(t, s, name)
	}
	all := changesAfter(t, s, 0)
	c.jump(2 * time.Hour)
	must(t, "PruneChanges(an hour)", s.PruneChanges(t.Context(), time.Hour))
	same(t, "changes after PruneChanges(an hour) by a replica two hours ahead (want all kept)", all, changesAfter(t, s, 0))
}

func testPruneChanges(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, name := range []string{"a", "b", "c"} {
		mustCreateBox(t, s, name)
	}
	all := changesAfter(t, s, 0)
	last := lastChange(t, s)

	// Changes are stamped with the store's clock and judged by it; an
	// hour either side of it is well clear of them.
	must(t, "PruneChanges(an hour)", s.PruneChanges(ctx, time.Hour))
	same(t, "changes after PruneChanges(an hour) (want all kept)", all, changesAfter(t, s, 0))

	must(t, "PruneChanges(an hour ahead)", s.PruneChanges(ctx, -time.Hour))
	left := changesAfter(t, s, 0)
	if len(left) > 1 || (len(left) == 1 && left[0] != all[len(all)-1]) {
		t.Errorf("changes after PruneChanges(an hour ahead) = %v, want none but perhaps the newest", left)
	}
	if got := lastChange(t, s); got != last {
		t.Errorf("LastChange() after pruning = %d, want %d: the log's position went back", got, last)
	}
	mustCreateBox(t, s, "d")
	next := changesAfter(t, s, last)
	if len(next) != 1 || next[0].Seq <= last || next[0].Key != "d" {
		t.Errorf("ChangesSince(%d) after pruning and one write = %v, want box d after %d", last, next, last)
	}
}

// testChangesReaderMissesNothing has writers write at once while a reader
// follows the log as a cache does, moving its cursor past what it has
// read. If a change could commit after a higher Seq was read, the reader
// would pass over it and never see it.
func testChangesReaderMissesNothing(t *testing.T, s store.Store) {
	const writers, writes = 6, 30
	start := lastChange(t, s)
	want := map[string]bool{}
	for w := range writers {
		for i := range writes {
			want[fmt.Sprintf("w%d-%d", w, i)] = true
		}
	}

	done := make(chan struct{})
	seen := map[string]bool{}
	var readErr error
	var reader sync.WaitGroup
	reader.Go(func() {
		cursor := start
		finished := false
		for {
			cs, err := s.ChangesSince(t.Context(), cursor, 7)
			if err != nil {
				readErr = err
				return
			}
			for _, c := range cs {
				seen[c.Key] = true
				cursor = c.Seq
			}
			if len(cs) == 0 {
				if finished {
					return
				}
				select {
				case <-done:
					finished = true // every write has committed: read to the end once more
				default:
				}
			}
		}
	})

	errs := atOnce(writers, func(w int) error {
		for i := range writes {
			if err := s.SetCredential(t.Context(), store.Credential{ID: fmt.Sprintf("w%d-%d", w, i), Sealed: []byte("x"), UpdatedAt: at(i)}); err != nil {
				return err
			}
		}
		return nil
	})
	close(done)
	reader.Wait()
	for _, err := range errs {
		must(t, fmt.Sprintf("SetCredential from %d writers at once", writers), err)
	}
	if readErr != nil {
		t.Fatalf("ChangesSince while writers write = %v, want nil", readErr)
	}
	var missed []string
	for k := range want {
		if !seen[k] {
			missed = append(missed, k)
		}
	}
	sort.Strings(missed)
	if len(missed) > 0 {
		t.Errorf("a reader following the log passed over %d of %d changes: %v", len(missed), len(want), missed)
	}
}
