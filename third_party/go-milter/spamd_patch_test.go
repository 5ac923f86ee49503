package milter

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
)

// The tests of spamd's patch (see SPAMD-PATCH.md).

// trickle returns its data one byte per Read and remembers the largest
// buffer it was given to fill.
type trickle struct {
	data    []byte
	largest int
}

func (t *trickle) Read(b []byte) (int, error) {
	if len(b) > t.largest {
		t.largest = len(b)
	}
	if len(t.data) == 0 {
		return 0, io.EOF
	}
	b[0] = t.data[0]
	t.data = t.data[1:]
	return 1, nil
}

func TestReadFullGrowsWithTheData(t *testing.T) {
	for _, n := range []int{0, 1, firstRead - 1, firstRead, firstRead + 1, 3*firstRead + 7, maxPacketSize} {
		want := bytes.Repeat([]byte{'x'}, n)
		got, err := readFull(bytes.NewReader(want), n)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("n=%d: %d bytes, %v", n, len(got), err)
		}
	}
	// A peer that announced 1 MiB and sent 10 bytes made readFull
	// allocate no more than its first buffer.
	tr := &trickle{data: make([]byte, 10)}
	_, err := readFull(tr, maxPacketSize)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("short packet: %v", err)
	}
	if tr.largest > firstRead {
		t.Errorf("a buffer of %d bytes for 10 bytes received", tr.largest)
	}
	// One that sent 100 KiB of its 1 MiB: each buffer at most what had
	// arrived before it.
	tr = &trickle{data: make([]byte, 100<<10)}
	if _, err := readFull(tr, maxPacketSize); err != io.ErrUnexpectedEOF {
		t.Fatalf("short packet: %v", err)
	}
	if tr.largest > 100<<10 {
		t.Errorf("a buffer of %d bytes for 100 KiB received", tr.largest)
	}
	if _, err := readFull(bytes.NewReader(nil), 10); err != io.EOF {
		t.Fatalf("nothing sent: %v", err)
	}
}

// countHeaders is a milter that answers every message, remembering how
// many fields Modifier.Headers held at its end.
type countHeaders struct {
	NoOpMilter
	seen *[]int
}

func (c countHeaders) Body(m *Modifier) (Response, error) {
	n := 0
	for _, v := range m.Headers {
		n += len(v)
	}
	*c.seen = append(*c.seen, n)
	return RespAccept, nil
}

func TestHeadersEndWithTheMessage(t *testing.T) {
	for _, discard := range []bool{false, true} {
		var seen []int
		s := &Server{NewMilter: func() Milter { return countHeaders{seen: &seen} }, DiscardHeaders: discard}
		c1, c2 := net.Pipe()
		done := make(chan struct{})
		go func() { defer close(done); s.ServeConn(c2) }()
		for i := 0; i < 3; i++ {
			for j := 0; j < 2; j++ {
				if err := writePacket(c1, &Message{Code: byte(CodeHeader), Data: []byte("X-A\x00v\x00")}, 0); err != nil {
					t.Fatal(err)
				}
				// The answer to the header.
				if _, err := readPacket(c1, 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := writePacket(c1, &Message{Code: byte(CodeEOB)}, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := readPacket(c1, 0); err != nil {
				t.Fatal(err)
			}
		}
		c1.Close()
		<-done
		want := []int{2, 2, 2}
		if discard {
			want = []int{0, 0, 0}
		}
		if len(seen) != 3 || seen[0] != want[0] || seen[1] != want[1] || seen[2] != want[2] {
			t.Errorf("discard %v: fields at each end %v, want %v", discard, seen, want)
		}
	}
}

func TestPacketLengthStillChecked(t *testing.T) {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, uint32(maxPacketSize+1))
	c1, c2 := net.Pipe()
	go func() { c1.Write(b.Bytes()); c1.Close() }()
	if _, err := readPacket(c2, 0); err == nil {
		t.Fatal("an oversized packet was accepted")
	}
}
