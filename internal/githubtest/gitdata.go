package githubtest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/utils/merkletrie"
	"github.com/google/go-github/v62/github"
)

func (s *Server) repoRoutes() []route {
	return []route{
		{pattern: "GET /repos/{owner}/{repo}", doc: "/repos/repos#get-a-repository", handler: s.onRepo(readMetadata, s.handleGetRepo)},
		{pattern: "GET /repos/{owner}/{repo}/branches", doc: "/branches/branches#list-branches", handler: s.onRepo(readMetadata, s.handleListBranches)},
		{pattern: "GET /repos/{owner}/{repo}/branches/{branch...}", doc: "/branches/branches#get-a-branch", handler: s.onRepo(readMetadata, s.handleGetBranch)},
		{pattern: "GET /repos/{owner}/{repo}/git/ref/{ref...}", doc: "/git/refs#get-a-reference", handler: s.onRepo(readContents, s.handleGetRef)},
		{pattern: "GET /repos/{owner}/{repo}/git/refs", doc: "/git/refs#list-matching-references", handler: s.onRepo(readContents, s.handleMatchingRefs)},
		{pattern: "GET /repos/{owner}/{repo}/git/refs/{ref...}", doc: "/git/refs#get-a-reference", handler: s.onRepo(readContents, s.handleGetRef)},
		{pattern: "GET /repos/{owner}/{repo}/git/matching-refs/{ref...}", doc: "/git/refs#list-matching-references", handler: s.onRepo(readContents, s.handleMatchingRefs)},
		{pattern: "POST /repos/{owner}/{repo}/git/refs", doc: "/git/refs#create-a-reference", handler: onRepoWithBody(s, writeContent, s.handleCreateRef)},
		{pattern: "PATCH /repos/{owner}/{repo}/git/refs/{ref...}", doc: "/git/refs#update-a-reference", handler: onRepoWithBody(s, writeContent, s.handleUpdateRef)},
		{pattern: "DELETE /repos/{owner}/{repo}/git/refs/{ref...}", doc: "/git/refs#delete-a-reference", handler: s.onRepo(writeContent, s.handleDeleteRef)},
		{pattern: "POST /repos/{owner}/{repo}/git/blobs", doc: "/git/blobs#create-a-blob", handler: onRepoWithBody(s, writeContent, s.handleCreateBlob)},
		{pattern: "GET /repos/{owner}/{repo}/git/blobs/{sha}", doc: "/git/blobs#get-a-blob", handler: s.onRepo(readContents, s.handleGetBlob)},
		{pattern: "POST /repos/{owner}/{repo}/git/trees", doc: "/git/trees#create-a-tree", handler: onRepoWithBody(s, writeContent, s.handleCreateTree)},
		{pattern: "GET /repos/{owner}/{repo}/git/trees/{sha...}", doc: "/git/trees#get-a-tree", handler: s.onRepo(readContents, s.handleGetTree)},
		{pattern: "POST /repos/{owner}/{repo}/git/commits", doc: "/git/commits#create-a-commit", handler: onRepoWithBody(s, writeContent, s.handleCreateCommit)},
		{pattern: "GET /repos/{owner}/{repo}/git/commits/{sha}", doc: "/git/commits#get-a-commit-object", handler: s.onRepo(readContents, s.handleGetGitCommit)},
		{pattern: "GET /repos/{owner}/{repo}/commits/{ref...}", handler: s.handleCommitsDispatch, dispatch: []string{endpointGetCommit, endpointListCheckRunsForRef}},
		{pattern: "GET /repos/{owner}/{repo}/compare/{basehead...}", doc: "/commits/commits#compare-two-commits", handler: s.onRepo(readContents, s.handleCompare)},
	}
}

const (
	endpointGetCommit           = "GET /repos/{owner}/{repo}/commits/{ref}"
	endpointListCheckRunsForRef = "GET /repos/{owner}/{repo}/commits/{ref}/check-runs"
)

// handleCommitsDispatch splits commits/{ref} from commits/{ref}/check-runs: refs may
// contain slashes, so one wildcard route takes both and counts each under its own name.
func (s *Server) handleCommitsDispatch(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("ref")
	if rest, ok := strings.CutSuffix(ref, "/check-runs"); ok {
		r.SetPathValue("ref", rest)
		s.serveCounted(w, r, endpointListCheckRunsForRef, "/checks/runs#list-check-runs-for-a-git-reference", s.onRepo(readChecks, s.handleListCheckRunsForRef))
		return
	}
	s.serveCounted(w, r, endpointGetCommit, "/commits/commits#get-a-commit", s.onRepo(readContents, s.handleGetCommit))
}

var (
	readMetadata = need(PermRead, "metadata", "contents", "pull_requests", "checks", "issues")
	readContents = need(PermRead, "contents")
	writeContent = need(PermWrite, "contents")
)

