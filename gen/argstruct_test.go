package gen

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
)

// mixed exercises every layout rule: 2-byte, 4-byte, 8-byte and 16-byte
// members, a 3-component vector (sized and aligned like 4), and tail padding.
var mixed = &ArgStruct{Name: "mixed_args", Fields: []ArgField{
	{"h", ArgHalf}, {"v4", ArgFloat4}, {"u", ArgUInt}, {"f2", ArgFloat2}, {"i", ArgInt},
	{"v3", ArgFloat3}, {"h2", ArgHalf2}, {"hh", ArgHalf}, {"u2", ArgUInt2}, {"h4", ArgHalf4}, {"u4", ArgUInt4}, {"f", ArgFloat},
}}

// The layouts of MSL's rules (Metal Shading Language Specification, tables
// of scalar and vector sizes and alignments), worked by hand.
func TestArgLayout(t *testing.T) {
	cases := []struct {
		s       *ArgStruct
		offsets []int
		size    int
		align   int
	}{
		{floatArgs("x", "eps"), []int{0}, 4, 4},
		{floatArgs("x", "eps", "rope_theta"), []int{0, 4}, 8, 4},
		{&ArgStruct{Name: "a", Fields: []ArgField{{"h", ArgHalf}, {"f", ArgFloat}}}, []int{0, 4}, 8, 4},
		{&ArgStruct{Name: "b", Fields: []ArgField{{"f", ArgFloat}, {"v", ArgFloat3}}}, []int{0, 16}, 32, 16},
		{&ArgStruct{Name: "c", Fields: []ArgField{{"v", ArgFloat3}, {"f", ArgFloat}}}, []int{0, 16}, 32, 16},
		{&ArgStruct{Name: "d", Fields: []ArgField{{"f", ArgFloat}, {"v", ArgFloat2}, {"h", ArgHalf}}}, []int{0, 8, 16}, 24, 8},
		{&ArgStruct{Name: "e", Fields: []ArgField{{"h", ArgHalf}, {"h4", ArgHalf4}}}, []int{0, 8}, 16, 8},
		{mixed, []int{0, 16, 32, 40, 48, 64, 80, 84, 88, 96, 112, 128}, 144, 16},
	}
	for _, c := range cases {
		l, err := c.s.Layout()
		if err != nil {
			t.Fatal(err)
		}
		var offs []int
		for _, f := range l.Fields {
			offs = append(offs, f.Offset)
		}
		if fmt.Sprint(offs) != fmt.Sprint(c.offsets) || l.Size != c.size || l.Align != c.align {
			t.Errorf("%s: offsets %v size %d align %d, want %v %d %d", c.s.Name, offs, l.Size, l.Align, c.offsets, c.size, c.align)
		}
	}
	bad := []*ArgStruct{
		{Name: "x", Fields: []ArgField{{"a", "double"}}},
		{Name: "x", Fields: []ArgField{{"a", ArgFloat}, {"a", ArgFloat}}},
		{Name: "x", Fields: []ArgField{{"1a", ArgFloat}}},
	}
	for _, s := range bad {
		if _, err := s.Layout(); err == nil {
			t.Errorf("%+v: no error", s.Fields)
		}
	}
}

// argStructsUnderTest are the catalog's structs and the synthetic one.
func argStructsUnderTest() []*ArgStruct {
	out := []*ArgStruct{mixed}
	for _, f := range Families() {
		if f.Args != nil {
			out = append(out, f.Args)
		}
	}
	return out
}

// clang lays the MSL structs out exactly as Layout says: sizes, alignments
// and offsets agree (ext_vector_type follows Metal's vector rules).
func TestArgLayoutMatchesClang(t *testing.T) {
	if _, err := mslemu.Clang(); errors.Is(err, mslemu.ErrNoClang) {
		if os.Getenv("STRATA_REQUIRE_CLANG") != "" {
			t.Fatal("STRATA_REQUIRE_CLANG is set but " + err.Error())
		}
		t.Skip("skipping: " + err.Error())
	}
	var src strings.Builder
	src.WriteString("#include <metal_stdlib>\nusing namespace metal;\n")
	for _, s := range argStructsUnderTest() {
		def, err := s.MSL()
		if err != nil {
			t.Fatal(err)
		}
		l, _ := s.Layout()
		src.WriteString(def)
		fmt.Fprintf(&src, "static_assert(sizeof(%s) == %d, \"size of %s\");\n", s.Name, l.Size, s.Name)
		fmt.Fprintf(&src, "static_assert(alignof(%s) == %d, \"alignment of %s\");\n", s.Name, l.Align, s.Name)
		for _, f := range l.Fields {
			fmt.Fprintf(&src, "static_assert(__builtin_offsetof(%s, %s) == %d, \"offset of %s.%s\");\n", s.Name, f.Name, f.Offset, s.Name, f.Name)
		}
	}
	if err := mslemu.TypeCheck("argstructs.metal", []byte(src.String())); err != nil {
		t.Fatal(err)
	}
	// And the check can fail: a wrong offset is caught.
	wrong := strings.Replace(src.String(), "__builtin_offsetof(mixed_args, v4) == 16", "__builtin_offsetof(mixed_args, v4) == 4", 1)
	if err := mslemu.TypeCheck("argstructs.metal", []byte(wrong)); err == nil {
		t.Error("clang accepted a wrong offset")
	}
}

// The artifact's encoder writes the MSL layout: each catalog struct, as the
// artifact describes it, encodes a distinct value per member at the offset
// Layout gives it (which clang confirms above), the padding zero.
func TestEncodeArgsWritesMSLLayout(t *testing.T) {
	for _, f := range Families() {
		if f.Args == nil {
			continue
		}
		l, err := f.Args.Layout()
		if err != nil {
			t.Fatal(err)
		}
		as := artifact.ArgStruct{Family: f.Name, Name: f.Args.Name, Size: l.Size, Align: l.Align}
		var scalars []graph.Scalar
		want := make([]byte, l.Size)
		for i, fl := range l.Fields {
			as.Fields = append(as.Fields, artifact.ArgField{Name: fl.Name, Type: string(fl.Type), Offset: fl.Offset})
			v := float64(i) + 1.5
			scalars = append(scalars, graph.Scalar{Name: fl.Name, Value: v})
			binary.LittleEndian.PutUint32(want[fl.Offset:], math.Float32bits(float32(v)))
		}
		a := &artifact.Artifact{Name: "test", Args: []artifact.ArgStruct{as}}
		got, err := a.EncodeArgs(f.Name, scalars)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: encoded %x, MSL layout is %x", f.Args.Name, got, want)
		}
		if len(scalars) > 0 {
			scalars[0].Name += "_wrong"
			if _, err := a.EncodeArgs(f.Name, scalars); err == nil {
				t.Errorf("%s: a misnamed scalar was encoded", f.Args.Name)
			}
		}
	}
}
