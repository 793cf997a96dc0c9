package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Installer is who GitHub's signed installation "created" webhook says created an
// installation: its sender, who installed the App, and, when an organization owner
// installed it by approving a member's request, that member (RequesterID 0 when
// nobody requested it). GitHub user ids, not logins, decide: a login can be renamed
// and then taken by somebody else.
type Installer struct {
	InstallationID int64
	SenderID       int64
	SenderLogin    string
	RequesterID    int64
	RequesterLogin string
}

// Installed reports whether the GitHub user userID may bind the installation: they
// installed it, or requested it and an owner approved.
func (i Installer) Installed(userID int64) bool {
	return userID != 0 && (userID == i.SenderID || userID == i.RequesterID)
}

type installerRow struct {
	InstallationID int64  `db:"installation_id"`
	SenderID       int64  `db:"sender_id"`
	SenderLogin    string `db:"sender_login"`
	RequesterID    int64  `db:"requester_id"`
	RequesterLogin string `db:"requester_login"`
}

// RecordInstaller stores who created the installation. The first record stands: a
// redelivered webhook carries the same one, and installation ids are never reused.
func (db *DB) RecordInstaller(ctx context.Context, in Installer) error {
	if in.InstallationID <= 0 || in.SenderID <= 0 {
		return fmt.Errorf("record installer of installation %d: the installation and sender ids are required", in.InstallationID)
	}
	_, err := db.ExecContext(ctx, db.Rebind(`INSERT INTO installation_installers
		(installation_id, sender_id, sender_login, requester_id, requester_login, recorded_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (installation_id) DO NOTHING`),
		in.InstallationID, in.SenderID, in.SenderLogin, in.RequesterID, in.RequesterLogin, toMillis(time.Now()))
	if err != nil {
		return fmt.Errorf("record installer of installation %d: %w", in.InstallationID, err)
	}
	return nil
}

// InstallerOf is who created the installation; ErrNotFound until its "created"
// webhook has been handled.
func (db *DB) InstallerOf(ctx context.Context, installationID int64) (Installer, error) {
	var row installerRow
	err := db.GetContext(ctx, &row, db.Rebind(`SELECT installation_id, sender_id, sender_login, requester_id, requester_login
		FROM installation_installers WHERE installation_id = ?`), installationID)
	if errors.Is(err, sql.ErrNoRows) {
		return Installer{}, fmt.Errorf("installer of installation %d: %w", installationID, ErrNotFound)
	}
	if err != nil {
		return Installer{}, fmt.Errorf("read installer of installation %d: %w", installationID, err)
	}
	return Installer(row), nil
}

// ForgetInstaller drops the record of a deleted installation: GitHub never hands
// its id out again, and a deleted installation cannot be bound.
func (db *DB) ForgetInstaller(ctx context.Context, installationID int64) error {
	if _, err := db.ExecContext(ctx, db.Rebind(`DELETE FROM installation_installers WHERE installation_id = ?`), installationID); err != nil {
		return fmt.Errorf("forget installer of installation %d: %w", installationID, err)
	}
	return nil
}