func (s *Server) handleGetRepo(w http.ResponseWriter, r *http.Request, rp *repo) {
	out := s.repoJSON(rp)
	// For a person's token GitHub adds what that person may do.
	if user := s.userOfTokenLocked(credentials(r)); user != nil {
		out.Permissions = roleFacts[rp.roleLocked(user)].flags
	}
	writeJSON(w, http.StatusOK, out)
}

// --- refs ---

func (s *Server) refJSON(rp *repo, ref *plumbing.Reference) *github.Reference {
	kind := "commit"
	if _, err := object.GetTag(rp.storer(), ref.Hash()); err == nil {
		kind = "tag"
	}
	short := strings.TrimPrefix(ref.Name().String(), "refs/")
	return &github.Reference{
		Ref:    ptr(ref.Name().String()),
		URL:    ptr(s.apiURL("repos/%s/git/refs/%s", rp.fullName(), short)),
		NodeID: ptr(nodeID("Ref", int64(len(short)))),
		Object: &github.GitObject{
			Type: ptr(kind),
			SHA:  ptr(ref.Hash().String()),
			URL:  ptr(s.apiURL("repos/%s/git/%ss/%s", rp.fullName(), kind, ref.Hash())),
		},
	}
}

func (s *Server) handleGetRef(w http.ResponseWriter, r *http.Request, rp *repo) {
	name := plumbing.ReferenceName("refs/" + strings.TrimPrefix(r.PathValue("ref"), "refs/"))
	ref, err := rp.storer().Reference(name)
	if err != nil {
		writeError(w, r, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, s.refJSON(rp, ref))
}

func (s *Server) handleMatchingRefs(w http.ResponseWriter, r *http.Request, rp *repo) {
	prefix := "refs/" + strings.TrimPrefix(r.PathValue("ref"), "refs/")
	iter, err := rp.storer().IterReferences()
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, fmt.Sprintf("list references: %v", err))
		return
	}
	defer iter.Close()
	out := []*github.Reference{}
	_ = iter.ForEach(func(ref *plumbing.Reference) error {
		if ref.Type() == plumbing.HashReference && strings.HasPrefix(ref.Name().String(), prefix) {
			out = append(out, s.refJSON(rp, ref))
		}
		return nil
	})
	start, end := paginate(w, r, len(out))
	writeJSON(w, http.StatusOK, out[start:end])
}

type createRefRequest struct {
	Ref *string `json:"ref"`
	SHA *string `json:"sha"`
}

func (s *Server) handleCreateRef(w http.ResponseWriter, r *http.Request, rp *repo, req *createRefRequest) {
	if !requireFields(w, r, field{"ref", req.Ref != nil}, field{"sha", req.SHA != nil}) {
		return
	}
	name := plumbing.ReferenceName(*req.Ref)
	if !strings.HasPrefix(*req.Ref, "refs/") || strings.Count(*req.Ref, "/") < 2 || name.Validate() != nil {
		writeError(w, r, http.StatusUnprocessableEntity, "Reference name is invalid")
		return
	}
	h, ok := rp.existingObject(*req.SHA)
	if !ok {
		writeError(w, r, http.StatusUnprocessableEntity, "Object does not exist")
		return
	}
	if _, exists := rp.refHash(name); exists {
		writeError(w, r, http.StatusUnprocessableEntity, "Reference already exists")
		return
	}
	if err := rp.setRef(name, h); err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	s.refUpdatedLocked(rp, name, plumbing.ZeroHash, h, false, s.botLocked())
	ref, _ := rp.storer().Reference(name)
	writeJSON(w, http.StatusCreated, s.refJSON(rp, ref))
}

type updateRefRequest struct {
	SHA   *string `json:"sha"`
	Force bool    `json:"force"`
}

func (s *Server) handleUpdateRef(w http.ResponseWriter, r *http.Request, rp *repo, req *updateRefRequest) {
	if !requireFields(w, r, field{"sha", req.SHA != nil}) {
		return
	}
	name := plumbing.ReferenceName("refs/" + strings.TrimPrefix(r.PathValue("ref"), "refs/"))
	old, exists := rp.refHash(name)
	if !exists {
		writeError(w, r, http.StatusUnprocessableEntity, "Reference does not exist")
		return
	}
	h, ok := rp.existingObject(*req.SHA)
	if !ok {
		writeError(w, r, http.StatusUnprocessableEntity, "Object does not exist")
		return
	}
	fastForward := rp.isAncestor(old, h)
	if !fastForward && !req.Force {
		writeError(w, r, http.StatusUnprocessableEntity, "Update is not a fast forward")
		return
	}
	if err := rp.setRef(name, h); err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	if old != h {
		s.refUpdatedLocked(rp, name, old, h, !fastForward, s.botLocked())
	}
	ref, _ := rp.storer().Reference(name)
	writeJSON(w, http.StatusOK, s.refJSON(rp, ref))
}

