// Command confpage writes spamd.conf(5), the manual page of spamd's
// configuration file, from the configuration's struct documentation
// (config/config.go), its defaults and the filter's settings. make runs
// it:
//
//	go run ./internal/gendoc/confpage -src config/config.go > spamd.conf.5
package main

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/internal/gendoc"
	"github.com/spamd/spamd/internal/version"
)

func main() {
	src := flag.String("src", "config/config.go", "the configuration's Go source, whose doc comments describe the keys")
	date := flag.String("date", "", "the date in the page's header")
	flag.Parse()
	b, err := os.ReadFile(*src)
	if err == nil {
		var p gendoc.Page
		if p, err = page(b, *date); err == nil {
			err = p.Man(os.Stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "confpage:", err)
		os.Exit(1)
	}
}

// page builds spamd.conf(5) from the source of package config.
func page(src []byte, date string) (gendoc.Page, error) {
	docs, err := gendoc.StructDocs(src)
	if err != nil {
		return gendoc.Page{}, err
	}
	def := config.Default(func(string) string { return "" })
	p := gendoc.Page{
		Name: "spamd.conf", Section: 5, Title: "configuration of the spamd spam filter",
		Source: "spamd " + version.Short(), Date: date,
		Synopsis:    []string{config.DefaultPath},
		Description: description,
		Sections:    sections,
	}
	ct := reflect.TypeOf(def)
	dv := reflect.ValueOf(def)
	for i := range ct.NumField() {
		f := ct.Field(i)
		name := tomlName(f)
		if name == "" {
			continue
		}
		tables, err := tablesOf(docs, name, docs["Config."+f.Name], f.Type, dv.Field(i))
		if err != nil {
			return gendoc.Page{}, err
		}
		p.Tables = append(p.Tables, tables...)
	}
	p.Tables = append(p.Tables, filterTable())
	return p, nil
}

// tablesOf describes the table name of struct type t with value v, and
// the tables within it.
func tablesOf(docs map[string]string, name, intro string, t reflect.Type, v reflect.Value) ([]gendoc.Table, error) {
	goNames := map[string]string{}
	for j := range t.NumField() {
		goNames[t.Field(j).Name] = tomlName(t.Field(j))
	}
	tab := gendoc.Table{Name: name, Text: gendoc.KeyText(intro, t.Name(), goNames)}
	var more []gendoc.Table
	for j := range t.NumField() {
		f := t.Field(j)
		key := tomlName(f)
		if key == "" {
			continue
		}
		doc, ok := docs[t.Name()+"."+f.Name]
		if !ok || doc == "" {
			return nil, fmt.Errorf("%s.%s (%s.%s) has no documentation", name, key, t.Name(), f.Name)
		}
		switch {
		case f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[config.Duration]():
			sub, err := tablesOf(docs, name+"."+key, doc, f.Type, field(v, j))
			if err != nil {
				return nil, err
			}
			more = append(more, sub...)
			continue
		case f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct:
			// Each entry's keys default to the next level's: no value.
			sub, err := tablesOf(docs, name+"."+key+".NAME", doc, f.Type.Elem(), reflect.Value{})
			if err != nil {
				return nil, err
			}
			more = append(more, sub...)
			continue
		}
		tab.Keys = append(tab.Keys, gendoc.Key{Name: key, Type: typeName(f.Type), Default: tomlValue(field(v, j)),
			Text: gendoc.KeyText(doc, f.Name, goNames)})
	}
	return append([]gendoc.Table{tab}, more...), nil
}

// field returns field j of v, or no value when v has none.
func field(v reflect.Value, j int) reflect.Value {
	if !v.IsValid() {
		return v
	}
	return v.Field(j)
}

// filterTable describes [filter] by the filter's own settings.
func filterTable() gendoc.Table {
	t := gendoc.Table{Name: "filter", Text: "The filter's settings, as `spamtrain settings` lists them. Keys that shape tokens " +
		"must stay as the store was trained: untraining subtracts what a message makes now."}
	c := filter.DefaultConfig()
	for _, k := range filter.Keys() {
		v, _ := c.Get(k)
		if _, err := strconv.ParseFloat(v, 64); err != nil && v != "true" && v != "false" {
			v = strconv.Quote(v)
		}
		t.Keys = append(t.Keys, gendoc.Key{Name: k, Type: "setting", Default: v, Text: upper(filter.Doc(k)) + "."})
	}
	return t
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// tomlName is the key of a struct field, "" for one the document does
// not set.
func tomlName(f reflect.StructField) string {
	n, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if n == "-" || !f.IsExported() {
		return ""
	}
	return n
}

// typeName names a key's kind of value.
func typeName(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[config.Duration]():
		return "duration"
	case t.Kind() == reflect.Pointer:
		return typeName(t.Elem())
	case t.Kind() == reflect.Slice:
		return "list of " + typeName(t.Elem())
	case t.Kind() == reflect.Bool:
		return "boolean"
	case t.Kind() == reflect.Float64:
		return "number"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "integer"
	case t.Kind() == reflect.String:
		return "string"
	}
	return "string" // netip.Prefix and the like, written as text
}

// tomlValue writes a default as TOML would, "" for none worth showing.
func tomlValue(v reflect.Value) string {
	if !v.IsValid() {
		return ""
	}
	switch x := v.Interface().(type) {
	case config.Duration:
		if x.Duration == 0 {
			return ""
		}
		d := x.Duration.String()
		if strings.HasSuffix(d, "m0s") {
			d = strings.TrimSuffix(d, "0s")
		}
		if strings.HasSuffix(d, "h0m") {
			d = strings.TrimSuffix(d, "0m")
		}
		return strconv.Quote(d)
	case time.Duration:
		return strconv.Quote(x.String())
	}
	switch v.Kind() {
	case reflect.String:
		return strconv.Quote(v.String())
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Slice:
		var parts []string
		for i := range v.Len() {
			parts = append(parts, tomlValue(v.Index(i)))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Pointer:
		if v.IsNil() {
			return ""
		}
		return tomlValue(v.Elem())
	}
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return strconv.Quote(s.String())
	}
	return ""
}

const description = `spamd reads its configuration from a TOML file: /etc/spamd/config.toml, or the file given with spamd --config FILE or $SPAMD_CONFIG. Every key is optional; each has the default shown here, and with no file at all spamd runs on the defaults. A key spamd does not know is an error that names it, as is a value out of range, so a typo cannot pass unseen.

Flags override the file: --db sets store.dir, --milter milter.listen, --api api.socket (or api.tcp for a tcp:// address).

Reloading (SIGHUP, systemctl reload spamd, or saving the file) applies [milter] limits and skip rules, [actions], [autolearn], [prefs], [filter] and log.level at once, without dropping connections, and logs the keys that changed; a file that does not load is logged and the running configuration kept. Listening addresses, [store], [api], [reports], [watch], [metrics] and prefs.file take effect on restart.

Durations are written as "30s", "5m" or "1h30m". The annotated config.toml shipped with spamd (installed as /etc/spamd/config.toml.example) shows every key with its default.`

var sections = []gendoc.Section{
	{Title: "Files", Text: `/etc/spamd/config.toml: the configuration.

/etc/spamd/config.toml.example: every key, commented, with its default.

/var/lib/spamd: the store, the report queue and prefs.json, by default.`},
	{Title: "See also", Text: "spamd(8), spamtrain(1)"},
}
