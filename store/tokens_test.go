package store_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func TestAPITokenScopes(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "payments")
		if err != nil {
			t.Fatal(err)
		}
		// Given out of order and repeated: stored as a set in canonical order.
		tok, clear, err := db.CreateAPIToken(ctx, team.ID, "chat", store.ScopeChange, store.ScopeRead, store.ScopeChange)
		if err != nil {
			t.Fatal(err)
		}
		want := store.Scopes{store.ScopeRead, store.ScopeChange}
		if !reflect.DeepEqual(tok.Scopes, want) {
			t.Fatalf("created token scopes %v, want %v", tok.Scopes, want)
		}
		auth, err := db.AuthenticateAPIToken(ctx, clear)
		if err != nil || auth.Team.ID != team.ID || auth.TokenID != tok.ID || !reflect.DeepEqual(auth.Scopes, want) {
			t.Fatalf("AuthenticateAPIToken = %+v, %v; want team %s, token %s, scopes %v", auth, err, team.ID, tok.ID, want)
		}
		if auth.Scopes.Has(store.ScopeAdmin) {
			t.Fatal("a read,change token has admin")
		}

		_, all, err := db.CreateAPIToken(ctx, team.ID, "ops")
		if err != nil {
			t.Fatal(err)
		}
		if auth, err := db.AuthenticateAPIToken(ctx, all); err != nil || !reflect.DeepEqual(auth.Scopes, store.Scopes(store.AllScopes)) {
			t.Fatalf("token made without scopes: %+v, %v; want all scopes", auth, err)
		}

		if _, _, err := db.CreateAPIToken(ctx, team.ID, "typo", store.Scope("wirte")); err == nil {
			t.Fatal("a token with an unknown scope was created")
		}
		list, err := db.ListAPITokens(ctx, team.ID)
		if err != nil || len(list) != 2 {
			t.Fatalf("ListAPITokens = %+v, %v; want the two valid tokens only", list, err)
		}
		for _, l := range list {
			if l.ID == tok.ID && !reflect.DeepEqual(l.Scopes, want) {
				t.Fatalf("listed scopes %v, want %v", l.Scopes, want)
			}
		}
	})
}

// Tokens made before scopes existed keep every right they had.
func TestTokenScopesMigrationGivesExistingTokensAllScopes(t *testing.T) {
	all, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	before := -1
	for _, m := range all {
		if m.Name == "token_scopes" {
			before = m.Version - 1
		}
	}
	if before < 0 {
		t.Fatal("no token_scopes migration")
	}
	storetest.ForEachEmpty(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if _, err := db.MigrateTo(ctx, before); err != nil {
			t.Fatal(err)
		}
		team, err := db.CreateTeam(ctx, "payments")
		if err != nil {
			t.Fatal(err)
		}
		// The insert an older version made, without the scopes column.
		clear := "kuk_made-before-scopes-existed"
		if _, err := db.ExecContext(ctx, db.Rebind(`INSERT INTO api_tokens (id, team_id, name, token_hash, created_at) VALUES (?, ?, ?, ?, ?)`),
			store.NewID(), team.ID, "old", store.HashAPIToken(secret.New(clear)), 1); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		auth, err := db.AuthenticateAPIToken(ctx, secret.New(clear))
		if err != nil || !reflect.DeepEqual(auth.Scopes, store.Scopes(store.AllScopes)) {
			t.Fatalf("old token after migration: %+v, %v; want all scopes", auth, err)
		}
	})
}

func TestParseScopes(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    store.Scopes
		wantErr bool
	}{
		"one":             {in: "read", want: store.Scopes{store.ScopeRead}},
		"two with spaces": {in: " change , read ", want: store.Scopes{store.ScopeRead, store.ScopeChange}},
		"all":             {in: "admin,change,read", want: store.Scopes(store.AllScopes)},
		"repeated":        {in: "read,read", want: store.Scopes{store.ScopeRead}},
		"unknown":         {in: "read,write", wantErr: true},
		"case matters":    {in: "Read", wantErr: true},
		"empty":           {in: "", wantErr: true},
		"only separators": {in: ",,", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := store.ParseScopes(tc.in)
			if (err != nil) != tc.wantErr || (!tc.wantErr && !reflect.DeepEqual(got, tc.want)) {
				t.Fatalf("ParseScopes(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}
