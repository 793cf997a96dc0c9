package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Team is a group of people who share installations, clusters and plans. Every API
// request acts as one team.
type Team struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

type teamRow struct {
	ID        string `db:"id"`
	Name      string `db:"name"`
	CreatedAt int64  `db:"created_at"`
}

func (r teamRow) team() Team {
	return Team{ID: r.ID, Name: r.Name, CreatedAt: fromMillis(r.CreatedAt)}
}

var teamNamePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidateTeamName explains why name cannot name a team, or returns nil. Names are
// lower-case DNS labels so they can appear in URLs and branch names unescaped.
func ValidateTeamName(name string) error {
	if !teamNamePattern.MatchString(name) {
		return fmt.Errorf("team name %q is invalid: use 1-63 lower-case letters, digits and '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// CreateTeam stores a new team. A taken name is ErrConflict.
func (db *DB) CreateTeam(ctx context.Context, name string) (Team, error) {
	if err := ValidateTeamName(name); err != nil {
		return Team{}, err
	}
	row := teamRow{ID: NewID(), Name: name, CreatedAt: toMillis(time.Now())}
	_, err := db.NamedExecContext(ctx, `INSERT INTO teams (id, name, created_at) VALUES (:id, :name, :created_at)`, row)
	if IsUniqueViolation(err) {
		return Team{}, fmt.Errorf("create team %s: %w", name, ErrConflict)
	}
	if err != nil {
		return Team{}, fmt.Errorf("create team %s: %w", name, err)
	}
	return row.team(), nil
}

// EnsureTeam returns the team called name, creating it if it does not exist.
func (db *DB) EnsureTeam(ctx context.Context, name string) (Team, error) {
	t, err := db.TeamByName(ctx, name)
	if err == nil {
		return t, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return Team{}, err
	}
	t, err = db.CreateTeam(ctx, name)
	if errors.Is(err, ErrConflict) {
		// Created concurrently by another process: read the winner's row.
		return db.TeamByName(ctx, name)
	}
	return t, err
}

// TeamByName looks a team up by its name.
func (db *DB) TeamByName(ctx context.Context, name string) (Team, error) {
	var row teamRow
	err := db.GetContext(ctx, &row, db.Rebind(`SELECT id, name, created_at FROM teams WHERE name = ?`), name)
	if errors.Is(err, sql.ErrNoRows) {
		return Team{}, fmt.Errorf("team %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return Team{}, fmt.Errorf("read team %s: %w", name, err)
	}
	return row.team(), nil
}

// TeamByID looks a team up by its id.
func (db *DB) TeamByID(ctx context.Context, id string) (Team, error) {
	var row teamRow
	err := db.GetContext(ctx, &row, db.Rebind(`SELECT id, name, created_at FROM teams WHERE id = ?`), id)
	if errors.Is(err, sql.ErrNoRows) {
		return Team{}, fmt.Errorf("team id %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Team{}, fmt.Errorf("read team id %s: %w", id, err)
	}
	return row.team(), nil
}

// ListTeams returns every team ordered by name.
func (db *DB) ListTeams(ctx context.Context) ([]Team, error) {
	var rows []teamRow
	if err := db.SelectContext(ctx, &rows, `SELECT id, name, created_at FROM teams ORDER BY name`); err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	out := make([]Team, len(rows))
	for i, r := range rows {
		out[i] = r.team()
	}
	return out, nil
}
