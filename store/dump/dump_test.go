package dump_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/spamd/spamd/bow"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/dump"
	"github.com/spamd/spamd/store/storetest"
)

// trained returns a memory store with models of the global user and of
// alice, relabels and forgets included, their messages with days, marks
// and measures' values if values is set, and alice's oldest seen records
// pruned.
func trained(t *testing.T, values bool) *store.Memory {
	t.Helper()
	st := store.NewMemory()
	for _, user := range []string{"", "alice@example.org"} {
		rng := rand.New(rand.NewPCG(uint64(len(user)), 1))
		var ops []store.Op
		for i := range 30 {
			head, body := map[bow.Hash]uint32{}, map[bow.Hash]uint32{}
			for h, n := range storetest.RandomBag(rng, 20, 400) {
				if h%3 == 0 {
					head[h] = n
				} else {
					body[h] = n
				}
			}
			class := []string{"spam", "ham", "news"}[i%3]
			op := storetest.TrainSteps(fmt.Sprint(user, i), class, head, body,
				store.Step{Class: "spam", Head: rng.Int64N(2000) - 1000, Body: -rng.Int64N(1000)},
				store.Step{Class: "ham", Head: rng.Int64N(2000) - 1000})
			if values {
				op.Day, op.Mark = store.Day(20000+i), rng.Uint64()
				for m := range uint8(11) {
					if rng.IntN(4) > 0 {
						op.Values = append(op.Values, store.Value{Measure: m, Level: uint16(rng.IntN(store.MaxLevels))})
					}
				}
			}
			ops = append(ops, op)
		}
		relabel := ops[4]
		relabel.Class = "spam"
		forget := ops[5]
		forget.Class = ""
		if _, err := st.Apply(context.Background(), user, append(ops, relabel, forget)); err != nil {
			t.Fatal(err)
		}
		if values && user != "" {
			if _, err := st.Prune(context.Background(), user, store.PruneRule{SeenBefore: 20003}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return st
}

// dumpAll dumps every user of st.
func dumpAll(t *testing.T, st store.Store) []byte {
	t.Helper()
	ctx := context.Background()
	users, err := st.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	w := dump.NewWriter(&b)
	for _, u := range users {
		if err := dump.Model(ctx, w, st, u); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// restoreAll restores every section of the dump in data into st.
func restoreAll(ctx context.Context, st store.Store, data io.Reader) error {
	r, err := dump.NewReader(data)
	if err != nil {
		return err
	}
	for {
		user, _, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := st.Restore(ctx, user, r.Record); err != nil {
			return err
		}
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := trained(t, true)
	first := dumpAll(t, src)
	if !bytes.HasPrefix(first, []byte("spamd-dump 3\nuser\nclasses spam ham news\nt ")) || !bytes.Contains(first, []byte(" f10=")) ||
		!bytes.Contains(first, []byte("\nforgotten 1,1,1\n")) || !bytes.Contains(first, []byte(" 2024-10-")) {
		t.Fatalf("dump starts %q", first[:min(len(first), 60)])
	}
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprint("gzip=", gz), func(t *testing.T) {
			in := first
			if gz {
				var b bytes.Buffer
				zw := gzip.NewWriter(&b)
				zw.Write(first)
				zw.Close()
				in = b.Bytes()
			}
			dst := store.NewMemory()
			if err := restoreAll(ctx, dst, bytes.NewReader(in)); err != nil {
				t.Fatal(err)
			}
			if second := dumpAll(t, dst); !bytes.Equal(first, second) {
				t.Errorf("dump → restore → dump differs: %d bytes against %d", len(second), len(first))
			}
			for _, u := range []string{"", "alice@example.org"} {
				if err := dst.Check(ctx, u); err != nil {
					t.Error(err)
				}
				a, _ := src.Totals(ctx, u)
				b, _ := dst.Totals(ctx, u)
				if len(a.Samples) == 0 || fmt.Sprint(a) != fmt.Sprint(b) {
					t.Errorf("%q: totals %v, restored %v", u, b, a)
				}
			}
		})
	}
}

func TestEmpty(t *testing.T) {
	var b bytes.Buffer
	w := dump.NewWriter(&b)
	if err := dump.Model(context.Background(), w, store.NewMemory(), "nobody"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	const want = "spamd-dump 3\nuser nobody\nclasses\nend tokens=0 seen=0 messages= counts= values= levels= forgotten=\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
	r, err := dump.NewReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	user, classes, err := r.Next()
	if err != nil || user != "nobody" || len(classes) != 0 {
		t.Fatalf("Next: %q %q %v", user, classes, err)
	}
	if err := r.Skip(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last section: %v", err)
	}
}

// TestDamaged checks that every kind of damage is refused, and that a
// restore from a damaged dump leaves no model.
func TestDamaged(t *testing.T) {
	good := string(dumpAll(t, trained(t, true)))
	lines := strings.SplitAfter(good, "\n")
	rowLine := lines[3]
	f := strings.Fields(rowLine)
	f[3] += "1"
	edited := strings.Join(f, " ") + "\n"
	var seenLine, editedSeen, cutSeen string
	for _, l := range lines {
		// A level below 100, so that the edit keeps it on the grid.
		if f := strings.Fields(l); len(f) > 0 && f[0] == "s" && strings.Contains(l, " f") && len(f[len(f)-1][strings.Index(f[len(f)-1], "="):]) <= len("=99") {
			seenLine = l
			last := f[len(f)-1]
			editedSeen = strings.TrimSuffix(l, last+"\n") + last + "1\n"
			cutSeen = strings.TrimSuffix(l, " "+last+"\n") + "\n"
			break
		}
	}
	digest := strings.Repeat("ab", 32)
	tests := []struct {
		name string
		dump string
		want string
	}{
		{"empty", "", "empty"},
		{"not a dump", "From a@b Mon Jan 1\n", "starts with"},
		{"later version", "spamd-dump 4\n", "version"},
		{"bad day", "spamd-dump 3\nuser\nclasses spam\nt 0000000000000001 2024-13-01 1 0\n", "not a day"},
		{"bad mark", "spamd-dump 3\nuser\nclasses spam\ns " + strings.Repeat("ab", 32) + " spam 2024-01-01 xyz\n", "mark"},
		{"forgotten of too few classes", "spamd-dump 3\nuser\nclasses spam ham\nforgotten 1\n", "forgotten"},
		{"forgotten left out", strings.Replace(good, "forgotten 1,1,1\n", "", 1), "damaged"},
		{"version 0", "spamd-dump 0\n", "version"},
		{"cut short", strings.Join(lines[:slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "s ") })+1], ""), "cut short"},
		{"cut mid-line", good[:len(good)/2], "line"},
		{"cut before the end line", strings.Join(lines[:len(lines)-2], ""), "cut short"},
		{"a row left out", strings.Replace(good, rowLine, "", 1), "damaged"},
		{"a count edited", strings.Replace(good, rowLine, edited, 1), "damaged"},
		{"bad user", "spamd-dump 1\nuser ../bob\nclasses spam\nend tokens=0 seen=0 messages=0 counts=0\n", "invalid user"},
		{"bad class", "spamd-dump 1\nuser\nclasses Spam\n", "invalid class"},
		{"class twice", "spamd-dump 1\nuser\nclasses spam spam\n", "twice"},
		{"short row", "spamd-dump 1\nuser\nclasses spam ham\nt 0000000000000001 1 0\n", "fields"},
		{"bad hash", "spamd-dump 1\nuser\nclasses spam\nt 00000000000000zz 1 0\n", "token"},
		{"row of zeros", "spamd-dump 1\nuser\nclasses spam\nt 0000000000000001 0 0\n", "zeros"},
		{"negative count", "spamd-dump 1\nuser\nclasses spam\nt 0000000000000001 -1 0\n", "count"},
		{"overflow", "spamd-dump 1\nuser\nclasses spam\nt 0000000000000001 18446744073709551615 0\nt 0000000000000002 1 0\n", "overflow"},
		{"unknown class", "spamd-dump 1\nuser\nclasses spam\ns " + strings.Repeat("ab", 32) + " ham\n", "not one of"},
		{"short digest", "spamd-dump 1\nuser\nclasses spam\ns abab spam\n", "hex digits"},
		{"bad step", "spamd-dump 1\nuser\nclasses spam\ns " + strings.Repeat("ab", 32) + " spam spam x 1\n", "step"},
		{"unknown record", "spamd-dump 1\nuser\nclasses spam\nx 1\n", "no record"},
		{"no user line", "spamd-dump 1\nclasses spam\n", "user line"},
		{"a level edited", strings.Replace(good, seenLine, editedSeen, 1), "damaged"},
		{"a value left out", strings.Replace(good, seenLine, cutSeen, 1), "damaged"},
		{"values in version 1", "spamd-dump 1\nuser\nclasses spam\ns " + digest + " spam f1=2\n", "version 1"},
		{"values out of order", "spamd-dump 2\nuser\nclasses spam\ns " + digest + " spam f2=1 f1=2\n", "ascending"},
		{"a measure off the grid", "spamd-dump 2\nuser\nclasses spam\ns " + digest + " spam f64=1\n", "off the grid"},
		{"a level off the grid", "spamd-dump 2\nuser\nclasses spam\ns " + digest + " spam f1=1024\n", "off the grid"},
		{"a malformed value", "spamd-dump 2\nuser\nclasses spam\ns " + digest + " spam f1=x\n", "value"},
		{"a step after values", "spamd-dump 2\nuser\nclasses spam\ns " + digest + " spam f1=2 spam 1 1\n", "value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := store.NewMemory()
			err := restoreAll(context.Background(), st, strings.NewReader(tt.dump))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error saying %q", err, tt.want)
			}
			if !errors.Is(err, dump.ErrFormat) {
				t.Errorf("%v is not ErrFormat", err)
			}
			// Each section is restored whole or not at all, so what the
			// store holds after the refusal is consistent.
			for _, u := range []string{"", "alice@example.org"} {
				if err := st.Check(context.Background(), u); err != nil {
					t.Errorf("%q after a refused restore: %v", u, err)
				}
			}
		})
	}
}

