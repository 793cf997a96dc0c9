package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jmoiron/sqlx"
)

// ClusterAccess says how the service reaches a cluster.
type ClusterAccess string

const (
	// ClusterKubeconfig: with the kubeconfig registered for it, stored sealed.
	ClusterKubeconfig ClusterAccess = "kubeconfig"
	// ClusterInCluster: with the service's own service account.
	ClusterInCluster ClusterAccess = "in_cluster"
)

// Cluster is a team's Kubernetes cluster.
type Cluster struct {
	ID     string
	TeamID string
	Name   string
	Access ClusterAccess
	// SealedCredentials is the encrypted kubeconfig (see package store/sealed);
	// empty for in-cluster access. The clear text is never stored.
	SealedCredentials string
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

type clusterRow struct {
	ID          string `db:"id"`
	TeamID      string `db:"team_id"`
	Name        string `db:"name"`
	Access      string `db:"access"`
	Credentials string `db:"credentials"`
	CreatedAt   int64  `db:"created_at"`
	UpdatedAt   int64  `db:"updated_at"`
}

const clusterColumns = `id, team_id, name, access, credentials, created_at, updated_at`

func (r clusterRow) cluster() Cluster {
	return Cluster{ID: r.ID, TeamID: r.TeamID, Name: r.Name, Access: ClusterAccess(r.Access),
		SealedCredentials: r.Credentials, CreatedAt: fromMillis(r.CreatedAt), UpdatedAt: fromMillis(r.UpdatedAt)}
}

var clusterNamePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidateClusterName explains why name cannot name a cluster, or returns nil.
// Cluster names appear in URLs, so they are lower-case DNS labels.
func ValidateClusterName(name string) error {
	if !clusterNamePattern.MatchString(name) {
		return fmt.Errorf("cluster name %+q is invalid: use 1-63 lower-case letters, digits and '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// CreateCluster registers a cluster; a team's cluster names are unique (ErrConflict).
func (db *DB) CreateCluster(ctx context.Context, c Cluster) (Cluster, error) {
	if err := ValidateClusterName(c.Name); err != nil {
		return Cluster{}, err
	}
	switch c.Access {
	case ClusterKubeconfig:
		if c.SealedCredentials == "" {
			return Cluster{}, fmt.Errorf("create cluster %s: kubeconfig access needs sealed credentials", c.Name)
		}
	case ClusterInCluster:
		if c.SealedCredentials != "" {
			return Cluster{}, fmt.Errorf("create cluster %s: in-cluster access takes no credentials", c.Name)
		}
	default:
		return Cluster{}, fmt.Errorf("create cluster %s: unknown access %q", c.Name, c.Access)
	}
	now := time.Now()
	row := clusterRow{ID: NewID(), TeamID: c.TeamID, Name: c.Name, Access: string(c.Access), Credentials: c.SealedCredentials,
		CreatedAt: toMillis(now), UpdatedAt: toMillis(now)}
	_, err := db.NamedExecContext(ctx, `INSERT INTO clusters (`+clusterColumns+`)
		VALUES (:id, :team_id, :name, :access, :credentials, :created_at, :updated_at)`, row)
	if IsUniqueViolation(err) {
		return Cluster{}, fmt.Errorf("create cluster %s: %w", c.Name, ErrConflict)
	}
	if err != nil {
		return Cluster{}, fmt.Errorf("create cluster %s: %w", c.Name, err)
	}
	return row.cluster(), nil
}

// ReplaceClusterKubeconfig gives a team's cluster new sealed kubeconfig
// credentials (a rotated token, a new certificate), whatever access it had; the old
// ones are gone. ErrNotFound when the team has no cluster by that name.
func (db *DB) ReplaceClusterKubeconfig(ctx context.Context, teamID, name, sealedCredentials string) (Cluster, error) {
	if sealedCredentials == "" {
		return Cluster{}, fmt.Errorf("replace kubeconfig of cluster %s: no sealed credentials", name)
	}
	res, err := db.ExecContext(ctx, db.Rebind(`UPDATE clusters SET access = ?, credentials = ?, updated_at = ? WHERE team_id = ? AND name = ?`),
		string(ClusterKubeconfig), sealedCredentials, toMillis(time.Now()), teamID, name)
	if err != nil {
		return Cluster{}, fmt.Errorf("replace kubeconfig of cluster %s: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return Cluster{}, fmt.Errorf("replace kubeconfig of cluster %s: %w", name, err)
	} else if n == 0 {
		return Cluster{}, fmt.Errorf("cluster %s: %w", name, ErrNotFound)
	}
	return db.ClusterByName(ctx, teamID, name)
}

// ClusterByName reads a team's cluster; ErrNotFound when the team has none by that name.
func (db *DB) ClusterByName(ctx context.Context, teamID, name string) (Cluster, error) {
	return getRow(ctx, db, "cluster "+name, clusterRow.cluster,
		`SELECT `+clusterColumns+` FROM clusters WHERE team_id = ? AND name = ?`, teamID, name)
}

// ListClusters returns a team's clusters by name.
func (db *DB) ListClusters(ctx context.Context, teamID string) ([]Cluster, error) {
	return listRows(ctx, db, "clusters of team "+teamID, clusterRow.cluster,
		`SELECT `+clusterColumns+` FROM clusters WHERE team_id = ? ORDER BY name`, teamID)
}

// ConnectionStatus is the stored status of a repository connection. Listings derive
// more from the team's installations (see the server's repository API).
type ConnectionStatus string

const (
	ConnectionConnected       ConnectionStatus = "connected"
	ConnectionPendingApproval ConnectionStatus = "pending_approval"
	ConnectionRevoked         ConnectionStatus = "revoked"
)

// RepoConnection says that changes to a cluster's Applications may go through a
// repository.
type RepoConnection struct {
	ID           string
	ClusterID    string
	Repo         string // canonical URL
	Status       ConnectionStatus
	StatusReason string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

type repoConnectionRow struct {
	ID           string `db:"id"`
	ClusterID    string `db:"cluster_id"`
	Repo         string `db:"repo"`
	Status       string `db:"status"`
	StatusReason string `db:"status_reason"`
	CreatedAt    int64  `db:"created_at"`
	UpdatedAt    int64  `db:"updated_at"`
}

const repoConnectionColumns = `id, cluster_id, repo, status, status_reason, created_at, updated_at`

func (r repoConnectionRow) connection() RepoConnection {
	return RepoConnection{ID: r.ID, ClusterID: r.ClusterID, Repo: r.Repo, Status: ConnectionStatus(r.Status),
		StatusReason: r.StatusReason, CreatedAt: fromMillis(r.CreatedAt), UpdatedAt: fromMillis(r.UpdatedAt)}
}

// ConnectRepo connects repo (canonical URL) to a cluster with status. Connecting an
// already connected repository is not an error: the stored connection gets the new
// status and is returned, with created reporting whether it is new.
func (db *DB) ConnectRepo(ctx context.Context, clusterID, repo string, status ConnectionStatus) (conn RepoConnection, created bool, err error) {
	now := time.Now()
	err = db.InTx(ctx, func(tx *sqlx.Tx) error {
		var prev string
		perr := tx.GetContext(ctx, &prev, tx.Rebind(`SELECT status FROM repo_connections WHERE cluster_id = ? AND repo = ?`), clusterID, repo)
		if perr != nil && !errors.Is(perr, sql.ErrNoRows) {
			return fmt.Errorf("connect %s: %w", repo, perr)
		}
		res, err := tx.ExecContext(ctx, tx.Rebind(`INSERT INTO repo_connections (`+repoConnectionColumns+`)
			VALUES (?, ?, ?, ?, '', ?, ?) ON CONFLICT (cluster_id, repo) DO NOTHING`), NewID(), clusterID, repo, status, toMillis(now), toMillis(now))
		if err != nil {
			return fmt.Errorf("connect %s: %w", repo, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("connect %s: %w", repo, err)
		}
		created = n > 0
		var row repoConnectionRow
		if created {
			err = tx.GetContext(ctx, &row, tx.Rebind(`SELECT `+repoConnectionColumns+` FROM repo_connections
				WHERE cluster_id = ? AND repo = ?`), clusterID, repo)
		} else {
			err = tx.GetContext(ctx, &row, tx.Rebind(`UPDATE repo_connections SET status = ?, status_reason = '', updated_at = ?
				WHERE cluster_id = ? AND repo = ? RETURNING `+repoConnectionColumns), status, toMillis(now), clusterID, repo)
		}
		if err != nil {
			return fmt.Errorf("connect %s: %w", repo, err)
		}
		conn = row.connection()
		if prev != string(status) {
			return notifyConnectionTx(ctx, tx, clusterID, repo, string(status), "", now)
		}
		return nil
	})
	if err != nil {
		return RepoConnection{}, false, err
	}
	return conn, created, nil
}

// RepoConnectionFor reads the connection of repo to a cluster; ErrNotFound when there is none.
func (db *DB) RepoConnectionFor(ctx context.Context, clusterID, repo string) (RepoConnection, error) {
	return getRow(ctx, db, "connection of "+repo, repoConnectionRow.connection, `SELECT `+repoConnectionColumns+` FROM repo_connections
		WHERE cluster_id = ? AND repo = ?`, clusterID, repo)
}

// ListRepoConnections returns a cluster's connections by repository.
func (db *DB) ListRepoConnections(ctx context.Context, clusterID string) ([]RepoConnection, error) {
	return listRows(ctx, db, "connections of cluster "+clusterID, repoConnectionRow.connection, `SELECT `+repoConnectionColumns+` FROM repo_connections
		WHERE cluster_id = ? ORDER BY repo`, clusterID)
}

// DisconnectRepo removes a connection; ErrNotFound when there was none.
func (db *DB) DisconnectRepo(ctx context.Context, clusterID, repo string) error {
	return db.InTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, tx.Rebind(`DELETE FROM repo_connections WHERE cluster_id = ? AND repo = ?`), clusterID, repo)
		if err := checkOneRow(res, err, "connection of "+repo); err != nil {
			return err
		}
		return notifyConnectionTx(ctx, tx, clusterID, repo, ConnectionDisconnected, "disconnected by the team", time.Now())
	})
}

// ClusterByID reads a cluster by its id; ErrNotFound when there is none.
func (db *DB) ClusterByID(ctx context.Context, id string) (Cluster, error) {
	var row clusterRow
	err := db.GetContext(ctx, &row, db.Rebind(`SELECT `+clusterColumns+` FROM clusters WHERE id = ?`), id)
	if errors.Is(err, sql.ErrNoRows) {
		return Cluster{}, fmt.Errorf("cluster %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Cluster{}, fmt.Errorf("read cluster %s: %w", id, err)
	}
	return row.cluster(), nil
}

// CredentialsAssociatedData binds a cluster's sealed credentials to the cluster, so a
// sealed kubeconfig copied onto another cluster's row does not open there.
func CredentialsAssociatedData(teamID, clusterName string) []byte {
	return []byte("cluster:" + teamID + "/" + clusterName)
}
