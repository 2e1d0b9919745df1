package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// encode lays out a parsed file again, in memory, the way Writer does.
func encode(t *testing.T, f *File) []byte {
	t.Helper()
	header, infos, align, err := buildHeader(f.KV, f.Tensors)
	if err != nil {
		t.Fatalf("a parsed file does not re-encode: %v", err)
	}
	out := bytes.Clone(header)
	for i, ti := range infos {
		src, _ := f.Tensor(f.Tensors[i].Name)
		out = append(out, src.Data...)
		out = append(out, make([]byte, alignUp(ti.Size, align)-ti.Size)...)
	}
	return out
}

// FuzzGGUFRead feeds arbitrary bytes to the parser: it must never panic or
// over-allocate, everything it accepts must be internally consistent, and an
// accepted file must re-encode to a file that parses to the same encoding.
// The seed corpus (valid files, each corruption the unit tests make) runs in
// every go test.
func FuzzGGUFRead(f *testing.F) {
	dir := f.TempDir()
	for i, kv := range [][]KV{allTypesKV(), {{KeyAlignment, uint32(64)}}, nil} {
		path := filepath.Join(dir, "seed"+string(rune('a'+i))+".gguf")
		if err := WriteFile(path, kv, sampleTensors(f)); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	good := tensorFile(3, 0, 0, 32, 48)
	f.Add(good)
	f.Add(tensorFile(2, 0, 0, 32, 48))
	f.Add(tensorFile(3, 4, 0, 32, 48))
	f.Add(tensorFile(3, 0, 0, 16, 48))
	f.Add(tensorFile(3, 0, 0, 0, 48))
	f.Add(good[:len(good)-1])
	f.Add([]byte("GGUF"))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse("fuzz.gguf", b)
		if err != nil {
			return
		}
		for _, ti := range file.Tensors {
			x, ok := file.Tensor(ti.Name)
			if !ok || int64(len(x.Data)) != ti.Size || ti.Offset%file.Alignment != 0 {
				t.Fatalf("tensor %s: inconsistent after a successful parse: %+v, %d bytes", ti.Name, ti, len(x.Data))
			}
		}
		once := encode(t, file)
		again, err := Parse("re.gguf", once)
		if err != nil {
			t.Fatalf("re-encoded file does not parse: %v", err)
		}
		if twice := encode(t, again); !bytes.Equal(once, twice) {
			t.Fatal("re-encoding is not stable")
		}
	})
}