// TestOlderVersions reads dumps of versions 1 (before measures) and 2
// (before days, marks and forgotten messages): they restore with what
// they have, and a dump of the restored model is the same but for the
// version and the fields added since.
func TestOlderVersions(t *testing.T) {
	ctx := context.Background()
	v3 := string(dumpAll(t, trained(t, false)))
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprint("version ", version), func(t *testing.T) {
			var lines []string
			for _, l := range strings.SplitAfter(v3, "\n") {
				f := strings.Fields(l)
				switch {
				case len(f) == 0:
				case f[0] == "spamd-dump":
					l = fmt.Sprintf("spamd-dump %d\n", version)
				case f[0] == "t":
					l = strings.Join(slices.Delete(f, 2, 3), " ") + "\n"
				case f[0] == "s":
					l = strings.Join(slices.Delete(f, 3, 5), " ") + "\n"
				case f[0] == "end":
					cut := " forgotten="
					if version == 1 {
						cut = " values="
					}
					l = l[:strings.Index(l, cut)] + "\n"
				}
				lines = append(lines, l)
			}
			old := strings.Join(lines, "")
			if strings.Contains(old, "1970-01-01") || strings.Contains(old, "forgotten") {
				t.Fatal("the dump of an older version made has days")
			}
			dst := store.NewMemory()
			if err := restoreAll(ctx, dst, strings.NewReader(old)); err != nil {
				t.Fatal(err)
			}
			if again := string(dumpAll(t, dst)); again != v3 {
				t.Errorf("a restored dump of version %d dumps as\n%.300s\nnot as\n%.300s", version, again, v3)
			}
			for _, u := range []string{"", "alice@example.org"} {
				if err := dst.Check(ctx, u); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func TestWriterRefuses(t *testing.T) {
	w := dump.NewWriter(io.Discard)
	if err := w.Write(store.Record{Class: "spam"}); err == nil {
		t.Error("Write outside a section")
	}
	if err := w.Begin("../x", nil, nil); err == nil {
		t.Error("Begin with an invalid user")
	}
	if err := w.Begin("a", []string{"spam"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(store.Record{Class: "ham"}); err == nil {
		t.Error("a seen record of a class not in the section")
	}
	if err := w.Write(store.Record{Counts: store.Counts{1, 0, 2, 0}}); err == nil {
		t.Error("a row with more classes than the section")
	}
	if err := w.Write(store.Record{Class: "spam", Values: []store.Value{{Measure: 2}, {Measure: 1}}}); err == nil {
		t.Error("values out of order")
	}
	if err := w.Close(); err == nil {
		t.Error("Close inside a section")
	}
}

// FuzzReader checks that no input panics the reader, and that what it
// accepts writes back to a dump it reads the same way.
func FuzzReader(f *testing.F) {
	var good bytes.Buffer
	st := store.NewMemory()
	op := storetest.TrainSteps("m", "spam", map[bow.Hash]uint32{1: 2}, map[bow.Hash]uint32{7: 1}, store.Step{Class: "spam", Head: 5, Body: -3})
	op.Values = []store.Value{{Measure: 0, Level: 300}, {Measure: 7, Level: 12}}
	st.Apply(context.Background(), "u", []store.Op{op})
	w := dump.NewWriter(&good)
	dump.Model(context.Background(), w, st, "u")
	w.Close()
	f.Add(good.Bytes())
	f.Add([]byte("spamd-dump 1\nuser\nclasses spam ham\nend tokens=0 seen=0 messages=0,0 counts=0,0\n"))
	f.Add([]byte("spamd-dump 1\n"))
	f.Add([]byte("spamd-dump 1\nuser\nclasses spam\ns " + strings.Repeat("ab", 32) + " spam spam 1 2\nend tokens=0 seen=1 messages=1 counts=0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		first, ok := readBack(data)
		if !ok {
			return
		}
		second, ok := readBack(first)
		if !ok || !bytes.Equal(first, second) {
			t.Fatalf("accepted %q, wrote %q, which reads back as %q", data, first, second)
		}
	})
}

// readBack reads every section of data and writes what it read as a new
// dump.
func readBack(data []byte) ([]byte, bool) {
	r, err := dump.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, false
	}
	var out bytes.Buffer
	w := dump.NewWriter(&out)
	for {
		user, classes, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, false
		}
		if err := w.Begin(user, classes, nil); err != nil {
			return nil, false
		}
		if _, err := r.Record(); err != nil { // the header
			return nil, false
		}
		for {
			rec, err := r.Record()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, false
			}
			if err := w.Write(rec); err != nil {
				return nil, false
			}
		}
		if err := w.End(); err != nil {
			return nil, false
		}
	}
	if err := w.Close(); err != nil {
		return nil, false
	}
	return out.Bytes(), true
}
