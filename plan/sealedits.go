package plan

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kukie/kukie-gitops/store/sealed"
)

// EditSealer is the store's payload codec for plans (store.DB.SealPlanPayloads). A
// payload carries the edited files' old and new contents, needed to commit on
// resume and to revert: that is repository content, Secret manifests and
// kustomize generator inputs included. The repository keeps those bytes; the
// database must not keep a second copy in clear, so the edits are sealed with the
// service's encryption key, bound to their plan. Everything else in a payload (the
// masked diffs, warnings, reasons) stays readable.
type EditSealer struct {
	Box *sealed.Box
}

// Keys of the edits in a payload document, in clear and sealed.
const (
	editsKey       = "edits"
	sealedEditsKey = "sealed_edits"
)

func editsAssociatedData(code string) []byte { return []byte("plan-edits:" + code) }

// SealPayload implements store.PayloadCodec.
func (s EditSealer) SealPayload(code string, payload []byte) ([]byte, error) {
	doc, err := payloadDocument(payload)
	if err != nil || doc == nil {
		return payload, err
	}
	edits, ok := doc[editsKey]
	if !ok {
		return payload, nil
	}
	text, err := s.Box.Seal(edits, editsAssociatedData(code))
	if err != nil {
		return nil, fmt.Errorf("seal the edited files: %w", err)
	}
	delete(doc, editsKey)
	if doc[sealedEditsKey], err = json.Marshal(text); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

// OpenPayload implements store.PayloadCodec. A payload stored before sealing was
// configured has its edits in clear and is returned as it is.
func (s EditSealer) OpenPayload(code string, stored []byte) ([]byte, error) {
	doc, err := payloadDocument(stored)
	if err != nil || doc == nil {
		return stored, err
	}
	raw, ok := doc[sealedEditsKey]
	if !ok {
		return stored, nil
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		return nil, fmt.Errorf("read the sealed edited files: %w", err)
	}
	edits, err := s.Box.Open(text, editsAssociatedData(code))
	if err != nil {
		return nil, fmt.Errorf("open the sealed edited files: %w", err)
	}
	if !json.Valid(edits) {
		return nil, errors.New("open the sealed edited files: not a JSON document")
	}
	delete(doc, sealedEditsKey)
	doc[editsKey] = edits
	return json.Marshal(doc)
}

// payloadDocument splits a payload into its top-level fields; an empty payload
// is nil.
func payloadDocument(payload []byte) (map[string]json.RawMessage, error) {
	if len(payload) == 0 {
		return nil, nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(payload, &doc); err != nil {
		return nil, fmt.Errorf("read payload: %w", err)
	}
	return doc, nil
}
