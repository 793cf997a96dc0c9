package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/cache"
)

// TarballFetcher downloads the tarball of owner/repo at sha through the archive link
// endpoint, following GitHub's redirect with the same authenticated client.
func TarballFetcher(client *gh.Client, owner, repo, sha string) cache.Fetcher {
	return func(ctx context.Context) (io.ReadCloser, error) {
		// go-github sends the link request straight to the transport, past the
		// client's timeout, so a GitHub that never answers would hold the caller
		// forever: bound it with the same timeout.
		linkCtx, cancel := ctx, context.CancelFunc(func() {})
		if timeout := client.Client().Timeout; timeout > 0 {
			linkCtx, cancel = context.WithTimeout(ctx, timeout)
		}
		link, resp, err := client.Repositories.GetArchiveLink(linkCtx, owner, repo, gh.Tarball, &gh.RepositoryContentGetOptions{Ref: sha}, 0)
		cancel()
		if err != nil {
			var er *gh.ErrorResponse
			if resp != nil && resp.Response != nil && !errors.As(err, &er) {
				// go-github reports an unexpected status as plain text; keep the status
				// and headers so a 5xx or a rate limit is recognised as such.
				err = &StatusError{Op: "get tarball link", StatusCode: resp.StatusCode, Header: resp.Header}
			}
			if resp != nil && resp.Response != nil && resp.StatusCode == http.StatusNotFound {
				// GitHub's answer for a commit the repository does not hold (a SHA
				// mistyped, one a force push removed): no retry brings it back.
				return nil, fmt.Errorf("get tarball link of %s: %w (%w)", sha, ErrRevisionNotFound, err)
			}
			return nil, fmt.Errorf("get tarball link: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, link.String(), nil)
		if err != nil {
			return nil, fmt.Errorf("build tarball request: %w", err)
		}
		dl, err := client.Client().Do(req)
		if err != nil {
			// The link authorizes the download with a token in its query (codeload's
			// ?token=), which net/http's error names; the error reaches logs and a
			// plan's history.
			var ue *url.Error
			if errors.As(err, &ue) {
				ue.URL = withoutQuery(link)
			}
			return nil, fmt.Errorf("download tarball: %w", err)
		}
		if dl.StatusCode != http.StatusOK {
			dl.Body.Close()
			return nil, &StatusError{Op: "download tarball", StatusCode: dl.StatusCode, Header: dl.Header}
		}
		return dl.Body, nil
	}
}

// withoutQuery is u without its query and fragment, where a link's token may be.
func withoutQuery(u *url.URL) string {
	c := *u
	c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = "", false, "", ""
	return c.String()
}
