package main

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/spamd/spamd/config"
	"github.com/spamd/spamd/filter"
)

// keys lists every key of the configuration by table, walking its type
// as the TOML decoder does.
func keys(table string, t reflect.Type, into map[string][]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		switch {
		case f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[config.Duration]():
			keys(join(table, name), f.Type, into)
		case f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct:
			keys(join(table, name)+".NAME", f.Type.Elem(), into)
		case table != "":
			into[table] = append(into[table], name)
		}
	}
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// TestPage checks that spamd.conf(5) describes every key of every table,
// the filter's settings, and says what each means and its default.
func TestPage(t *testing.T) {
	src, err := os.ReadFile("../../../config/config.go")
	if err != nil {
		t.Fatal(err)
	}
	p, err := page(src, "2026-01-02")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := p.Man(&b); err != nil {
		t.Fatal(err)
	}
	man := strings.ReplaceAll(b.String(), `\-`, "-")
	want := map[string][]string{}
	keys("", reflect.TypeFor[config.Config](), want)
	want["filter"] = filter.Keys()
	for table, ks := range want {
		_, part, ok := strings.Cut(man, ".SS ["+table+"]\n")
		if !ok {
			t.Errorf("no [%s]", table)
			continue
		}
		part, _, _ = strings.Cut(part, ".SS ")
		for _, k := range ks {
			if !strings.Contains(part, `\fB`+k+`\fR`) {
				t.Errorf("[%s] does not describe %s", table, k)
			}
		}
	}
	for _, s := range []string{
		`.TH SPAMD.CONF 5 "2026-01-02"`,
		"\\fBlisten\\fR \\fIstring\\fR = \"tcp://127.0.0.1:11332\"\nWhere the milter listens",
		"\\fBread_timeout\\fR \\fIduration\\fR = \"5m\"",
		"\\fBcache_mb\\fR \\fIinteger\\fR = 64\ncache_mb bounds",
		"\\fBalpha\\fR \\fIsetting\\fR = 0.01",
	} {
		if !strings.Contains(man, s) {
			t.Errorf("the page lacks %q", s)
		}
	}
}

// TestUndocumented checks that a key without documentation stops the
// page from being written, rather than being left out.
func TestUndocumented(t *testing.T) {
	src, err := os.ReadFile("../../../config/config.go")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(src), "\t// Listen is where the milter listens: \"tcp://HOST:PORT\" or\n\t// \"unix:/PATH\".\n", "", 1)
	if bad == string(src) {
		t.Fatal("the source changed: update the test")
	}
	if _, err := page([]byte(bad), ""); err == nil || !strings.Contains(err.Error(), "milter.listen") {
		t.Errorf("an undocumented key: %v", err)
	}
}
