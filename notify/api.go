package notify

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
)

// SecretPrefix starts every endpoint secret, so a leaked one is recognisable.
const SecretPrefix = "kwh_"

const maxURLLength = 2048

// maxDescriptionChars bounds an endpoint's description, in characters (not bytes:
// a description in another script than Latin takes two to four bytes a character).
const maxDescriptionChars = 200

// API serves a team's notification endpoints.
type API struct {
	Store *store.DB
	// Credentials seals endpoint secrets; without a key, registration is refused.
	Credentials *sealed.Box
	// AllowHTTP accepts http:// endpoints (the dev profile); otherwise only https://.
	AllowHTTP bool
	// AllowPrivateNetworks accepts URLs naming loopback, private or link-local
	// addresses; the Worker must allow them too.
	AllowPrivateNetworks bool
}

// Routes are the routes Mount adds, each with the token scope it needs (the change
// API's OpenAPI test checks the document against them). Administering where the
// team's events go needs the admin scope, and so does the delivery log: it shows the
// endpoints' URLs and errors.
var Routes = map[string]store.Scope{
	"POST /api/v1/notifications/endpoints":                store.ScopeAdmin,
	"GET /api/v1/notifications/endpoints":                 store.ScopeAdmin,
	"DELETE /api/v1/notifications/endpoints/{id}":         store.ScopeAdmin,
	"POST /api/v1/notifications/endpoints/{id}/resume":    store.ScopeAdmin,
	"GET /api/v1/notifications/endpoints/{id}/deliveries": store.ScopeAdmin,
}

// Mount adds the routes.
func (a *API) Mount(srv *server.Server) {
	handlers := map[string]http.HandlerFunc{
		"POST /api/v1/notifications/endpoints":                a.create,
		"GET /api/v1/notifications/endpoints":                 a.list,
		"DELETE /api/v1/notifications/endpoints/{id}":         a.remove,
		"POST /api/v1/notifications/endpoints/{id}/resume":    a.resume,
		"GET /api/v1/notifications/endpoints/{id}/deliveries": a.deliveries,
	}
	for pattern, h := range handlers {
		srv.HandleFunc(pattern, h, server.TeamAuth(Routes[pattern]))
	}
}

// associatedData binds a sealed secret to its team and URL, so a sealed secret
// copied onto another row does not open there.
func associatedData(teamID, u string) []byte {
	return []byte("notification-endpoint:" + teamID + ":" + u)
}

// EndpointRequest is the body of POST /api/v1/notifications/endpoints.
type EndpointRequest struct {
	URL         string `json:"url"`
	Description string `json:"description"`
}

// EndpointCreated is the answer to a registration: the only time the secret is shown.
type EndpointCreated struct {
	store.NotificationEndpoint
	Secret string `json:"secret"`
}

func team(r *http.Request) store.Team {
	t, _ := server.TeamFrom(r.Context())
	return t
}