func (s *Server) handleDeleteRef(w http.ResponseWriter, r *http.Request, rp *repo) {
	name := plumbing.ReferenceName("refs/" + strings.TrimPrefix(r.PathValue("ref"), "refs/"))
	old, exists := rp.refHash(name)
	if !exists {
		writeError(w, r, http.StatusUnprocessableEntity, "Reference does not exist")
		return
	}
	if err := rp.storer().RemoveReference(name); err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	s.refUpdatedLocked(rp, name, old, plumbing.ZeroHash, false, s.botLocked())
	w.WriteHeader(http.StatusNoContent)
}

// existingObject parses a full SHA and reports whether the object exists.
func (rp *repo) existingObject(sha string) (plumbing.Hash, bool) {
	if len(sha) != 40 || !hexSHA.MatchString(sha) {
		return plumbing.ZeroHash, false
	}
	h := plumbing.NewHash(sha)
	if _, err := rp.storer().EncodedObject(plumbing.AnyObject, h); err != nil {
		return plumbing.ZeroHash, false
	}
	return h, true
}

// isAncestor reports whether a is b or an ancestor of b.
func (rp *repo) isAncestor(a, b plumbing.Hash) bool {
	if a == b {
		return true
	}
	ca, err := object.GetCommit(rp.storer(), a)
	if err != nil {
		return false
	}
	cb, err := object.GetCommit(rp.storer(), b)
	if err != nil {
		return false
	}
	ok, err := ca.IsAncestor(cb)
	return err == nil && ok
}

// --- blobs ---

type createBlobRequest struct {
	Content  *string `json:"content"`
	Encoding string  `json:"encoding"`
}

func (s *Server) handleCreateBlob(w http.ResponseWriter, r *http.Request, rp *repo, req *createBlobRequest) {
	if !requireFields(w, r, field{"content", req.Content != nil}) {
		return
	}
	var data []byte
	switch req.Encoding {
	case "", "utf-8":
		data = []byte(*req.Content)
	case "base64":
		d, err := base64.StdEncoding.DecodeString(strings.Map(dropWhitespace, *req.Content))
		if err != nil {
			writeError(w, r, http.StatusUnprocessableEntity, "content is not valid Base64")
			return
		}
		data = d
	default:
		writeValidation(w, r, fieldError{Resource: "Blob", Field: "encoding", Code: "invalid", Message: fmt.Sprintf("encoding %q is not supported", req.Encoding)})
		return
	}
	h, err := rp.writeBlob(data)
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{
		"sha": h.String(),
		"url": s.apiURL("repos/%s/git/blobs/%s", rp.fullName(), h),
	})
}

func dropWhitespace(r rune) rune {
	if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
		return -1
	}
	return r
}

