package config

import (
	"reflect"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// MarshalZerologObject logs the configuration by its keys (the JSON names of its
// fields), each duration as text ("30s", as the file and environment give it),
// where encoding/json would write nanoseconds: an operator reading the log
// compares it with what they configured. Secrets are logged as their JSON form,
// which masks them.
func (c Config) MarshalZerologObject(e *zerolog.Event) {
	logFields(e, reflect.ValueOf(c))
}

// section is a struct of the configuration logged as an object of its own.
type section reflect.Value

func (s section) MarshalZerologObject(e *zerolog.Event) { logFields(e, reflect.Value(s)) }

var durationType = reflect.TypeFor[time.Duration]()

func logFields(e *zerolog.Event, v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || key == "-" {
			continue
		}
		if key == "" {
			key = f.Name
		}
		value := v.Field(i)
		switch {
		case value.Type() == durationType:
			e.Str(key, time.Duration(value.Int()).String())
		case value.Kind() == reflect.Struct && !implementsJSON(value.Type()):
			e.Object(key, section(value))
		default:
			e.Interface(key, value.Interface())
		}
	}
}

// implementsJSON reports whether t decides its own JSON form (a secret masks
// itself so), which is then logged as it is.
func implementsJSON(t reflect.Type) bool {
	marshaler := reflect.TypeFor[interface{ MarshalJSON() ([]byte, error) }]()
	return t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler)
}
