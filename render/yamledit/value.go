package yamledit

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"unicode/utf8"
)

// valueTree turns a caller's Value into a tree: strings stay strings whatever they
// look like, other scalars get the tag their text resolves to.
func valueTree(v any) (*tree, error) {
	switch x := v.(type) {
	case nil:
		return &tree{kind: scalarNode, tag: "!!null"}, nil
	case *tree:
		return x, nil
	case string:
		return stringTree(x, false)
	case Quoted:
		return stringTree(string(x), true)
	case bool:
		return &tree{kind: scalarNode, tag: "!!bool", value: strconv.FormatBool(x)}, nil
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return &tree{kind: scalarNode, tag: "!!int", value: fmt.Sprint(x)}, nil
	case float32:
		return floatTree(float64(x)), nil
	case float64:
		return floatTree(x), nil
	case Mapping:
		t := &tree{kind: mappingNode}
		for _, f := range x {
			if _, dup := t.get(f.Key); dup >= 0 {
				return nil, fmt.Errorf("value has key %q twice: %w", f.Key, ErrAmbiguous)
			}
			fv, err := valueTree(f.Value)
			if err != nil {
				return nil, fmt.Errorf("value of %s: %w", f.Key, err)
			}
			t.set(f.Key, fv)
		}
		return t, nil
	case []any:
		t := &tree{kind: sequenceNode, items: []*tree{}}
		for i, item := range x {
			it, err := valueTree(item)
			if err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
			t.items = append(t.items, it)
		}
		return t, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map value with %s keys: %w", rv.Type().Key(), ErrUnsupported)
		}
		keys := make([]string, 0, rv.Len())
		for _, k := range rv.MapKeys() {
			keys = append(keys, k.String())
		}
		ordered := make(Mapping, 0, len(keys))
		for _, k := range kubernetesKeyOrder(keys) {
			ordered = append(ordered, Field{Key: k, Value: rv.MapIndex(reflect.ValueOf(k).Convert(rv.Type().Key())).Interface()})
		}
		return valueTree(ordered)
	case reflect.Slice, reflect.Array:
		items := make([]any, rv.Len())
		for i := range items {
			items[i] = rv.Index(i).Interface()
		}
		return valueTree(items)
	case reflect.String:
		return stringTree(rv.String(), false)
	}
	return nil, fmt.Errorf("value of type %T: %w", v, ErrUnsupported)
}

func stringTree(s string, quoted bool) (*tree, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("string value is not valid UTF-8: %w", ErrUnsupported)
	}
	return &tree{kind: scalarNode, tag: "!!str", value: s, quoted: quoted}, nil
}

// floatTree writes a float so that it reads back as a float, never as an int.
func floatTree(f float64) *tree {
	var s string
	switch {
	case math.IsInf(f, 1):
		s = ".inf"
	case math.IsInf(f, -1):
		s = "-.inf"
	case math.IsNaN(f):
		s = ".nan"
	default:
		s = strconv.FormatFloat(f, 'g', -1, 64)
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			s += ".0"
		}
	}
	return &tree{kind: scalarNode, tag: "!!float", value: s}
}

// kubernetesKeyOrder puts "name" first, as Kubernetes lists of named items are
// written, and sorts the rest so output does not depend on map order.
func kubernetesKeyOrder(keys []string) []string {
	sort.Strings(keys)
	for i, k := range keys {
		if k == "name" {
			copy(keys[1:i+1], keys[:i])
			keys[0] = "name"
		}
	}
	return keys
}
