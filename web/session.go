package web

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/kukie/kukie-gitops/secret"
)

const (
	// sessionCookie holds the signed-in person: their login and user access token,
	// sealed.
	sessionCookie = "kukie_session"
	// stateCookie binds a sign-in to the browser that started it: the OAuth state
	// it sent to GitHub and the page to return to, sealed.
	stateCookie = "kukie_oauth_state"
	// SessionLifetime is how long a sign-in lasts: GitHub's own lifetime of a GitHub
	// App's user access token, after which the token would be refused anyway.
	SessionLifetime = 8 * time.Hour
	// stateLifetime bounds a sign-in in progress, as GitHub bounds its codes.
	stateLifetime = 10 * time.Minute
	// sessionKeyInfo names what the key derived from the App's client secret is for.
	sessionKeyInfo = "kukie-gitops web session v1"
)

// SessionKey derives the key that seals the page's cookies from the App's client
// secret. Every replica of the service derives the same key, so a sign-in started on
// one is finished on another; rotating the secret signs everyone out.
func SessionKey(clientSecret secret.Secret) ([]byte, error) {
	if !clientSecret.IsSet() {
		return nil, errors.New("derive the session key: the app's client secret is not set")
	}
	key, err := hkdf.Key(sha256.New, []byte(clientSecret.Reveal()), nil, sessionKeyInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("derive the session key: %w", err)
	}
	return key, nil
}

// session is the signed-in person.
type session struct {
	Login string `json:"login"`
	// Token is their user access token; it only ever leaves the cookie for GitHub.
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
}

// signIn is a sign-in in progress.
type signIn struct {
	State    string    `json:"state"`
	ReturnTo string    `json:"return_to"`
	Expires  time.Time `json:"expires"`
}

// sealer seals cookie values with AES-GCM: a value cannot be read (the token) or
// forged or altered (the login, the expiry) without the key, and the cookie's name is
// sealed in too, so a state cookie cannot pass for a session.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (sealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return sealer{}, fmt.Errorf("session key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return sealer{}, fmt.Errorf("session key: %w", err)
	}
	return sealer{aead: aead}, nil
}

func (s sealer) seal(name string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("seal %s: %w", name, err)
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal %s: %w", name, err)
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(name))), nil
}

// open reads the value of the cookie name, sealed as name, into v; false when it is
// altered or sealed with another key.
func (s sealer) open(value, name string, v any) bool {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return false
	}
	plain, err := s.aead.Open(nil, raw[:s.aead.NonceSize()], raw[s.aead.NonceSize():], []byte(name))
	if err != nil {
		return false
	}
	return json.Unmarshal(plain, v) == nil
}

// cookie is a cookie of the pages: HttpOnly, SameSite=Lax (GitHub's redirect back is
// a top-level navigation, which Lax lets through; a cross-site POST or fetch does not
// carry it), Secure when the service is served over https.
func (p *Pages) cookie(name, value string, expires time.Time) *http.Cookie {
	c := &http.Cookie{Name: p.cookieName(name), Value: value, Path: "/", HttpOnly: true, Secure: p.secure,
		SameSite: http.SameSiteLaxMode, Expires: expires}
	if value == "" {
		c.MaxAge = -1
	}
	return c
}

// cookieName is the name the cookie name is sent under. Over https it has the
// __Host- prefix, whose cookies browsers take only from this host itself (Secure,
// Path=/, no Domain): a page on a sibling subdomain can set a cookie for the whole
// domain, and could otherwise plant its own sign-in's state or session here, signing
// this browser in as someone else.
func (p *Pages) cookieName(name string) string {
	if p.secure {
		return "__Host-" + name
	}
	return name
}

// open reads the sealed cookie name of r into v; false when it is missing, altered
// or sealed with another key.
func (p *Pages) open(r *http.Request, name string, v any) bool {
	c, err := r.Cookie(p.cookieName(name))
	if err != nil {
		return false
	}
	return p.sealer.open(c.Value, name, v)
}

// randomState is an OAuth state: 32 random bytes.
func randomState() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate oauth state: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
