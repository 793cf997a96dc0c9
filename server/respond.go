package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/kukie/kukie-gitops/ratelimit"
)

// ErrorBody is the JSON shape of every error answer.
type ErrorBody struct {
	// Error is a stable, machine-readable code such as "invalid_token".
	Error string `json:"error"`
	// Reason says in words what went wrong and, where possible, what to do.
	Reason string `json:"reason"`
}

// WriteError answers with status and {"error": code, "reason": reason}.
func WriteError(w http.ResponseWriter, status int, code, reason string) {
	WriteJSON(w, status, ErrorBody{Error: code, Reason: reason})
}

// CodeRateLimited answers a caller over one of its rate limits (429).
const CodeRateLimited = "rate_limited"

// WriteRateLimited answers a refusal of a rate limit: 429 rate_limited, with
// Retry-After in seconds, so a client can wait exactly as long as needed.
func WriteRateLimited(w http.ResponseWriter, refused *ratelimit.RefusedError) {
	w.Header().Set("Retry-After", strconv.Itoa(refused.RetryAfterSeconds()))
	WriteError(w, http.StatusTooManyRequests, CodeRateLimited, refused.Error())
}

// WriteJSON answers with status and v encoded as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":"internal","reason":"cannot encode the response"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// DecodeJSON reads the request body into v, rejecting unknown fields, a member
// given twice in one object, a member naming a field in another case and trailing
// data. On failure it has already answered
// (400 invalid_json, invalid_request for a field given a value of the wrong
// type, or 413) and returns false.
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	// The body is read whole, up to its limit, whatever it holds: a body past the
	// limit is too large, not a request with data after its value.
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = DecodeStrict(body, v)
	}
	return answerDecode(w, err)
}

// DecodeOptionalJSON is DecodeJSON for a route whose body may be left out: a body of
// nothing but white space, however it is sent (a Content-Length of 0 or an empty
// chunked body), leaves v as it is and reports true.
func DecodeOptionalJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(r.Body)
	if err == nil && len(bytes.TrimSpace(body)) == 0 {
		return true
	}
	if err == nil {
		err = DecodeStrict(body, v)
	}
	return answerDecode(w, err)
}

// answerDecode answers err of reading a body, if any (400 or 413), and reports
// whether there was none.
func answerDecode(w http.ResponseWriter, err error) bool {
	if err == nil {
		return true
	}
	status, code, reason := DecodeRefusal(err)
	WriteError(w, status, code, reason)
	return false
}

// DecodeRefusal is the answer to err of DecodeJSON or DecodeStrict: its status,
// code and reason, for whoever answers a refused body in other than HTTP (the
// MCP tools answer their arguments so).
func DecodeRefusal(err error) (status int, code, reason string) {
	var tooLarge *http.MaxBytesError
	var wrongType *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("request body is larger than %d bytes", tooLarge.Limit)
	case errors.Is(err, io.EOF):
		return http.StatusBadRequest, "invalid_json", "request body is empty; a JSON object is required"
	case errors.As(err, &wrongType) && wrongType.Field != "":
		// Valid JSON whose field the route takes holds a value of the wrong type
		// ("count": "4", an env variable's 8080): the request is invalid, as a
		// value out of range is, not its JSON. A body of the wrong type whole
		// (a string for an object) is no request at all, and stays invalid_json.
		return http.StatusBadRequest, "invalid_request", "request body is not valid: " + wrongTypeText(err, wrongType)
	case errors.As(err, &wrongType):
		return http.StatusBadRequest, "invalid_json", "request body is not valid: " + wrongTypeText(err, wrongType)
	default:
		return http.StatusBadRequest, "invalid_json", "request body is not valid: " + err.Error()
	}
}

