package safetensors

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzSafetensorsOpen feeds arbitrary bytes to Open: it must never panic,
// and every tensor it accepts must hold exactly the bytes its shape and dtype
// need, and decode without error when its dtype is a float or int type. The
// seed corpus runs in every go test.
func FuzzSafetensorsOpen(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "seed.safetensors")
	if err := WriteFile(path, []Tensor{
		{Name: "a", DType: "F32", Shape: []int{2, 2}, Data: make([]byte, 16)},
		{Name: "b", DType: "BF16", Shape: []int{3}, Data: make([]byte, 6)},
		{Name: "c", DType: "I64", Shape: []int{}, Data: make([]byte, 8)},
	}, map[string]string{"format": "pt"}); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add(good[:12])
	header := func(h string, data int) []byte {
		b := make([]byte, 8, 8+len(h)+data)
		b[0] = byte(len(h))
		b = append(b, h...)
		return append(b, make([]byte, data)...)
	}
	f.Add(header(`{"x":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}`, 4))
	f.Add(header(`{"x":{"dtype":"F16","shape":[2],"data_offsets":[4,0]}}`, 4))
	f.Add(header(`{"x":{"dtype":"Q4","shape":[2],"data_offsets":[0,4]}}`, 4))
	f.Add(header(`{"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 4))
	f.Add(header(`{"__metadata__":{"a":1}}`, 0))
	f.Add(header(`[]`, 0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})

	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "f.safetensors")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		file, err := Open(p)
		if err != nil {
			return
		}
		defer file.Close()
		for _, name := range file.Names() {
			x, ok := file.Tensor(name)
			size, known := DTypeSize(x.DType)
			if !ok || !known || len(x.Data) != x.Elements()*size {
				t.Fatalf("tensor %s: %s %v with %d bytes accepted", name, x.DType, x.Shape, len(x.Data))
			}
			switch x.DType {
			case "F32", "F16", "BF16", "F64":
				if _, err := x.Float32s(); err != nil {
					t.Fatalf("tensor %s: %v", name, err)
				}
			case "I32", "I16", "I8", "U8":
				if _, err := x.Int32s(); err != nil {
					t.Fatalf("tensor %s: %v", name, err)
				}
			}
		}
	})
}
