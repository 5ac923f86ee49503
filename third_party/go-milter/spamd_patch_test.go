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
		got, err := readFull(bytes.NewReader(want), n, nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("n=%d: %d bytes, %v", n, len(got), err)
		}
	}
	// A peer that announced 1 MiB and sent 10 bytes made readFull
	// allocate no more than its first buffer.
	tr := &trickle{data: make([]byte, 10)}
	_, err := readFull(tr, maxPacketSize, nil)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("short packet: %v", err)
	}
	if tr.largest > firstRead {
		t.Errorf("a buffer of %d bytes for 10 bytes received", tr.largest)
	}
	// One that sent 100 KiB of its 1 MiB: each buffer at most what had
	// arrived before it.
	tr = &trickle{data: make([]byte, 100<<10)}
	if _, err := readFull(tr, maxPacketSize, nil); err != io.ErrUnexpectedEOF {
		t.Fatalf("short packet: %v", err)
	}
	if tr.largest > 100<<10 {
		t.Errorf("a buffer of %d bytes for 100 KiB received", tr.largest)
	}
	if _, err := readFull(bytes.NewReader(nil), 10, nil); err != io.EOF {
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

func TestReadFullReusesItsBuffer(t *testing.T) {
	buf := make([]byte, 0, 8<<10)
	for _, n := range []int{1, 100, 8 << 10} {
		want := bytes.Repeat([]byte{byte(n)}, n)
		got, err := readFull(bytes.NewReader(want), n, buf)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("n=%d: %d bytes, %v", n, len(got), err)
		}
		if &got[:1][0] != &buf[:1][0] {
			t.Errorf("n=%d: read into new memory with room for it", n)
		}
	}
	// Past the buffer's room, it grows as the data arrives, from what
	// it has.
	tr := &trickle{data: make([]byte, 20<<10)}
	got, err := readFull(tr, maxPacketSize, buf)
	if err != io.ErrUnexpectedEOF || len(got) != 20<<10 {
		t.Fatalf("short packet: %d bytes, %v", len(got), err)
	}
	if tr.largest > 16<<10 {
		t.Errorf("a buffer of %d bytes for 20 KiB received, 8 KiB of them into the room it had", tr.largest)
	}
	// A buffer smaller than a first read grows to one.
	tr = &trickle{data: make([]byte, 10)}
	if _, err := readFull(tr, maxPacketSize, make([]byte, 0, 16)); err != io.ErrUnexpectedEOF {
		t.Fatalf("short packet: %v", err)
	}
	if tr.largest > firstRead {
		t.Errorf("a buffer of %d bytes for 10 bytes received", tr.largest)
	}
}

// chunks is a milter that remembers the first byte of every body chunk,
// read while BodyChunk runs, as a chunk is valid only then.
type chunks struct {
	NoOpMilter
	first *[]byte
}

func (c chunks) BodyChunk(chunk []byte, m *Modifier) (Response, error) {
	*c.first = append(*c.first, chunk[0])
	return RespContinue, nil
}

func TestSessionReusesItsPacketBuffer(t *testing.T) {
	var first []byte
	s := &Server{NewMilter: func() Milter { return chunks{first: &first} }}
	c1, c2 := net.Pipe()
	sess := &milterSession{server: s, conn: c2, backend: s.NewMilter()}
	done := make(chan struct{})
	var bufs []*byte
	var caps []int
	go func() {
		defer close(done)
		for {
			msg, err := sess.ReadPacket()
			if err != nil {
				return
			}
			var at *byte
			if cap(sess.buf) > 0 {
				at = &sess.buf[:1][0]
			}
			bufs = append(bufs, at)
			caps = append(caps, cap(sess.buf))
			resp, err := sess.Process(msg)
			if err != nil || sess.WritePacket(resp.Response()) != nil {
				return
			}
		}
	}()
	sizes := []int{10, 5000, 64 << 10, 100, 200 << 10, 10}
	for i, n := range sizes {
		chunk := bytes.Repeat([]byte{byte('a' + i)}, n)
		if err := writePacket(c1, &Message{Code: byte(CodeBody), Data: chunk}, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := readPacket(c1, 0); err != nil {
			t.Fatal(err)
		}
	}
	c1.Close()
	<-done
	if string(first) != "abcdef" {
		t.Errorf("chunks began %q, want %q", first, "abcdef")
	}
	// The buffer of a chunk of 64 KiB serves the chunk after; the one of
	// a chunk past keepPacketBuffer is let go.
	if bufs[3] != bufs[2] {
		t.Error("a packet after one of 64 KiB was read into new memory")
	}
	if caps[4] != 0 || caps[5] == 0 || caps[5] > keepPacketBuffer {
		t.Errorf("buffers of %d bytes kept; a packet past %d bytes was not let go", caps, keepPacketBuffer)
	}
}