// wrongTypeText says which field of a body holds a value of the wrong type and
// what the field takes, in the terms of the body's JSON ("change.replicas.count:
// must be a whole number, got string"). encoding/json's words name Go types
// ("cannot unmarshal string into Go struct field Replicas.change.replicas.count of
// type int64"), which a client cannot act on and which differ between two callers
// decoding one field into types of other names (a route's body and a tool's
// arguments). A body of the wrong type whole is said so ("must be an object, got
// array"). An error of a type's own decoding (an env variable's value) keeps its
// words, which name the field already.
func wrongTypeText(err error, wrongType *json.UnmarshalTypeError) string {
	if err != error(wrongType) {
		return err.Error()
	}
	got := wrongType.Value
	if got == "bool" {
		got = "boolean"
	}
	if wrongType.Field == "" {
		// The body whole ("must be an object, got array").
		return fmt.Sprintf("must be %s, got %s", jsonKind(wrongType.Type), got)
	}
	return fmt.Sprintf("%s: must be %s, got %s", wrongType.Field, jsonKind(wrongType.Type), got)
}

// jsonKind is what JSON value decodes into a Go type, as a refusal says it.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.String {
			return "a list of strings"
		}
		return "a list"
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return "an object of strings"
		}
		return "an object"
	}
	return "an object"
}

// DecodeStrict is DecodeJSON's decoding of a body already read: unknown fields,
// a member given twice in one object, a member naming a field in another case and
// trailing data are refused.
func DecodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, extra := dec.Token(); extra != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	if err := CheckJSONText(body); err != nil {
		return err
	}
	return checkMemberCase(body, reflect.TypeOf(v))
}

// CheckJSONText refuses what encoding/json takes from a JSON text without a word:
// a member given twice in one object (it keeps the last; whatever else reads the
// body, a proxy's log, a reviewer, a policy in front, may take the first, so a body
// that says two things is refused rather than read as one of them), and a string
// holding a NUL character (no field of the service takes one, and PostgreSQL
// stores none, so it would fail as an internal error). The error names the
// member by its JSON pointer. A text that is not JSON is left to its decoder.
func CheckJSONText(data []byte) error {
	problem, pointer := jsonTextProblem(data)
	switch problem {
	case duplicateMember:
		return fmt.Errorf("member %q is given twice; give each member of an object once", pointer)
	case nulCharacter:
		return fmt.Errorf("the string at %q holds a NUL character (\\u0000), which no field takes", pointer)
	}
	return nil
}

type textProblem int

const (
	noProblem textProblem = iota
	duplicateMember
	nulCharacter
)

// jsonTextProblem finds the first member name one object of data holds twice, or
// the first string (a value or a name) holding a NUL character, and returns its
// JSON pointer ("/change/env/set/A", "/items/1/name").
func jsonTextProblem(data []byte) (textProblem, string) {
	type level struct {
		object  bool
		names   map[string]bool
		nameDue bool // an object's next token is a member name
		path    string
		member  string // the current member of an object
		index   int    // the next item of an array
	}
	var stack []*level
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return noProblem, ""
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.object && top.nameDue {
			name, _ := tok.(string)
			if strings.ContainsRune(name, 0) {
				return nulCharacter, joinMember(top.path, name)
			}
			if top.names[name] {
				return duplicateMember, joinMember(top.path, name)
			}
			top.names[name], top.member, top.nameDue = true, name, false
			continue
		}
		// tok starts a value: a scalar, or an object or array whose tokens follow.
		path := ""
		switch {
		case top != nil && top.object:
			path, top.nameDue = joinMember(top.path, top.member), true
		case top != nil:
			path = top.path + "/" + strconv.Itoa(top.index)
			top.index++
		}
		if text, ok := tok.(string); ok && strings.ContainsRune(text, 0) {
			return nulCharacter, path
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{object: true, names: map[string]bool{}, nameDue: true, path: path})
		case json.Delim('['):
			stack = append(stack, &level{path: path})
		}
	}
}

// pointerEscape writes a member name as RFC 6901 does in a pointer.
var pointerEscape = strings.NewReplacer("~", "~0", "/", "~1")

func joinMember(path, name string) string {
	return path + "/" + pointerEscape.Replace(name)
}