func (s *Server) handleGetBlob(w http.ResponseWriter, r *http.Request, rp *repo) {
	h, ok := rp.existingObject(r.PathValue("sha"))
	if !ok {
		writeError(w, r, http.StatusNotFound, "Not Found")
		return
	}
	data, err := rp.readBlob(h)
	if err != nil {
		writeError(w, r, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, &github.Blob{
		SHA:      ptr(h.String()),
		NodeID:   ptr(nodeID("Blob", int64(len(data)))),
		Size:     ptr(len(data)),
		URL:      ptr(s.apiURL("repos/%s/git/blobs/%s", rp.fullName(), h)),
		Content:  ptr(wrapBase64(data)),
		Encoding: ptr("base64"),
	})
}

// wrapBase64 encodes like GitHub: base64 in lines of 60 characters.
func wrapBase64(data []byte) string {
	enc := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	for len(enc) > 60 {
		b.WriteString(enc[:60])
		b.WriteByte('\n')
		enc = enc[60:]
	}
	b.WriteString(enc)
	b.WriteByte('\n')
	return b.String()
}

// --- trees ---

// treeEntryRequest is one entry of POST git/trees. SHA is raw JSON so that an explicit
// null (delete the path) can be told from an absent field.
type treeEntryRequest struct {
	Path    string          `json:"path"`
	Mode    string          `json:"mode"`
	Type    string          `json:"type"`
	SHA     json.RawMessage `json:"sha"`
	Content *string         `json:"content"`
}

var treeModes = map[string]filemode.FileMode{
	"100644": filemode.Regular,
	"100755": filemode.Executable,
	"040000": filemode.Dir,
	"160000": filemode.Submodule,
	"120000": filemode.Symlink,
}

type createTreeRequest struct {
	BaseTree *string            `json:"base_tree"`
	Tree     []treeEntryRequest `json:"tree"`
}

func (s *Server) handleCreateTree(w http.ResponseWriter, r *http.Request, rp *repo, req *createTreeRequest) {
	if !requireFields(w, r, field{"tree", req.Tree != nil}) {
		return
	}
	var base plumbing.Hash
	if req.BaseTree != nil && *req.BaseTree != "" {
		h, ok := rp.existingObject(*req.BaseTree)
		if !ok {
			writeError(w, r, http.StatusUnprocessableEntity, "base_tree is not a valid tree oid")
			return
		}
		if _, err := object.GetTree(rp.storer(), h); err != nil {
			writeError(w, r, http.StatusUnprocessableEntity, "base_tree is not a valid tree oid")
			return
		}
		base = h
	}
	changes, msg := rp.treeChanges(req.Tree)
	if msg != "" {
		writeError(w, r, http.StatusUnprocessableEntity, msg)
		return
	}
	h, _, err := rp.editTree(base, changes)
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	out, err := s.treeJSON(rp, h, false)
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

// treeChanges validates the entries of a create-tree request; content entries are
// written as blobs. It returns GitHub's message for the first bad entry.
func (rp *repo) treeChanges(entries []treeEntryRequest) ([]treeChange, string) {
	var out []treeChange
	for i, e := range entries {
		if err := validatePath(e.Path); err != nil {
			return nil, fmt.Sprintf("tree.path %s", err)
		}
		mode, ok := treeModes[e.Mode]
		if !ok {
			return nil, fmt.Sprintf("Invalid request.\n\nFor 'items', %q is not a valid mode (tree[%d]).", e.Mode, i)
		}
		wantType := "blob"
		switch mode {
		case filemode.Dir:
			wantType = "tree"
		case filemode.Submodule:
			wantType = "commit"
		}
		if e.Type != "" && e.Type != wantType {
			return nil, fmt.Sprintf("tree.type %q does not match mode %s", e.Type, e.Mode)
		}
		shaNull := string(e.SHA) == "null"
		hasSHA := len(e.SHA) > 0 && !shaNull
		switch {
		case hasSHA && e.Content != nil:
			return nil, "Must supply either tree.sha or tree.content. Request will be rejected if both are present."
		case shaNull && e.Content == nil:
			out = append(out, treeChange{path: e.Path, delete: true})
		case e.Content != nil:
			if wantType != "blob" {
				return nil, "tree.content can only be used for blobs"
			}
			h, err := rp.writeBlob([]byte(*e.Content))
			if err != nil {
				return nil, err.Error()
			}
			out = append(out, treeChange{path: e.Path, mode: mode, hash: h})
		case hasSHA:
			var sha string
			if err := json.Unmarshal(e.SHA, &sha); err != nil {
				return nil, "tree.sha must be a string"
			}
			h, ok := rp.existingObject(sha)
			if mode == filemode.Submodule {
				h, ok = plumbing.NewHash(sha), len(sha) == 40 && hexSHA.MatchString(sha)
			}
			if !ok || !rp.objectHasType(h, wantType) {
				return nil, fmt.Sprintf("tree.sha %s is not a valid %s", sha, wantType)
			}
			out = append(out, treeChange{path: e.Path, mode: mode, hash: h})
		default:
			return nil, "Must supply either tree.sha or tree.content. Request will be rejected if both are present."
		}
	}
	return out, ""
}

func (rp *repo) objectHasType(h plumbing.Hash, kind string) bool {
	if kind == "commit" {
		return true // submodule commits live in another repository
	}
	o, err := rp.storer().EncodedObject(plumbing.AnyObject, h)
	return err == nil && o.Type().String() == kind
}

type treeResponse struct {
	SHA       string              `json:"sha"`
	URL       string              `json:"url"`
	Entries   []*github.TreeEntry `json:"tree"`
	Truncated bool                `json:"truncated"`
}

func (s *Server) treeJSON(rp *repo, h plumbing.Hash, recursive bool) (*treeResponse, error) {
	t, err := object.GetTree(rp.storer(), h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	out := &treeResponse{SHA: h.String(), URL: s.apiURL("repos/%s/git/trees/%s", rp.fullName(), h), Entries: []*github.TreeEntry{}}
	var walk func(t *object.Tree, prefix string) error
	walk = func(t *object.Tree, prefix string) error {
		for _, e := range t.Entries {
			entry := &github.TreeEntry{
				SHA:  ptr(e.Hash.String()),
				Path: ptr(prefix + e.Name),
				Mode: ptr(fmt.Sprintf("%06o", uint32(e.Mode))),
			}
			switch e.Mode {
			case filemode.Dir:
				entry.Type = ptr("tree")
				entry.URL = ptr(s.apiURL("repos/%s/git/trees/%s", rp.fullName(), e.Hash))
			case filemode.Submodule:
				entry.Type = ptr("commit")
			default:
				entry.Type = ptr("blob")
				entry.URL = ptr(s.apiURL("repos/%s/git/blobs/%s", rp.fullName(), e.Hash))
				if o, err := rp.storer().EncodedObject(plumbing.BlobObject, e.Hash); err == nil {
					entry.Size = ptr(int(o.Size()))
				}
			}
			out.Entries = append(out.Entries, entry)
			if recursive && e.Mode == filemode.Dir {
				sub, err := object.GetTree(rp.storer(), e.Hash)
				if err != nil {
					return fmt.Errorf("read tree %s: %w", e.Hash, err)
				}
				if err := walk(sub, prefix+e.Name+"/"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk(t, "")
}

func (s *Server) handleGetTree(w http.ResponseWriter, r *http.Request, rp *repo) {
	ref := r.PathValue("sha")
	var h plumbing.Hash
	if th, ok := rp.existingObject(ref); ok && rp.objectHasType(th, "tree") {
		h = th
	} else if c, err := rp.resolveCommit(ref); err == nil {
		h = c.TreeHash
	} else {
		writeError(w, r, http.StatusNotFound, "Not Found")
		return
	}
	recursive := r.URL.Query().Get("recursive")
	out, err := s.treeJSON(rp, h, recursive != "" && recursive != "0" && recursive != "false")
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// --- commits ---

type commitIdentity struct {
	Name  string  `json:"name"`
	Email string  `json:"email"`
	Date  *string `json:"date"`
}

type createCommitRequest struct {
	Message   *string         `json:"message"`
	Tree      *string         `json:"tree"`
	Parents   []string        `json:"parents"`
	Author    *commitIdentity `json:"author"`
	Committer *commitIdentity `json:"committer"`
	Signature *string         `json:"signature"`
}

func (s *Server) handleCreateCommit(w http.ResponseWriter, r *http.Request, rp *repo, req *createCommitRequest) {
	if !requireFields(w, r, field{"message", req.Message != nil}, field{"tree", req.Tree != nil}) {
		return
	}
	tree, ok := rp.existingObject(*req.Tree)
	if !ok || !rp.objectHasType(tree, "tree") {
		writeError(w, r, http.StatusUnprocessableEntity, "Tree SHA does not exist")
		return
	}
	var parents []plumbing.Hash
	for _, p := range req.Parents {
		h, ok := rp.existingObject(p)
		if !ok || !rp.objectHasType(h, "commit") {
			writeError(w, r, http.StatusUnprocessableEntity, "Parent SHA does not exist or is not a commit object")
			return
		}
		parents = append(parents, h)
	}
	now := s.clock.Now()
	bot := s.botLocked()
	author := object.Signature{Name: bot.login, Email: fmt.Sprintf("%d+%s@users.noreply.github.com", bot.id, bot.login), When: now}
	// Commits an App makes through the API without naming a committer are signed by
	// GitHub and shown as verified; naming someone else leaves them unsigned.
	verified := req.Author == nil && req.Committer == nil && req.Signature == nil
	committer := object.Signature{Name: "GitHub", Email: "noreply@github.com", When: now}
	if req.Author != nil {
		sig, err := identitySignature(req.Author, now)
		if err != nil {
			writeValidation(w, r, fieldError{Resource: "Commit", Field: "author", Code: "invalid", Message: err.Error()})
			return
		}
		author, committer = sig, sig
	}
	if req.Committer != nil {
		sig, err := identitySignature(req.Committer, now)
		if err != nil {
			writeValidation(w, r, fieldError{Resource: "Commit", Field: "committer", Code: "invalid", Message: err.Error()})
			return
		}
		committer = sig
	}
	c := &object.Commit{Author: author, Committer: committer, Message: *req.Message, TreeHash: tree, ParentHashes: parents}
	if req.Signature != nil {
		c.PGPSignature = *req.Signature
	}
	h, err := rp.writeCommit(c)
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	if verified {
		s.verifiedCommits[h.String()] = true
	}
	stored, err := object.GetCommit(rp.storer(), h)
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, s.gitCommitJSON(rp, stored))
}

func identitySignature(id *commitIdentity, now time.Time) (object.Signature, error) {
	if id.Name == "" || id.Email == "" {
		return object.Signature{}, errors.New("name and email are required")
	}
	when := now
	if id.Date != nil {
		t, err := time.Parse(time.RFC3339, *id.Date)
		if err != nil {
			return object.Signature{}, fmt.Errorf("date %q is not ISO 8601", *id.Date)
		}
		when = t
	}
	return object.Signature{Name: id.Name, Email: id.Email, When: when}, nil
}

func (s *Server) gitCommitJSON(rp *repo, c *object.Commit) *github.Commit {
	full := rp.fullName()
	out := &github.Commit{
		SHA:     ptr(c.Hash.String()),
		NodeID:  ptr(nodeID("Commit", int64(c.Author.When.Unix()))),
		URL:     ptr(s.apiURL("repos/%s/git/commits/%s", full, c.Hash)),
		HTMLURL: ptr(s.htmlURL("%s/commit/%s", full, c.Hash)),
		Author: &github.CommitAuthor{
			Name: ptr(c.Author.Name), Email: ptr(c.Author.Email), Date: ts(c.Author.When.UTC()),
		},
		Committer: &github.CommitAuthor{
			Name: ptr(c.Committer.Name), Email: ptr(c.Committer.Email), Date: ts(c.Committer.When.UTC()),
		},
		Message: ptr(c.Message),
		Tree: &github.Tree{
			SHA: ptr(c.TreeHash.String()),
		},
		Parents:      []*github.Commit{},
		CommentCount: ptr(0),
	}
	for _, p := range c.ParentHashes {
		out.Parents = append(out.Parents, &github.Commit{
			SHA:     ptr(p.String()),
			URL:     ptr(s.apiURL("repos/%s/git/commits/%s", full, p)),
			HTMLURL: ptr(s.htmlURL("%s/commit/%s", full, p)),
		})
	}
	v := &github.SignatureVerification{Verified: ptr(false), Reason: ptr("unsigned")}
	if s.verifiedCommits[c.Hash.String()] {
		v = &github.SignatureVerification{Verified: ptr(true), Reason: ptr("valid")}
	} else if c.PGPSignature != "" {
		v = &github.SignatureVerification{Verified: ptr(false), Reason: ptr("unknown_key"), Signature: ptr(c.PGPSignature)}
	}
	out.Verification = v
	return out
}

func (s *Server) handleGetGitCommit(w http.ResponseWriter, r *http.Request, rp *repo) {
	h, ok := rp.existingObject(r.PathValue("sha"))
	if !ok {
		writeError(w, r, http.StatusNotFound, "Not Found")
		return
	}
	c, err := object.GetCommit(rp.storer(), h)
	if err != nil {
		writeError(w, r, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, s.gitCommitJSON(rp, c))
}

func (s *Server) repoCommitJSON(rp *repo, c *object.Commit, withFiles bool) (*github.RepositoryCommit, error) {
	full := rp.fullName()
	gc := s.gitCommitJSON(rp, c)
	out := &github.RepositoryCommit{
		NodeID:      gc.NodeID,
		SHA:         gc.SHA,
		Commit:      gc,
		URL:         ptr(s.apiURL("repos/%s/commits/%s", full, c.Hash)),
		HTMLURL:     gc.HTMLURL,
		CommentsURL: ptr(s.apiURL("repos/%s/commits/%s/comments", full, c.Hash)),
		Parents:     []*github.Commit{},
	}
	for _, p := range c.ParentHashes {
		out.Parents = append(out.Parents, &github.Commit{
			SHA:     ptr(p.String()),
			URL:     ptr(s.apiURL("repos/%s/commits/%s", full, p)),
			HTMLURL: ptr(s.htmlURL("%s/commit/%s", full, p)),
		})
	}
	if !withFiles {
		return out, nil
	}
	var parentTree *object.Tree
	if len(c.ParentHashes) > 0 {
		p, err := object.GetCommit(rp.storer(), c.ParentHashes[0])
		if err != nil {
			return nil, fmt.Errorf("read parent of %s: %w", c.Hash, err)
		}
		if parentTree, err = p.Tree(); err != nil {
			return nil, fmt.Errorf("read tree of %s: %w", p.Hash, err)
		}
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", c.Hash, err)
	}
	files, err := s.diffFiles(rp, parentTree, tree, c.Hash.String())
	if err != nil {
		return nil, err
	}
	out.Files = files
	add, del := 0, 0
	for _, f := range files {
		add += f.GetAdditions()
		del += f.GetDeletions()
	}
	out.Stats = &github.CommitStats{Additions: ptr(add), Deletions: ptr(del), Total: ptr(add + del)}
	return out, nil
}

func (s *Server) handleGetCommit(w http.ResponseWriter, r *http.Request, rp *repo) {
	c, err := rp.resolveCommit(r.PathValue("ref"))
	if err != nil {
		writeError(w, r, http.StatusUnprocessableEntity, fmt.Sprintf("No commit found for SHA: %s", r.PathValue("ref")))
		return
	}
	out, err := s.repoCommitJSON(rp, c, true)
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// diffFiles lists changed files between two trees (nil: empty) as GitHub's "files".
func (s *Server) diffFiles(rp *repo, from, to *object.Tree, ref string) ([]*github.CommitFile, error) {
	if from == nil {
		from = &object.Tree{}
	}
	if to == nil {
		to = &object.Tree{}
	}
	key := from.Hash.String() + ".." + to.Hash.String() + "@" + ref
	rp.memo.Lock()
	files, ok := rp.memo.diffs[key]
	rp.memo.Unlock()
	if ok {
		return slices.Clone(files), nil
	}
	files, err := s.computeDiffFiles(rp, from, to, ref)
	if err != nil {
		return nil, err
	}
	rp.memo.Lock()
	if rp.memo.diffs == nil {
		rp.memo.diffs = map[string][]*github.CommitFile{}
	}
	rp.memo.diffs[key] = files
	rp.memo.Unlock()
	return slices.Clone(files), nil
}

// computeDiffFiles is diffFiles without its memo.
func (s *Server) computeDiffFiles(rp *repo, from, to *object.Tree, ref string) ([]*github.CommitFile, error) {
	changes, err := object.DiffTree(from, to)
	if err != nil {
		return nil, fmt.Errorf("diff trees: %w", err)
	}
	files := []*github.CommitFile{}
	for _, ch := range changes {
		action, err := ch.Action()
		if err != nil {
			return nil, fmt.Errorf("classify change: %w", err)
		}
		patch, err := ch.Patch()
		if err != nil {
			return nil, fmt.Errorf("diff %s: %w", ch.To.Name, err)
		}
		add, del := 0, 0
		for _, st := range patch.Stats() {
			add += st.Addition
			del += st.Deletion
		}
		name, sha, status := ch.To.Name, ch.To.TreeEntry.Hash, "modified"
		switch action {
		case merkletrie.Insert:
			status = "added"
		case merkletrie.Delete:
			name, sha, status = ch.From.Name, ch.From.TreeEntry.Hash, "removed"
		}
		f := &github.CommitFile{
			SHA:         ptr(sha.String()),
			Filename:    ptr(name),
			Status:      ptr(status),
			Additions:   ptr(add),
			Deletions:   ptr(del),
			Changes:     ptr(add + del),
			BlobURL:     ptr(s.htmlURL("%s/blob/%s/%s", rp.fullName(), ref, name)),
			RawURL:      ptr(s.htmlURL("%s/raw/%s/%s", rp.fullName(), ref, name)),
			ContentsURL: ptr(s.apiURL("repos/%s/contents/%s?ref=%s", rp.fullName(), name, ref)),
		}
		if p := hunks(patch.String()); p != "" {
			f.Patch = ptr(p)
		}
		files = append(files, f)
	}
	return files, nil
}

// hunks keeps the "@@" hunks of a unified diff: GitHub's "patch" field omits the
// file headers.
func hunks(diff string) string {
	i := strings.Index(diff, "@@")
	if i < 0 {
		return ""
	}
	out := diff[i:]
	if !utf8.ValidString(out) {
		return ""
	}
	return strings.TrimSuffix(out, "\n")
}

// --- compare ---

func (s *Server) handleCompare(w http.ResponseWriter, r *http.Request, rp *repo) {
	baseRef, headRef, ok := strings.Cut(r.PathValue("basehead"), "...")
	if !ok {
		writeError(w, r, http.StatusNotFound, "Not Found")
		return
	}
	base, errBase := rp.resolveCommit(baseRef)
	head, errHead := rp.resolveCommit(headRef)
	if errBase != nil || errHead != nil {
		writeError(w, r, http.StatusNotFound, "Not Found")
		return
	}
	out, err := s.compareJSON(rp, base, head)
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) compareJSON(rp *repo, base, head *object.Commit) (*github.CommitsComparison, error) {
	full := rp.fullName()
	ahead, mergeBase, err := rp.commitsBetween(base, head)
	if err != nil {
		return nil, err
	}
	behind, _, err := rp.commitsBetween(head, base)
	if err != nil {
		return nil, err
	}
	status := "diverged"
	switch {
	case base.Hash == head.Hash:
		status = "identical"
	case len(behind) == 0:
		status = "ahead"
	case len(ahead) == 0:
		status = "behind"
	}
	baseJSON, err := s.repoCommitJSON(rp, base, false)
	if err != nil {
		return nil, err
	}
	out := &github.CommitsComparison{
		BaseCommit:   baseJSON,
		Status:       ptr(status),
		AheadBy:      ptr(len(ahead)),
		BehindBy:     ptr(len(behind)),
		TotalCommits: ptr(len(ahead)),
		Commits:      []*github.RepositoryCommit{},
		HTMLURL:      ptr(s.htmlURL("%s/compare/%s...%s", full, base.Hash, head.Hash)),
		PermalinkURL: ptr(s.htmlURL("%s/compare/%s...%s", full, base.Hash, head.Hash)),
		DiffURL:      ptr(s.htmlURL("%s/compare/%s...%s.diff", full, base.Hash, head.Hash)),
		PatchURL:     ptr(s.htmlURL("%s/compare/%s...%s.patch", full, base.Hash, head.Hash)),
		URL:          ptr(s.apiURL("repos/%s/compare/%s...%s", full, base.Hash, head.Hash)),
	}
	var mergeBaseTree *object.Tree
	if mergeBase != nil {
		mb, err := s.repoCommitJSON(rp, mergeBase, false)
		if err != nil {
			return nil, err
		}
		out.MergeBaseCommit = mb
		if mergeBaseTree, err = mergeBase.Tree(); err != nil {
			return nil, fmt.Errorf("read tree of %s: %w", mergeBase.Hash, err)
		}
	}
	for i := len(ahead) - 1; i >= 0; i-- {
		c, err := s.repoCommitJSON(rp, ahead[i], false)
		if err != nil {
			return nil, err
		}
		out.Commits = append(out.Commits, c)
	}
	headTree, err := head.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", head.Hash, err)
	}
	if out.Files, err = s.diffFiles(rp, mergeBaseTree, headTree, head.Hash.String()); err != nil {
		return nil, err
	}
	return out, nil
}

// commitsBetween returns the commits reachable from head but not from base (newest
// first) and the best merge base (nil when the histories are unrelated).
func (rp *repo) commitsBetween(base, head *object.Commit) ([]*object.Commit, *object.Commit, error) {
	inBase := map[plumbing.Hash]bool{}
	if err := walkCommits(base, func(c *object.Commit) bool {
		inBase[c.Hash] = true
		return true
	}); err != nil {
		return nil, nil, err
	}
	var out []*object.Commit
	if err := walkCommits(head, func(c *object.Commit) bool {
		if inBase[c.Hash] {
			return false
		}
		out = append(out, c)
		return true
	}); err != nil {
		return nil, nil, err
	}
	bases, err := base.MergeBase(head)
	if err != nil {
		return nil, nil, fmt.Errorf("merge base of %s and %s: %w", base.Hash, head.Hash, err)
	}
	var mb *object.Commit
	if len(bases) > 0 {
		mb = bases[0]
	}
	return out, mb, nil
}

// walkCommits visits the commit and its ancestors (each once, newest first by
// traversal order); visit returns false to not descend past a commit.
func walkCommits(start *object.Commit, visit func(*object.Commit) bool) error {
	seen := map[plumbing.Hash]bool{}
	queue := []*object.Commit{start}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if seen[c.Hash] {
			continue
		}
		seen[c.Hash] = true
		if !visit(c) {
			continue
		}
		err := c.Parents().ForEach(func(p *object.Commit) error {
			queue = append(queue, p)
			return nil
		})
		if err != nil {
			return fmt.Errorf("read parents of %s: %w", c.Hash, err)
		}
	}
	return nil
}

// --- branches ---

func (s *Server) branchSummary(rp *repo, ref *plumbing.Reference) *github.Branch {
	name := ref.Name().Short()
	return &github.Branch{
		Name: ptr(name),
		Commit: &github.RepositoryCommit{
			SHA: ptr(ref.Hash().String()),
			URL: ptr(s.apiURL("repos/%s/commits/%s", rp.fullName(), ref.Hash())),
		},
		Protected: ptr(false),
	}
}

func (s *Server) handleListBranches(w http.ResponseWriter, r *http.Request, rp *repo) {
	refs, err := rp.branches()
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	out := []*github.Branch{}
	for _, ref := range refs {
		out = append(out, s.branchSummary(rp, ref))
	}
	start, end := paginate(w, r, len(out))
	writeJSON(w, http.StatusOK, out[start:end])
}

func (s *Server) handleGetBranch(w http.ResponseWriter, r *http.Request, rp *repo) {
	name := r.PathValue("branch")
	h, ok := rp.refHash(plumbing.NewBranchReferenceName(name))
	if !ok {
		writeError(w, r, http.StatusNotFound, "Branch not found")
		return
	}
	c, err := object.GetCommit(rp.storer(), h)
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	commit, err := s.repoCommitJSON(rp, c, false)
	if err != nil {
		writeError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"name":   name,
		"commit": commit,
		"_links": map[string]string{
			"self": s.apiURL("repos/%s/branches/%s", rp.fullName(), name),
			"html": s.htmlURL("%s/tree/%s", rp.fullName(), name),
		},
		"protected":      false,
		"protection":     map[string]any{"enabled": false, "required_status_checks": map[string]any{"enforcement_level": "off", "contexts": []string{}, "checks": []string{}}},
		"protection_url": s.apiURL("repos/%s/branches/%s/protection", rp.fullName(), name),
	})
}
