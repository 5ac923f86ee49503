package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Changed lists the keys whose values differ between a and b, by their
// dotted names in the document ("milter.explain", "filter.alpha"), in
// order. It names keys, never values, so that it may be logged without
// a password in it.
func Changed(a, b Config) []string {
	fa, fb := map[string]string{}, map[string]string{}
	flatten(fa, "", reflect.ValueOf(a))
	flatten(fb, "", reflect.ValueOf(b))
	var out []string
	for _, k := range slices.Sorted(maps.Keys(fa)) {
		if v, ok := fb[k]; !ok || v != fa[k] {
			out = append(out, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fb)) {
		if _, ok := fa[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// flatten records every leaf of v under its dotted key: struct fields by
// their toml names (Config.Filter as "filter"), map entries by their
// keys, anything else formatted.
func flatten(into map[string]string, key string, v reflect.Value) {
	join := func(k string) string {
		if strings.ContainsAny(k, ". \"") {
			k = fmt.Sprintf("%q", k)
		}
		if key == "" {
			return k
		}
		return key + "." + k
	}
	switch v.Kind() {
	case reflect.Struct:
		if _, ok := v.Interface().(fmt.Stringer); ok {
			into[key] = fmt.Sprint(v.Interface())
			return
		}
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			switch {
			case f.Name == "Filter" && t == reflect.TypeOf(Config{}):
				name = "filter"
			case name == "" || name == "-":
				continue
			}
			flatten(into, join(name), v.Field(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			flatten(into, join(fmt.Sprint(k.Interface())), v.MapIndex(k))
		}
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		flatten(into, key, v.Elem())
	default:
		into[key] = fmt.Sprint(v.Interface())
	}
}
