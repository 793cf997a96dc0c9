package sealed

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpenRoundTripAndBinding(t *testing.T) {
	box, err := New(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte("apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user: {token: hunter2}\n")
	ad := []byte("cluster:team-a/prod")
	s, err := box.Seal(plain, ad)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s, "hunter2") || !strings.HasPrefix(s, "v1:") {
		t.Fatalf("sealed value %q leaks the clear text or lacks the version", s)
	}
	again, _ := box.Seal(plain, ad)
	if again == s {
		t.Error("two seals of one value are equal: nonce reused")
	}
	got, err := box.Open(s, ad)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain) {
		t.Errorf("Open = %q, want %q", got, plain)
	}

	other, _ := New(newKey(t))
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "v1:"))
	raw[len(raw)-1] ^= 1
	tampered := "v1:" + base64.StdEncoding.EncodeToString(raw)
	cases := map[string]struct {
		box    *Box
		sealed string
		ad     []byte
	}{
		"other record": {box: box, sealed: s, ad: []byte("cluster:team-b/prod")},
		"other key":    {box: other, sealed: s, ad: ad},
		"tampered":     {box: box, sealed: tampered, ad: ad},
		"no version":   {box: box, sealed: strings.TrimPrefix(s, "v1:"), ad: ad},
		"truncated":    {box: box, sealed: "v1:AAAA", ad: ad},
		"not base64":   {box: box, sealed: "v1:***", ad: ad},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := tc.box.Open(tc.sealed, tc.ad); err == nil {
				t.Error("Open succeeded, want an error")
			}
		})
	}
}

func TestBoxWithoutKeyRefuses(t *testing.T) {
	box := &Box{}
	if box.HasKey() {
		t.Fatal("HasKey() = true without a key")
	}
	if _, err := box.Seal([]byte("x"), nil); !errors.Is(err, ErrNoKey) {
		t.Errorf("Seal error = %v, want ErrNoKey", err)
	}
	if _, err := box.Open("v1:AAAA", nil); !errors.Is(err, ErrNoKey) {
		t.Errorf("Open error = %v, want ErrNoKey", err)
	}
}
