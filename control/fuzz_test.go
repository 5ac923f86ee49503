package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spamd/spamd/filter"
	"github.com/spamd/spamd/reportq"
	"github.com/spamd/spamd/store"
)

// smallMessages returns the sample's smallest messages, for seeds.
func smallMessages(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, class := range []string{"spam", "ham"} {
		dir := filepath.Join("../testdata/sample", class)
		ents, err := os.ReadDir(dir)
		if err != nil {
			tb.Fatal(err)
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err == nil && len(b) < 2000 {
				out = append(out, b)
			}
		}
	}
	return out
}

// decodeAll reads every item of data with a decoder whose values may
// take maxValue bytes.
func decodeAll(data []byte, maxValue int64) ([]Item, error) {
	d := newBatchDecoder(bytes.NewReader(data), maxValue)
	var items []Item
	for {
		it, err := d.Next()
		if err == io.EOF {
			return items, nil
		}
		if err != nil {
			return items, err
		}
		items = append(items, it)
		if len(items) > len(data) {
			return items, errors.New("more items than bytes: the decoder loops")
		}
	}
}

// FuzzBatchDecoder checks the streaming decoder of /v1/train against
// json.Unmarshal: what one accepts the other accepts, item for item,
// but for what the decoder refuses by design (a value over its limit,
// "items" given twice). The first byte of the input chooses the limit.
func FuzzBatchDecoder(f *testing.F) {
	msgs := smallMessages(f)
	for _, seed := range []TrainRequest{
		{},
		{Items: []Item{{Class: "spam", Message: msgs[0]}}},
		{Items: []Item{{Class: "ham", Message: msgs[1]}, {Class: "", Message: msgs[2]}, {Class: "phish", Message: []byte("x")}}},
	} {
		b, _ := json.Marshal(seed)
		f.Add(append([]byte{255}, b...))
	}
	for _, s := range []string{
		`null`, `{}`, `{"items":null}`, `{"ITEMS":[{"CLASS":"spam","MESSAGE":"aGk="}]}`,
		`{"other":[1,{"a":"b"}],"items":[{"class":"spam","message":"aGk=","extra":true}],"more":null}`,
		`{"items":[],"items":[]}`, `{"items":[1]}`, `{"items":[{"message":"!!"}]}`, `{"items":[]} x`, `{"items":[]}{}`,
		`{"items":[{"class":"spam","message":"aGk="}`, `[]`, `"items"`, ` { "items" : [ null , { } ] } `,
		`{"items":[{"class":"\u0073pam","message":null}]}`, `{"iteMſ":[]}`,
	} {
		f.Add(append([]byte{255}, s...))
		f.Add(append([]byte{3}, s...))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		maxValue := 16 + int64(in[0])*16
		data := in[1:]
		got, err := decodeAll(data, maxValue)
		var req TrainRequest
		uerr := json.Unmarshal(data, &req)
		switch {
		case err == nil && uerr != nil:
			t.Fatalf("decoder accepts what json.Unmarshal refuses (%v): %q", uerr, data)
		case err != nil && !errors.Is(err, ErrBatchSyntax) && !errors.Is(err, ErrBatchTooLarge):
			t.Fatalf("error %v wraps neither ErrBatchSyntax nor ErrBatchTooLarge", err)
		case err != nil && uerr == nil:
			if errors.Is(err, ErrBatchTooLarge) || strings.Contains(err.Error(), "given twice") {
				return
			}
			t.Fatalf("decoder refuses (%v) what json.Unmarshal accepts: %q", err, data)
		case err == nil:
			if len(got) != len(req.Items) {
				t.Fatalf("%d items, json.Unmarshal %d: %q", len(got), len(req.Items), data)
			}
			for i := range got {
				if got[i].Class != req.Items[i].Class || !bytes.Equal(got[i].Message, req.Items[i].Message) {
					t.Fatalf("item %d: %+v, json.Unmarshal %+v", i, got[i], req.Items[i])
				}
			}
		}
	})
}

