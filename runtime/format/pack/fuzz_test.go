package pack

import (
	"bytes"
	"testing"
)

// FuzzPackHeaderIndex feeds arbitrary bytes to the .experts header and index
// decoders: they must never panic or allocate beyond what the bytes hold,
// and what they accept re-encodes to the same bytes. The seed corpus (a
// real header and index, damaged variants) runs in every go test.
func FuzzPackHeaderIndex(f *testing.F) {
	lays := []layout{{block: 0, parts: []PartInfo{{Part{"blk.0.ffn_gate_exps.weight", 0, 4}, 0, 64}, {Part{"blk.0.ffn_down_exps.weight", 0, 2}, 64, 32}}}, {block: 3}}
	entries := []Entry{{PageSize, 96, 7}, {2 * PageSize, 96, 8}, {3 * PageSize, 0, 0}, {4 * PageSize, 0, 1}}
	index := encodeIndex(lays, entries)
	h := header{layers: 2, experts: 2, indexOff: 5 * PageSize, indexLen: uint64(len(index))}
	good := append(h.encode(), index...)
	f.Add(good, uint16(2), uint16(2))
	f.Add(good[:headerBytes+7], uint16(2), uint16(2))
	f.Add(good, uint16(65535), uint16(65535))
	huge := bytes.Clone(good)
	huge[headerBytes+4] = 0xff // a part count past the bytes
	f.Add(huge, uint16(2), uint16(2))
	f.Fuzz(func(t *testing.T, b []byte, layers, experts uint16) {
		if hd, err := decodeHeader(b); err == nil {
			if !bytes.Equal(hd.encode(), b[:headerBytes]) {
				t.Fatalf("header round trip differs")
			}
		}
		if len(b) < headerBytes {
			return
		}
		idx := b[headerBytes:]
		l, e, err := decodeIndex(idx, int(layers), int(experts))
		if err != nil {
			return
		}
		if len(l) != int(layers) || len(e) != int(layers)*int(experts) {
			t.Fatalf("%d layouts and %d entries for %d × %d", len(l), len(e), layers, experts)
		}
		if !bytes.Equal(encodeIndex(l, e), idx) {
			t.Fatalf("index round trip differs")
		}
	})
}
