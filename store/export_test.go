package store

import (
	"context"
	"io/fs"
)

// MigrateFS applies the migrations found in dir of fsys, so tests can exercise the
// runner with migration sets other than the embedded one.
func (db *DB) MigrateFS(ctx context.Context, fsys fs.FS, dir string, target int) ([]int, error) {
	all, err := loadMigrations(fsys, dir)
	if err != nil {
		return nil, err
	}
	return db.migrate(ctx, all, target)
}