// checkURL explains what is wrong with an endpoint URL, or returns nil.
func (a *API) checkURL(raw string) error {
	if len(raw) > maxURLLength {
		return fmt.Errorf("url is longer than %d characters", maxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("url does not parse: %v", err)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && a.AllowHTTP:
	case u.Scheme == "http":
		return errors.New("url must be https:// (http:// is accepted in the dev profile only): deliveries carry change details and their signatures")
	default:
		return fmt.Errorf("url must be https://, not %q", u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return errors.New("url has no host")
	}
	if p := u.Port(); p != "" {
		// url.Parse takes any digits; a port past 65535 would fail every delivery.
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("url port %s is not a port (1 to 65535)", p)
		}
	}
	if !a.AllowPrivateNetworks {
		if err := checkHost(u.Hostname()); err != nil {
			return err
		}
	}
	if u.User != nil {
		return errors.New("url must not carry credentials; deliveries are authenticated by their signature")
	}
	if u.Fragment != "" {
		return errors.New("url must not have a fragment")
	}
	return nil
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	var req EndpointRequest
	if !server.DecodeJSON(w, r, &req) {
		return
	}
	if err := a.checkURL(req.URL); err != nil {
		server.WriteError(w, http.StatusBadRequest, "invalid_endpoint", err.Error())
		return
	}
	if n := utf8.RuneCountInString(req.Description); n > maxDescriptionChars {
		server.WriteError(w, http.StatusBadRequest, "invalid_endpoint", fmt.Sprintf("description is %d characters long, at most %d are taken", n, maxDescriptionChars))
		return
	}
	if !a.Credentials.HasKey() {
		server.WriteError(w, http.StatusServiceUnavailable, "credentials_key_missing",
			"no encryption key for stored credentials is configured, so an endpoint secret cannot be stored; set encryption.key_file")
		return
	}
	t := team(r)
	clear, err := newSecret()
	if err != nil {
		internalError(w, r, err)
		return
	}
	sealedSecret, err := a.Credentials.Seal([]byte(clear.Reveal()), associatedData(t.ID, req.URL))
	if err != nil {
		internalError(w, r, err)
		return
	}
	ep, err := a.Store.CreateNotificationEndpoint(r.Context(), store.NotificationEndpoint{TeamID: t.ID, URL: req.URL, Description: req.Description, SealedSecret: sealedSecret})
	if err != nil {
		internalError(w, r, err)
		return
	}
	// The secret is shown this once: no cache on the way may keep it.
	w.Header().Set("Cache-Control", "no-store")
	server.WriteJSON(w, http.StatusCreated, EndpointCreated{NotificationEndpoint: ep, Secret: clear.Reveal()})
}

func newSecret() (secret.Secret, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate endpoint secret: %w", err)
	}
	return secret.New(SecretPrefix + base64.RawURLEncoding.EncodeToString(b)), nil
}

// EndpointList is the answer of GET /api/v1/notifications/endpoints.
type EndpointList struct {
	Endpoints []store.NotificationEndpoint `json:"endpoints"`
}

// failed answers err, if there is one: 404 for an endpoint the team does not have,
// 500 for anything else.
func failed(w http.ResponseWriter, r *http.Request, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, store.ErrNotFound):
		notFound(w)
	default:
		internalError(w, r, err)
	}
	return true
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	eps, err := a.Store.ListNotificationEndpoints(r.Context(), team(r).ID)
	if failed(w, r, err) {
		return
	}
	if eps == nil {
		eps = []store.NotificationEndpoint{}
	}
	server.WriteJSON(w, http.StatusOK, EndpointList{Endpoints: eps})
}

func (a *API) remove(w http.ResponseWriter, r *http.Request) {
	if failed(w, r, a.Store.DeleteNotificationEndpoint(r.Context(), team(r).ID, r.PathValue("id"))) {
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) resume(w http.ResponseWriter, r *http.Request) {
	ep, err := a.Store.ResumeNotificationEndpoint(r.Context(), team(r).ID, r.PathValue("id"))
	if failed(w, r, err) {
		return
	}
	server.WriteJSON(w, http.StatusOK, ep)
}

// DeliveryList is the answer of GET /api/v1/notifications/endpoints/{id}/deliveries.
type DeliveryList struct {
	Deliveries []store.NotificationDelivery `json:"deliveries"`
}

func (a *API) deliveries(w http.ResponseWriter, r *http.Request) {
	t := team(r)
	ep, err := a.Store.NotificationEndpoint(r.Context(), r.PathValue("id"))
	if err == nil && ep.TeamID != t.ID {
		err = store.ErrNotFound
	}
	if failed(w, r, err) {
		return
	}
	limit := 0
	if s := r.URL.Query().Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit <= 0 {
			server.WriteError(w, http.StatusBadRequest, "invalid_request", "limit must be a positive number")
			return
		}
	}
	ds, err := a.Store.ListNotificationDeliveries(r.Context(), t.ID, ep.ID, limit)
	if failed(w, r, err) {
		return
	}
	if ds == nil {
		ds = []store.NotificationDelivery{}
	}
	server.WriteJSON(w, http.StatusOK, DeliveryList{Deliveries: ds})
}

func notFound(w http.ResponseWriter) {
	server.WriteError(w, http.StatusNotFound, "not_found", "your team has no notification endpoint with this id")
}

func internalError(w http.ResponseWriter, r *http.Request, err error) {
	zerolog.Ctx(r.Context()).Error().Err(err).Msg("Notification endpoint request failed")
	server.WriteError(w, http.StatusInternalServerError, "internal", "the request failed; see the server log for request "+server.RequestID(r.Context()))
}
