package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Errors of reading a training batch.
var (
	// ErrBatchSyntax is wrapped by the errors of a batch that is not a
	// TrainRequest in JSON.
	ErrBatchSyntax = errors.New("malformed training batch")
	// ErrBatchTooLarge is wrapped by the error of a batch holding a value
	// (a message, once encoded) larger than its limit.
	ErrBatchTooLarge = errors.New("training batch holds a value larger than allowed")
)

// batchSlack is what an item may hold in JSON besides its message in
// base64: the class, the keys, white space.
const batchSlack = 64 << 10

// BatchDecoder reads a TrainRequest as it streams in, one item at a time,
// so that a batch costs the memory of one message rather than of all of
// them. It accepts what json.Unmarshal accepts into a TrainRequest, with
// two exceptions: "items" (matched, as json.Unmarshal does, without case)
// may appear once, and no value of the document may take more than the
// limit's room in JSON, which a message of maxMessage bytes in base64 fits
// with room to spare.
type BatchDecoder struct {
	lr    *limitReader
	dec   *json.Decoder
	state int // 0: before the document; 1: in items; 2: after items; 3: done
	items bool
}

// NewBatchDecoder reads a batch from r whose messages are at most
// maxMessage bytes.
func NewBatchDecoder(r io.Reader, maxMessage int64) *BatchDecoder {
	return newBatchDecoder(r, (maxMessage+2)/3*4+batchSlack)
}

// newBatchDecoder reads a batch from r whose values take at most maxValue
// bytes of JSON.
func newBatchDecoder(r io.Reader, maxValue int64) *BatchDecoder {
	lr := &limitReader{r: r, max: maxValue}
	dec := json.NewDecoder(lr)
	lr.dec = dec
	return &BatchDecoder{lr: lr, dec: dec}
}

// limitReader fails a read that would make the decoder hold more than max
// bytes of one value: the bytes read from the start of the value being
// decoded.
type limitReader struct {
	r     io.Reader
	dec   *json.Decoder
	read  int64 // bytes read from r
	start int64 // the input offset where the value being decoded starts
	max   int64
	err   error // the reading error, io.EOF aside
}

func (l *limitReader) Read(b []byte) (int, error) {
	room := l.max - (l.read - l.start)
	if room <= 0 {
		l.err = fmt.Errorf("%w: a value of more than %d bytes", ErrBatchTooLarge, l.max)
		return 0, l.err
	}
	if int64(len(b)) > room {
		b = b[:room]
	}
	n, err := l.r.Read(b)
	l.read += int64(n)
	if err != nil && err != io.EOF {
		l.err = err
	}
	return n, err
}

// mark starts a new value at the decoder's position.
func (d *BatchDecoder) mark() { d.lr.start = d.dec.InputOffset() }

// syntax returns the error of reading the input as it is, and wraps any
// other decoding error in ErrBatchSyntax.
func (d *BatchDecoder) syntax(err error) error {
	switch {
	case d.lr.err != nil:
		return d.lr.err
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: unexpected end of input", ErrBatchSyntax)
	}
	return fmt.Errorf("%w: %v", ErrBatchSyntax, err)
}

func (d *BatchDecoder) token() (json.Token, error) {
	d.mark()
	t, err := d.dec.Token()
	if err != nil {
		return nil, d.syntax(err)
	}
	return t, nil
}

// Next returns the next item of the batch, and io.EOF after the last one
// once the whole document was read.
func (d *BatchDecoder) Next() (Item, error) {
	for {
		switch d.state {
		case 0:
			t, err := d.token()
			if err != nil {
				return Item{}, err
			}
			if t == nil {
				// null: no items, as json.Unmarshal reads it.
				d.state = 3
				return Item{}, d.end()
			}
			if t != json.Delim('{') {
				return Item{}, fmt.Errorf("%w: want an object, not %v", ErrBatchSyntax, t)
			}
			d.state = 2
		case 1:
			d.mark()
			if d.dec.More() {
				var it Item
				d.mark()
				if err := d.dec.Decode(&it); err != nil {
					return Item{}, d.syntax(err)
				}
				return it, nil
			}
			if _, err := d.token(); err != nil { // ]
				return Item{}, err
			}
			d.state = 2
		case 2:
			t, err := d.token()
			if err != nil {
				return Item{}, err
			}
			if t == json.Delim('}') {
				d.state = 3
				return Item{}, d.end()
			}
			key, _ := t.(string)
			if !strings.EqualFold(key, "items") {
				var skip json.RawMessage
				d.mark()
				if err := d.dec.Decode(&skip); err != nil {
					return Item{}, d.syntax(err)
				}
				continue
			}
			if d.items {
				return Item{}, fmt.Errorf("%w: \"items\" given twice", ErrBatchSyntax)
			}
			d.items = true
			t, err = d.token()
			if err != nil {
				return Item{}, err
			}
			switch t {
			case nil:
			case json.Delim('['):
				d.state = 1
			default:
				return Item{}, fmt.Errorf("%w: items: want an array, not %v", ErrBatchSyntax, t)
			}
		default:
			return Item{}, io.EOF
		}
	}
}

// end checks that nothing but white space follows the document.
func (d *BatchDecoder) end() error {
	d.mark()
	if _, err := d.dec.Token(); err != io.EOF {
		if err != nil {
			return d.syntax(err)
		}
		return fmt.Errorf("%w: data after the document", ErrBatchSyntax)
	}
	return io.EOF
}
