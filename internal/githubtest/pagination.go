package githubtest

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// GitHub's page size: per_page defaults to 30 and is capped at 100.
const (
	defaultPerPage = 30
	maxPerPage     = 100
)

// pageRequest is the page of a list that a request's page and per_page parameters
// select, with GitHub's defaults and bounds applied.
type pageRequest struct {
	page, perPage int
}

func pageRequestOf(q url.Values) pageRequest {
	perPage, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || perPage <= 0 {
		perPage = defaultPerPage
	}
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page <= 0 {
		page = 1
	}
	return pageRequest{page: page, perPage: min(perPage, maxPerPage)}
}

// bounds returns the slice bounds of the page in a list of n items; a page past the
// end is empty.
func (p pageRequest) bounds(n int) (start, end int) {
	start = min((p.page-1)*p.perPage, n)
	return start, min(start+p.perPage, n)
}

// lastPage is the number of the last page of a list of n items; an empty list has
// one, empty, page.
func (p pageRequest) lastPage(n int) int {
	return max((n+p.perPage-1)/p.perPage, 1)
}

// paginate selects the page of a list of n items that r asks for, writes GitHub's
// Link header for it and returns the page's slice bounds. Like GitHub, the header
// names the prev, next, last and first pages that exist relative to this one and is
// absent when the list fits on one page; go-github's Response.NextPage, PrevPage,
// FirstPage and LastPage are read from it.
func paginate(w http.ResponseWriter, r *http.Request, n int) (start, end int) {
	p := pageRequestOf(r.URL.Query())
	if links := pageLinks(r, p, p.lastPage(n)); links != "" {
		w.Header().Set("Link", links)
	}
	return p.bounds(n)
}

// pageLinks builds the Link header value for page p of a list with last pages. The
// links repeat the request's own URL (as sent, so under /api/v3/ when the client used
// it) and parameters, with page replaced.
func pageLinks(r *http.Request, p pageRequest, last int) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	// RequestURI is the path as the client sent it, before the API prefix is stripped
	// for routing.
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		u = &url.URL{Path: r.URL.Path, RawQuery: r.URL.RawQuery}
	}
	q := u.Query()
	link := func(page int, rel string) string {
		q.Set("page", strconv.Itoa(page))
		ref := url.URL{Scheme: scheme, Host: r.Host, Path: u.Path, RawPath: u.RawPath, RawQuery: q.Encode()}
		return fmt.Sprintf("<%s>; rel=%q", ref.String(), rel)
	}
	var links []string
	if p.page > 1 {
		links = append(links, link(min(p.page-1, last), "prev"))
	}
	if p.page < last {
		links = append(links, link(p.page+1, "next"), link(last, "last"))
	}
	if p.page > 1 {
		links = append(links, link(1, "first"))
	}
	return strings.Join(links, ", ")
}
