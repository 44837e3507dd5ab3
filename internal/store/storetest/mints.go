package storetest

import (
	"fmt"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

// testMints: a secret's kind is kept and listed; a minted secret's state
// is kept, replaced, listed, recorded without a change, refused for a
// secret that does not exist, and removed with its secret.
func testMints(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateBox(t, s, "alpha")
	gh := store.Secret{Box: "alpha", Name: "GITHUB", Host: "https://api.github.com", Sealed: []byte("sealed-app"), UpdatedAt: at(1), Kind: "github-app"}
	plain := store.Secret{Box: "alpha", Name: "PLAIN", Host: "https://api.example.com", Sealed: []byte("sealed-plain"), UpdatedAt: at(1)}
	for _, sec := range []store.Secret{gh, plain} {
		must(t, fmt.Sprintf("SetSecret(%q)", sec.Name), s.SetSecret(ctx, sec))
	}
	got, err := s.Secret(ctx, "alpha", "GITHUB")
	if err != nil || got.Kind != "github-app" {
		t.Fatalf("Secret(alpha, GITHUB) = kind %q, %v; want github-app, nil", got.Kind, err)
	}
	list, err := s.ListSecrets(ctx, "alpha")
	if err != nil || len(list) != 2 || list[0].Kind != "github-app" || list[1].Kind != "" {
		t.Fatalf("ListSecrets(alpha) = %+v, %v; want GITHUB github-app, PLAIN plain", list, err)
	}

	wantErr(t, "MintState before any", second(s.MintState(ctx, "alpha", "GITHUB")), store.ErrNotFound)
	wantErr(t, "SetMintState(no such secret)", s.SetMintState(ctx, store.MintState{Box: "alpha", Name: "NONE", Of: "x", UpdatedAt: at(2)}), store.ErrNotFound)
	seq := lastChange(t, s)
	first := store.MintState{Box: "alpha", Name: "GITHUB", Of: "of-1", ExpiresAt: at(3600), UpdatedAt: at(2)}
	must(t, "SetMintState", s.SetMintState(ctx, first))
	noChange(t, s, "SetMintState", seq)
	answer(s.MintState(ctx, "alpha", "GITHUB")).is(t, "MintState", first)
	replaced := store.MintState{Box: "alpha", Name: "GITHUB", Of: "of-2", Sealed: []byte("sealed-refresh"), Failure: "refused: invalid_grant", UpdatedAt: at(3)}
	must(t, "SetMintState again", s.SetMintState(ctx, replaced))
	answer(s.ListMintStates(ctx, "alpha")).is(t, "ListMintStates", []store.MintState{replaced})
	must(t, "DeleteSecret(alpha, GITHUB)", s.DeleteSecret(ctx, "alpha", "GITHUB"))
	wantErr(t, "MintState after its secret was removed", second(s.MintState(ctx, "alpha", "GITHUB")), store.ErrNotFound)
}
