package gen

import (
	"fmt"
	"strings"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
)

// Argument structs (tier 3 of the specialization): what a kernel takes at
// run time that is not a buffer or a function constant, bound with setBytes
// (or from the ICB plan's static argument buffer) at the slot after the
// dispatch's last binding. Each struct is defined once, here, and emitted
// twice: as an MSL struct in kernels.metal and as layout data in the
// artifact (artifact.ArgStruct, which artifact.EncodeArgs encodes from).
// Both take their layout from Layout, which follows MSL's size and
// alignment rules.

// Argument field types: MSL scalar and vector types.
type ArgType string

const (
	ArgFloat  ArgType = "float"
	ArgHalf   ArgType = "half"
	ArgInt    ArgType = "int"
	ArgUInt   ArgType = "uint"
	ArgFloat2 ArgType = "float2"
	ArgFloat3 ArgType = "float3"
	ArgFloat4 ArgType = "float4"
	ArgUInt2  ArgType = "uint2"
	ArgUInt4  ArgType = "uint4"
	ArgHalf2  ArgType = "half2"
	ArgHalf4  ArgType = "half4"
)

// argTypeInfo is an MSL type's layout (Metal Shading Language
// Specification, "Scalar data types" and "Vector data types": a 3-component
// vector has the size and alignment of the 4-component one).
type argTypeInfo struct{ size, align int }

var argTypes = map[ArgType]argTypeInfo{
	ArgFloat:  {4, 4},
	ArgHalf:   {2, 2},
	ArgInt:    {4, 4},
	ArgUInt:   {4, 4},
	ArgFloat2: {8, 8},
	ArgFloat3: {16, 16},
	ArgFloat4: {16, 16},
	ArgUInt2:  {8, 8},
	ArgUInt4:  {16, 16},
	ArgHalf2:  {4, 4},
	ArgHalf4:  {8, 8},
}

// ArgField is one member of an argument struct.
type ArgField struct {
	Name string // MSL member name (snake_case)
	Type ArgType
}

// ArgStruct is an argument struct definition.
type ArgStruct struct {
	Name   string // MSL type name, e.g. rmsnorm_args
	Fields []ArgField
}

// FieldLayout places one field.
type FieldLayout struct {
	ArgField
	Offset int
	Size   int
	Align  int
}

// StructLayout is the MSL layout of an argument struct.
type StructLayout struct {
	Fields []FieldLayout
	Size   int
	Align  int
}

// Layout computes the struct's MSL layout: each member at the next offset
// that is a multiple of its alignment, the struct aligned to its largest
// member and padded to a multiple of that.
func (s *ArgStruct) Layout() (StructLayout, error) {
	l := StructLayout{Align: 1}
	off := 0
	seen := map[string]bool{}
	for _, f := range s.Fields {
		info, ok := argTypes[f.Type]
		if !ok {
			return StructLayout{}, fmt.Errorf("argument struct %s: field %s has unsupported type %q", s.Name, f.Name, f.Type)
		}
		if seen[f.Name] || !artifact.IsIdent(f.Name) {
			return StructLayout{}, fmt.Errorf("argument struct %s: field name %q is repeated or not an identifier", s.Name, f.Name)
		}
		seen[f.Name] = true
		off = alignUp(off, info.align)
		l.Fields = append(l.Fields, FieldLayout{ArgField: f, Offset: off, Size: info.size, Align: info.align})
		off += info.size
		l.Align = max(l.Align, info.align)
	}
	l.Size = alignUp(off, l.Align)
	return l, nil
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// MSL is the struct's MSL definition, with each member's offset.
func (s *ArgStruct) MSL() (string, error) {
	l, err := s.Layout()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "struct %s { // %d bytes, aligned to %d\n", s.Name, l.Size, l.Align)
	for _, f := range l.Fields {
		fmt.Fprintf(&b, "    %s %s; // offset %d\n", f.Type, f.Name, f.Offset)
	}
	b.WriteString("};\n")
	return b.String(), nil
}

// fromScalars reports whether the struct is a dispatch's scalars: float
// members only (graph: scalars are float32, in order).
func (s *ArgStruct) fromScalars() bool {
	for _, f := range s.Fields {
		if f.Type != ArgFloat {
			return false
		}
	}
	return true
}

// checkScalars verifies that a dispatch's scalars are the struct's members,
// in order.
func (s *ArgStruct) checkScalars(scalars []graph.Scalar) error {
	if !s.fromScalars() || len(scalars) != len(s.Fields) {
		return fmt.Errorf("scalars %v do not match argument struct %s", scalarNames(scalars), s.Name)
	}
	for i, sc := range scalars {
		if sc.Name != s.Fields[i].Name {
			return fmt.Errorf("scalars %v do not match argument struct %s", scalarNames(scalars), s.Name)
		}
	}
	return nil
}

func scalarNames(s []graph.Scalar) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.Name
	}
	return out
}
