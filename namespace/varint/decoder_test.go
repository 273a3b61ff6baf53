package varint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func record() []byte {
	b := []byte{7}
	b = binary.AppendUvarint(b, 1<<40)
	b = binary.AppendVarint(b, -300)
	b = binary.AppendUvarint(b, 3)
	b = append(b, "abc"...)
	b = binary.AppendUvarint(b, 0) // an empty string
	return b
}

func TestDecoderReadsALayout(t *testing.T) {
	d := NewDecoder(record())
	if f, u, v, s, e := d.Byte(), d.Uvarint(), d.Varint(), d.Bytes(), d.Bytes(); f != 7 || u != 1<<40 || v != -300 ||
		string(s) != "abc" || e != nil || d.Finish() != nil {
		t.Fatalf("read %d %d %d %q %#v, err %v", f, u, v, s, e, d.Finish())
	}
}

// TestBytesAreCapped: appending to a byte string read from a record must
// not overwrite the fields after it.
func TestBytesAreCapped(t *testing.T) {
	b := record()
	d := NewDecoder(b)
	d.Byte()
	d.Uvarint()
	d.Varint()
	s := d.Bytes()
	_ = append(s, 'X')
	if !bytes.Equal(b, record()) {
		t.Fatal("append to a read byte string wrote into the record")
	}
}

func TestDecoderErrors(t *testing.T) {
	full := record()
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "truncated byte"},
		{"cut uvarint", full[:3], "truncated uvarint"},
		{"cut varint", full[:1+6], "truncated varint"},
		{"length beyond the input", full[:len(full)-2], "truncated bytes"},
		{"trailing bytes", append(record(), 9, 9), "2 trailing bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(tc.b)
			d.Byte()
			d.Uvarint()
			d.Varint()
			d.Bytes()
			d.Bytes()
			err := d.Finish()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if tc.want != "2 trailing bytes" {
				if !errors.Is(err, ErrTruncated) || d.Rest() != nil {
					t.Fatalf("err %v is not ErrTruncated, or input left after it (%d bytes)", err, len(d.Rest()))
				}
			}
		})
	}
	// A huge length is refused, not allocated.
	d := NewDecoder(binary.AppendUvarint(nil, 1<<62))
	if s := d.Bytes(); s != nil || !errors.Is(d.Err(), ErrTruncated) {
		t.Fatalf("huge length: %d bytes, err %v", len(s), d.Err())
	}
}

// FuzzDecoder: any input reads without a panic, and a read never returns
// more bytes than the input had.
func FuzzDecoder(f *testing.F) {
	f.Add(record())
	f.Add([]byte{})
	f.Add(binary.AppendUvarint(nil, 1<<62))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecoder(b)
		d.Byte()
		d.Uvarint()
		d.Varint()
		if s := d.Bytes(); len(s) > len(b) {
			t.Fatalf("read %d bytes from %d", len(s), len(b))
		}
		if d.Finish() == nil && len(d.Rest()) != 0 {
			t.Fatal("Finish passed with input left")
		}
	})
}
