// Package sealed encrypts credentials the service must keep (cluster kubeconfigs)
// with AES-256-GCM under a key from the environment. A sealed value is bound to the
// record it belongs to (associated data), so a ciphertext copied onto another row
// does not open there.
package sealed

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the length of an AES-256 key.
const KeySize = 32

// prefix versions the format, so the scheme or key can change later without
// guessing what an old value is.
const prefix = "v1:"

// ErrNoKey means no encryption key is configured; nothing can be sealed or opened.
var ErrNoKey = errors.New("no encryption key is configured for stored credentials")

// Box seals and opens values with one key. The zero Box has no key and refuses both
// with ErrNoKey, which is what a dev run without a configured key gets.
type Box struct {
	aead cipher.AEAD
}

// New returns a Box for key (KeySize bytes).
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("encryption key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("create cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("create cipher: %w", err)
	}
	return &Box{aead: aead}, nil
}

// HasKey reports whether the Box can seal and open.
func (b *Box) HasKey() bool { return b != nil && b.aead != nil }

// Seal encrypts plaintext bound to associated (for example "cluster:<team>/<name>")
// and returns printable text for storage.
func (b *Box) Seal(plaintext, associated []byte) (string, error) {
	if !b.HasKey() {
		return "", ErrNoKey
	}
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	out := b.aead.Seal(nonce, nonce, plaintext, associated)
	return prefix + base64.StdEncoding.EncodeToString(out), nil
}

// Open decrypts a value made by Seal with the same associated data.
func (b *Box) Open(sealed string, associated []byte) ([]byte, error) {
	if !b.HasKey() {
		return nil, ErrNoKey
	}
	body, ok := strings.CutPrefix(sealed, prefix)
	if !ok {
		return nil, errors.New("open sealed value: unknown format")
	}
	raw, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return nil, fmt.Errorf("open sealed value: %w", err)
	}
	n := b.aead.NonceSize()
	if len(raw) < n+b.aead.Overhead() {
		return nil, errors.New("open sealed value: too short")
	}
	plain, err := b.aead.Open(nil, raw[:n], raw[n:], associated)
	if err != nil {
		// The wrong key, a tampered value or a value of another record all end here.
		return nil, errors.New("open sealed value: authentication failed (wrong key, or the value was altered or belongs to another record)")
	}
	return plain, nil
}