// fuzzServer is an API over a memory store with a real report queue and
// small limits, and its handler.
func fuzzServer(tb testing.TB) http.Handler {
	tb.Helper()
	fl, err := filter.New(store.NewMemory(), filter.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	for i, m := range smallMessages(tb) {
		fl.Learn(ctx, "", m, []string{filter.Spam, filter.Ham}[i%2])
		fl.Learn(ctx, "bob", m, []string{filter.Spam, filter.Ham}[i%2])
	}
	q, err := reportq.Open(tb.(interface{ TempDir() string }).TempDir(), reportq.Options{MaxReports: 50})
	if err != nil {
		tb.Fatal(err)
	}
	srv := NewServer(Options{
		Filter:    func() *filter.Filter { return fl },
		Admins:    []string{"root"},
		Reporters: []string{"daemon"},
		Token:     "s3cret-token-0123456789",
		Enqueue:   q.Enqueue,
		Pending:   q.Len,
		Limits:    Limits{MaxMessage: 64 << 10, MaxBatch: 256 << 10},
		Prefs:     newTestPrefs(tb),
	})
	return srv.Handler()
}

// FuzzRequest sends raw HTTP requests to the API's handler, as peers of
// every kind: root, an account of no privilege ("nobody"), a reporter
// ("daemon"), and a TCP client with or without the token. Whatever the
// request, the API answers with a status it documents, in JSON with an
// error for every failure, and never a panic (500); or the mux answers
// for it, before any endpoint, with one of its own.
func FuzzRequest(f *testing.F) {
	// Short messages: what is fuzzed is the request, and a short input
	// leaves the fuzzer its time for new inputs rather than for
	// minimizing long ones.
	msgs := [][]byte{
		[]byte("From: a@example.org\r\nSubject: win money now\r\n\r\nclick here\r\n"),
		[]byte("Subject: lunch\nFrom: bob@example.org\n\nsee you at noon\n"),
		[]byte("Subject: =?utf-8?q?caf=C3=A9?=\r\nContent-Type: text/html\r\n\r\n<p>hi</p>\r\n"),
		[]byte("From: x@example.net\r\n\r\n"),
	}
	batch, _ := json.Marshal(TrainRequest{Items: []Item{{Class: "spam", Message: msgs[0]}, {Class: "ham", Message: msgs[1]}}})
	req := func(method, target string, body []byte, hdr ...string) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: spamd\r\n", method, target)
		for _, h := range hdr {
			b.WriteString(h + "\r\n")
		}
		if body != nil {
			fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
		}
		b.WriteString("\r\n")
		b.Write(body)
		return b.Bytes()
	}
	for peer := range byte(5) {
		for _, r := range [][]byte{
			req("GET", "/healthz", nil),
			req("GET", "/v1/stats", nil),
			req("POST", "/v1/classify?user=bob&explain=3", msgs[0]),
			req("POST", "/v1/classify?explain=101", msgs[1]),
			req("POST", "/v1/learn?user=bob&class=spam", msgs[2]),
			req("POST", "/v1/learn?class=ham", msgs[3], "Authorization: Bearer s3cret-token-0123456789"),
			req("POST", "/v1/forget?user=nobody", msgs[0]),
			req("POST", "/v1/train?user=bob", batch),
			req("POST", "/v1/train?user=nobody", []byte(`{"items":[{"class":"spam","message":"aGk="}`)),
			req("POST", "/v1/report?user=bob&class=spam&source=imapsieve", msgs[1]),
			req("POST", "/v1/report?user=..%2Fx&class=spam", msgs[1]),
			req("POST", "/v1/classify", append([]byte("\xef\xbb\xbf"), msgs[2]...)),
			req("PUT", "/v1/learn", nil),
			req("POST", "/v1/train", nil, "Transfer-Encoding: chunked"),
			req("OPTIONS", "*", nil),
			req("GET", "/v1/admin/dump?user=bob&user=", nil),
			req("POST", "/v1/admin/restore?user=bob&as=carol", []byte("spamd-dump 1\nuser bob\nclasses spam\nt 0000000000000001 1 0\nend tokens=1 seen=0 messages=0 counts=1\n")),
			req("POST", "/v1/admin/delete-user?user=carol", nil),
			req("POST", "/v1/admin/check", nil),
			req("POST", "/v1/admin/compact", nil),
			req("GET", "/v1/prefs?user=bob", nil),
			req("GET", "/v1/prefs?domain=example.org", nil),
			req("PUT", "/v1/prefs?user=nobody", []byte(`{"required":4.5,"subject_tag":"[SPAM]","deny":["*@x.example"]}`)),
			req("PUT", "/v1/prefs?user=bob&domain=example.org", []byte(`{"action":"reject","reject_score":1e308}`)),
			req("PUT", "/v1/prefs?domain=example.org", []byte(`{"allow":["*@partner.example"]}`)),
		} {
			f.Add(peer, r)
		}
	}
	h := fuzzServer(f)
	f.Fuzz(func(t *testing.T, peerKind byte, raw []byte) {
		r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return
		}
		p := peer{}
		switch peerKind % 5 {
		case 0:
			p = peer{unix: true, uid: 0}
		case 1:
			p = peer{unix: true, uid: 65534}
		case 2:
			p = peer{unix: true, uid: 1} // daemon: a reporter
		case 3:
			r.Header.Set("Authorization", "Bearer s3cret-token-0123456789")
		}
		r = r.WithContext(context.WithValue(context.Background(), peerKey{}, p))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		status := w.Code
		if status == 200 && w.Header().Get("Content-Type") == "text/plain; charset=utf-8" {
			// A dump, streamed.
			if r.URL.Path != "/v1/admin/dump" || !bytes.HasPrefix(w.Body.Bytes(), []byte("spamd-dump 3\n")) {
				t.Fatalf("text for %q: %q", raw, w.Body.Bytes())
			}
			return
		}
		if w.Header().Get("Content-Type") != "application/json" {
			// The mux's own answer, before any endpoint: a path it
			// serves nothing at or redirects to its clean form, a method
			// an endpoint does not take, OPTIONS *.
			if !slices.Contains([]int{301, 307, 308, 400, 404, 405}, status) {
				t.Fatalf("status %d, not in JSON, for %q: %q", status, raw, w.Body.Bytes())
			}
			return
		}
		documented := []int{200, 202, 400, 401, 403, 404, 408, 409, 413, 501, 503}
		if !slices.Contains(documented, status) {
			t.Fatalf("status %d for %q: %s", status, raw, w.Body.Bytes())
		}
		if status == 503 && w.Header().Get("Retry-After") == "" {
			t.Fatalf("503 without Retry-After for %q: %s", raw, w.Body.Bytes())
		}
		var body map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("status %d with a body that is not JSON (%v): %q for %q", status, err, w.Body.Bytes(), raw)
		}
		if status >= 400 {
			if msg, _ := body["error"].(string); msg == "" {
				t.Fatalf("status %d without an error: %s", status, w.Body.Bytes())
			}
		}
	})
}
