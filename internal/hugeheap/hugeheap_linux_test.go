package hugeheap

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// thpAvailable reports whether the kernel has transparent huge pages, so
// that advice for them is taken.
func thpAvailable() bool {
	_, err := os.Stat(thpEnabled)
	return err == nil
}

// advisedAt reports whether the mapping holding address a is advised to
// take huge pages: "hg" among its VmFlags in /proc/self/smaps.
func advisedAt(t *testing.T, a uintptr) bool {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") {
			in = lo <= a && a < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.Contains(line, " hg")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("address %#x in no mapping of /proc/self/smaps", a)
	return false
}

// TestAdvise advises arrays of several sizes: only whole huge pages are
// advised, and the mapping that holds them is marked so.
func TestAdvise(t *testing.T) {
	if !thpAvailable() {
		t.Skip("the kernel has no transparent huge pages")
	}
	tests := []struct {
		name     string
		size     int
		min, max int
	}{
		{"empty", 0, 0, 0},
		{"under a huge page", hugePage - 4096, 0, 0},
		{"four huge pages", 4 * hugePage, 3 * hugePage, 4 * hugePage},
		{"eight and a bit", 8*hugePage + 12345, 7 * hugePage, 8 * hugePage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, tt.size)
			got := advise(b)
			if got < tt.min || got > tt.max || got%hugePage != 0 {
				t.Fatalf("advise(%d bytes) = %d, want a multiple of %d in [%d, %d]", tt.size, got, hugePage, tt.min, tt.max)
			}
			if got == 0 {
				return
			}
			start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
			first := (start + hugePage - 1) &^ (hugePage - 1)
			if !advisedAt(t, first) || !advisedAt(t, first+uintptr(got)-1) {
				t.Errorf("advised %d bytes from %#x, but the mapping is not marked", got, first)
			}
		})
	}
}

// TestGrow grows the heap and then allocates from it: the allocation
// lands in memory advised to take huge pages, where one made before Grow
// did not. It runs in a process of its own, whose heap no other test has
// advised.
func TestGrow(t *testing.T) {
	if !advised() {
		mode, _ := os.ReadFile(thpEnabled)
		t.Skipf("transparent huge pages are not in madvise mode here (%s: %q): Grow does nothing", thpEnabled, strings.TrimSpace(string(mode)))
	}
	if os.Getenv("HUGEHEAP_TEST_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGrow$", "-test.v")
		cmd.Env = append(os.Environ(), "HUGEHEAP_TEST_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	const n = 32 << 20
	before := make([]byte, 8<<20)
	if at := middle(before); advisedAt(t, at) {
		t.Fatalf("an allocation before Grow, at %#x, is in advised memory already", at)
	}
	if got := Grow(n); got < n-2*hugePage {
		t.Fatalf("Grow(%d) advised %d bytes, want at least %d", n, got, n-2*hugePage)
	}
	after := make([]byte, 8<<20)
	if at := middle(after); !advisedAt(t, at) {
		t.Errorf("an allocation after Grow, at %#x, is not in advised memory", at)
	}
	runtime.KeepAlive(before)
}

// middle returns the address of b's middle byte.
func middle(b []byte) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b))) + uintptr(len(b))/2
}

// TestGrowOnlyWhereAdvised: Grow advises memory only where the kernel
// gives huge pages to advised memory alone; in the other modes the advice
// would change nothing, and Grow neither allocates nor collects.
func TestGrowOnlyWhereAdvised(t *testing.T) {
	defer func(p string) { thpEnabled = p }(thpEnabled)
	dir := t.TempDir()
	for _, tt := range []struct {
		name, content string
		want          bool
	}{
		{"madvise", "always [madvise] never\n", true},
		{"always", "[always] madvise never\n", false},
		{"never", "always madvise [never]\n", false},
		{"no such file", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			thpEnabled = filepath.Join(dir, tt.name)
			if tt.content != "" {
				if err := os.WriteFile(thpEnabled, []byte(tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if got := advised(); got != tt.want {
				t.Fatalf("advised() with %q = %v, want %v", tt.content, got, tt.want)
			}
			if tt.want {
				return
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			if got := Grow(8 << 20); got != 0 {
				t.Errorf("Grow advised %d bytes, want 0", got)
			}
			runtime.ReadMemStats(&after)
			if after.NumForcedGC != before.NumForcedGC || after.TotalAlloc-before.TotalAlloc >= 8<<20 {
				t.Errorf("Grow collected (%d -> %d) or allocated (%d bytes) where it should do nothing", before.NumForcedGC, after.NumForcedGC, after.TotalAlloc-before.TotalAlloc)
			}
		})
	}
}
