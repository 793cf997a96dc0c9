package plan_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store/sealed"
)

func testBox(t *testing.T) *sealed.Box {
	t.Helper()
	box, err := sealed.New(bytes.Repeat([]byte{9}, sealed.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return box
}

func TestEditSealerSealsOnlyTheFileContents(t *testing.T) {
	t.Parallel()
	s := plan.EditSealer{Box: testBox(t)}
	pay := plan.Payload{GitDiff: "masked diff", Edits: []plan.StoredEdit{
		{Path: "apps/web/kustomization.yaml", Old: []byte("password=old-Xy7"), New: []byte("password=new-Zq3")},
		{Path: "apps/web/gone.yaml", Old: []byte("bye")},
	}}
	clear, err := json.Marshal(pay)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := s.SealPayload("plan1", clear)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"apps/web/kustomization.yaml", "cGFzc3dvcmQ9", `"edits"`} {
		if strings.Contains(string(stored), leak) {
			t.Errorf("sealed payload shows %q: %s", leak, stored)
		}
	}
	if !strings.Contains(string(stored), `"git_diff":"masked diff"`) {
		t.Errorf("sealing hid the rest of the payload: %s", stored)
	}
	opened, err := s.OpenPayload("plan1", stored)
	if err != nil {
		t.Fatal(err)
	}
	var back plan.Payload
	if err := json.Unmarshal(opened, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Edits) != 2 || string(back.Edits[0].New) != "password=new-Zq3" || back.Edits[1].New != nil || string(back.Edits[1].Old) != "bye" || back.GitDiff != "masked diff" {
		t.Fatalf("opened payload %+v, want the original", back)
	}
	// Sealed edits are bound to their plan: copied onto another, they do not open.
	if _, err := s.OpenPayload("plan2", stored); err == nil {
		t.Error("another plan's sealed edits opened")
	}
	// Payloads stored before sealing was configured read as they are.
	if got, err := s.OpenPayload("plan1", clear); err != nil || !bytes.Equal(got, clear) {
		t.Errorf("clear payload read as %s (%v)", got, err)
	}
	// Without a key nothing is stored in a form that claims to be sealed.
	if _, err := (plan.EditSealer{Box: &sealed.Box{}}).SealPayload("plan1", clear); err == nil {
		t.Error("sealing without a key succeeded")
	}
}
