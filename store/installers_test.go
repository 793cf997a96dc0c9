package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func TestInstallerRecordStandsAndIsForgotten(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if _, err := db.InstallerOf(ctx, 41); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("installer before any webhook: %v, want ErrNotFound", err)
		}
		first := store.Installer{InstallationID: 41, SenderID: 7, SenderLogin: "owner", RequesterID: 9, RequesterLogin: "member"}
		if err := db.RecordInstaller(ctx, first); err != nil {
			t.Fatal(err)
		}
		// A second record for the same installation (a forged or confused event
		// that still got through) never replaces who installed it.
		if err := db.RecordInstaller(ctx, store.Installer{InstallationID: 41, SenderID: 666, SenderLogin: "mallory"}); err != nil {
			t.Fatal(err)
		}
		got, err := db.InstallerOf(ctx, 41)
		if err != nil || got != first {
			t.Fatalf("installer = %+v, %v; want %+v", got, err, first)
		}
		for id, want := range map[int64]bool{7: true, 9: true, 666: false, 0: false} {
			if got.Installed(id) != want {
				t.Errorf("Installed(%d) = %v, want %v", id, !want, want)
			}
		}
		if err := db.RecordInstaller(ctx, store.Installer{InstallationID: 42}); err == nil {
			t.Error("a record without a sender was stored")
		}
		if err := db.ForgetInstaller(ctx, 41); err != nil {
			t.Fatal(err)
		}
		if _, err := db.InstallerOf(ctx, 41); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("installer after forgetting: %v, want ErrNotFound", err)
		}
	})
}

func TestInstallerWithoutRequesterIsOnlyTheSender(t *testing.T) {
	if (store.Installer{InstallationID: 1, SenderID: 5}).Installed(0) {
		t.Error("user id 0 (no requester) counts as the installer")
	}
}
