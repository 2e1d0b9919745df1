package gen

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dave/jennifer/jen"

	"github.com/strata-llm/strata/runtime/mslemu"
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

// The generated Go encoders write the MSL layout: compile them in a scratch
// module, encode a distinct value per component, and compare each byte with
// where Layout puts it.
func TestGoEncoderWritesMSLLayout(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	structs := argStructsUnderTest()
	f := jen.NewFile("main")
	for _, s := range structs {
		if err := goArgStruct(f, s); err != nil {
			t.Fatal(err)
		}
	}
	var body []jen.Code
	for si, s := range structs {
		l, _ := s.Layout()
		var fields []jen.Code
		for fi, fl := range l.Fields {
			info := argTypes[fl.Type]
			var comps []jen.Code
			for lane := 0; lane < info.lanes; lane++ {
				comps = append(comps, componentValue(info.goElem, si, fi, lane))
			}
			v := comps[0]
			if info.lanes > 1 {
				v = jen.Index(jen.Lit(info.lanes)).Id(info.goElem).Values(comps...)
			}
			fields = append(fields, jen.Id(camel(fl.Name)).Op(":").Add(v))
		}
		body = append(body, jen.Block(
			jen.Id("b").Op(":=").Qual("bytes", "Repeat").Call(jen.Index().Byte().Values(jen.Lit(0xAA)), jen.Id(s.GoName()+"Size")),
			jen.Id("a"+fmt.Sprint(si)).Op(":=").Id(s.GoName()).Values(fields...),
			jen.Id("a"+fmt.Sprint(si)).Dot("Encode").Call(jen.Id("b")),
			jen.Qual("fmt", "Println").Call(jen.Qual("encoding/hex", "EncodeToString").Call(jen.Id("b"))),
		))
	}
	f.Func().Id("main").Params().Block(body...)
	var src bytes.Buffer
	if err := f.Render(&src); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module argcheck\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goTool, "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("running the generated encoders: %v\n%s\n%s", err, out, src.String())
	}
	lines := strings.Fields(string(out))
	if len(lines) != len(structs) {
		t.Fatalf("%d outputs for %d structs: %s", len(lines), len(structs), out)
	}
	for si, s := range structs {
		l, _ := s.Layout()
		want := bytes.Repeat([]byte{0xAA}, l.Size) // padding untouched
		for fi, fl := range l.Fields {
			info := argTypes[fl.Type]
			for lane := 0; lane < info.lanes; lane++ {
				putComponent(want[fl.Offset+lane*info.laneBytes:], info.goElem, si, fi, lane)
			}
		}
		if got := lines[si]; got != hex.EncodeToString(want) {
			t.Errorf("%s: encoder wrote\n %s\nMSL layout is\n %s", s.Name, got, hex.EncodeToString(want))
		}
	}
}

// componentValue is a value distinct per struct, field and lane, exact in
// its Go type.
func componentValue(elem string, si, fi, lane int) jen.Code {
	n := si*1000 + fi*10 + lane + 1
	switch elem {
	case "float32":
		return jen.Float32().Call(jen.Lit(float64(n) + 0.5))
	case "uint16":
		return jen.Uint16().Call(jen.Lit(n))
	case "int32":
		return jen.Int32().Call(jen.Lit(-n))
	default:
		return jen.Uint32().Call(jen.Lit(n))
	}
}

func putComponent(dst []byte, elem string, si, fi, lane int) {
	n := si*1000 + fi*10 + lane + 1
	switch elem {
	case "float32":
		binary.LittleEndian.PutUint32(dst, math.Float32bits(float32(float64(n)+0.5)))
	case "uint16":
		binary.LittleEndian.PutUint16(dst, uint16(n))
	case "int32":
		binary.LittleEndian.PutUint32(dst, uint32(int32(-n)))
	default:
		binary.LittleEndian.PutUint32(dst, uint32(n))
	}
}
