package github

import (
	"net/http"
	"time"

	"github.com/gregjones/httpcache"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/rs/zerolog"
)

// logRequests logs each request to GitHub at lvl, with the keys of
// githubapp.ClientLogging (message github_request; method, path, elapsed, cached,
// status, size), which it replaces because that one logs the whole URL: the archive
// download link carries the token that authorizes it in its query (codeload's
// ?token=). The path logged here has no query.
func logRequests(lvl zerolog.Level) githubapp.ClientMiddleware {
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			start := time.Now()
			res, err := next.RoundTrip(r)
			ev := zerolog.Ctx(r.Context()).WithLevel(lvl).
				Str("method", r.Method).
				Str("path", withoutQuery(r.URL)).
				Dur("elapsed", time.Since(start))
			if res != nil {
				ev = ev.Bool("cached", res.Header.Get(httpcache.XFromCache) != "").
					Int("status", res.StatusCode).
					Int64("size", res.ContentLength)
			} else {
				ev = ev.Bool("cached", false).Int("status", -1).Int64("size", -1)
			}
			ev.Msg("github_request")
			return res, err
		})
	}
}
