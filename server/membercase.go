package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// checkMemberCase refuses a member of data that names a field of t in another
// case ("Cluster" for cluster): encoding/json takes it for the field, so
// {"cluster": "a", "Cluster": "b"} was read as "b" while whatever else reads the
// body (a proxy's log, a policy in front) takes "a", as with a member given twice.
// The fields are those of t's JSON names, through its structs, maps and lists; a
// type with its own decoding is held to its fields' names too, which the ones of
// the service keep. data is valid JSON already decoded into a t.
func checkMemberCase(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	return memberCase(v, t, "")
}

func memberCase(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch x := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Map:
			for k, member := range x {
				if err := memberCase(member, t.Elem(), joinMember(path, k)); err != nil {
					return err
				}
			}
		case reflect.Struct:
			fields := jsonFields(t)
			for k, member := range x {
				if ft, ok := fields[k]; ok {
					if err := memberCase(member, ft, joinMember(path, k)); err != nil {
						return err
					}
					continue
				}
				for name := range fields {
					if strings.EqualFold(name, k) {
						return fmt.Errorf("member %q names the field %q in another case; give it as %q", joinMember(path, k), name, name)
					}
				}
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, item := range x {
				if err := memberCase(item, t.Elem(), fmt.Sprintf("%s/%d", path, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// jsonFields are the fields of struct t by their JSON names, with the fields of
// the structs it embeds without a name.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			for n, et := range jsonFields(ft) {
				if _, shadowed := out[n]; !shadowed {
					out[n] = et
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
