package metal

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-llm/strata/graph"
)

// The contract with the MSL generator. A model's generated artifacts give the
// backend a Kernels value: the kernels.metal source, the MSL version it is
// written for, and a Resolver that names, for each dispatch of a window
// graph, the MSL function that runs it and the function-constant tuple to
// specialize it with (constants are set by index, never by name). The
// generator may emit its own Resolver or the data for TableResolver:
// per kernel family, the [[function_constant(N)]] slots of its index block.
// One pipeline is built per distinct (function name, tuple) at load time.

// DataType is the MSL type of a function constant, as an MTLDataType value.
type DataType uint32

// The function-constant types the generator uses (MTLDataType values).
const (
	TypeInt    DataType = 29
	TypeUInt   DataType = 33
	TypeShort  DataType = 37
	TypeUShort DataType = 41
	TypeBool   DataType = 53
)

func (t DataType) String() string {
	switch t {
	case TypeInt:
		return "int"
	case TypeUInt:
		return "uint"
	case TypeShort:
		return "short"
	case TypeUShort:
		return "ushort"
	case TypeBool:
		return "bool"
	}
	return "MTLDataType(" + strconv.Itoa(int(t)) + ")"
}

// Size is the byte size of a value of type t, 0 for unsupported types.
func (t DataType) Size() int {
	switch t {
	case TypeInt, TypeUInt:
		return 4
	case TypeShort, TypeUShort:
		return 2
	case TypeBool:
		return 1
	}
	return 0
}

// fits reports whether v is representable in t.
func (t DataType) fits(v int64) bool {
	switch t {
	case TypeInt:
		return v >= math.MinInt32 && v <= math.MaxInt32
	case TypeUInt:
		return v >= 0 && v <= math.MaxUint32
	case TypeShort:
		return v >= math.MinInt16 && v <= math.MaxInt16
	case TypeUShort:
		return v >= 0 && v <= math.MaxUint16
	case TypeBool:
		return v == 0 || v == 1
	}
	return false
}

// Encode writes v in t's little-endian layout, the bytes
// setConstantValue:type:atIndex: reads.
func (t DataType) Encode(v int64) []byte {
	b := make([]byte, t.Size())
	switch t.Size() {
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 1:
		b[0] = byte(v)
	}
	return b
}

// FunctionConstant is one function-constant value, set by index.
type FunctionConstant struct {
	Index int
	Type  DataType
	Value int64
}

// Function is a specialized kernel: an MSL function of the library and its
// function-constant tuple, sorted by index.
type Function struct {
	Name      string
	Constants []FunctionConstant
}

// Key is the canonical pipeline key: the name and every (index, type,
// value), so two dispatches share a pipeline exactly when their keys match.
func (f Function) Key() string {
	var b strings.Builder
	b.WriteString(f.Name)
	for _, c := range f.Constants {
		fmt.Fprintf(&b, " %d:%s=%d", c.Index, c.Type, c.Value)
	}
	return b.String()
}

// check verifies that indices are distinct and sorted and values fit.
func (f Function) check() error {
	if f.Name == "" {
		return fmt.Errorf("function with no name")
	}
	for i, c := range f.Constants {
		if c.Type.Size() == 0 {
			return fmt.Errorf("function %s: constant %d has unsupported type %s", f.Name, c.Index, c.Type)
		}
		if !c.Type.fits(c.Value) {
			return fmt.Errorf("function %s: constant %d = %d does not fit its type %s", f.Name, c.Index, c.Value, c.Type)
		}
		if c.Index < 0 || (i > 0 && c.Index <= f.Constants[i-1].Index) {
			return fmt.Errorf("function %s: constant indices must be distinct, non-negative and sorted (index %d)", f.Name, c.Index)
		}
	}
	return nil
}

// Resolver names the specialized function that runs a dispatch.
type Resolver func(d *graph.Dispatch) (Function, error)

// ArgsEncoder lays out a dispatch's argument struct (tier 3), or returns nil
// when it has none.
type ArgsEncoder func(d *graph.Dispatch) ([]byte, error)

// ScalarArgs is the default ArgsEncoder and the IR's convention: the
// dispatch's scalars as float32, in order (graph.ICBArgs).
func ScalarArgs(d *graph.Dispatch) ([]byte, error) {
	if len(d.Scalars) == 0 {
		return nil, nil
	}
	b := make([]byte, 4*len(d.Scalars))
	for i, s := range d.Scalars {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(s.Value)))
	}
	return b, nil
}

// LanguageVersion is an MSL version. Its Code is the MTLLanguageVersion
// value.
type LanguageVersion struct{ Major, Minor int }

// Code is the MTLLanguageVersion value: major<<16 | minor.
func (v LanguageVersion) Code() uint64 { return uint64(v.Major)<<16 | uint64(v.Minor) }

func (v LanguageVersion) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// LanguageVersionOf decodes an MTLLanguageVersion value.
func LanguageVersionOf(code uint64) LanguageVersion {
	return LanguageVersion{Major: int(code >> 16), Minor: int(code & 0xffff)}
}

// DefaultLanguageVersion is MSL 3.1 (macOS 14): bfloat and the simdgroup
// functions the kernels use. It is always set explicitly, because a binary
// built with CGO_ENABLED=0 has no LC_BUILD_VERSION and the runtime compiler
// would otherwise fall back to MSL 2.4.
var DefaultLanguageVersion = LanguageVersion{3, 1}

// Kernels is what the MSL generator hands the backend for one model.
type Kernels struct {
	Source          string          // kernels.metal
	LanguageVersion LanguageVersion // zero: DefaultLanguageVersion
	Resolve         Resolver
	Args            ArgsEncoder // nil: ScalarArgs
}

// ConstantSlot declares one [[function_constant(Index)]] of a kernel family:
// the graph constant (graph.Const.Name) that sets it, and its MSL type.
// Optional slots are read through is_function_constant_defined in MSL, so a
// dispatch may leave them out (the grid offsets of unchunked dispatches).
type ConstantSlot struct {
	Name     graph.ConstName
	Index    int
	Type     DataType
	Optional bool
}

// TableResolver resolves dispatches from per-family constant slots: the MSL
// function is the dispatch's Kernel name; each of its constants goes to the
// slot of the same name in its Family's list. A constant with no slot is an
// error (Metal silently ignores a value whose index matches no constant, so
// a drifted index would otherwise go unnoticed), and so is a required slot
// the dispatch does not set.
func TableResolver(families map[graph.Family][]ConstantSlot) Resolver {
	return func(d *graph.Dispatch) (Function, error) {
		slots, ok := families[d.Family]
		if !ok {
			return Function{}, fmt.Errorf("kernel family %q has no function-constant table", d.Family)
		}
		f := Function{Name: d.Kernel}
		set := map[graph.ConstName]bool{}
		for _, c := range d.Consts {
			i := slices.IndexFunc(slots, func(s ConstantSlot) bool { return s.Name == c.Name })
			if i < 0 {
				return Function{}, fmt.Errorf("kernel %s: constant %s has no function-constant slot in family %s", d.Kernel, c.Name, d.Family)
			}
			if set[c.Name] {
				return Function{}, fmt.Errorf("kernel %s: constant %s set twice", d.Kernel, c.Name)
			}
			set[c.Name] = true
			f.Constants = append(f.Constants, FunctionConstant{Index: slots[i].Index, Type: slots[i].Type, Value: c.Value})
		}
		for _, s := range slots {
			if !s.Optional && !set[s.Name] {
				return Function{}, fmt.Errorf("kernel %s: required function constant %s (index %d) is not set by the dispatch", d.Kernel, s.Name, s.Index)
			}
		}
		slices.SortFunc(f.Constants, func(a, b FunctionConstant) int { return a.Index - b.Index })
		if err := f.check(); err != nil {
			return Function{}, err
		}
		return f, nil
	}
}

// DeclaredConstant is a function constant as the compiled library declares
// it (MTLFunction.functionConstantsDictionary).
type DeclaredConstant struct {
	Name     string
	Index    int
	Type     DataType
	Required bool
}

// checkDeclared holds a tuple against what the function declares: every
// value must hit a declared index of the same type, and every required
// constant must be set.
func checkDeclared(f Function, declared []DeclaredConstant) error {
	byIndex := map[int]DeclaredConstant{}
	for _, d := range declared {
		byIndex[d.Index] = d
	}
	set := map[int]bool{}
	for _, c := range f.Constants {
		d, ok := byIndex[c.Index]
		if !ok {
			return fmt.Errorf("function %s declares no function constant at index %d", f.Name, c.Index)
		}
		if d.Type != c.Type {
			return fmt.Errorf("function %s: constant %s (index %d) is %s in MSL, set as %s", f.Name, d.Name, c.Index, d.Type, c.Type)
		}
		set[c.Index] = true
	}
	for _, d := range declared {
		if d.Required && !set[d.Index] {
			return fmt.Errorf("function %s: required constant %s (index %d) is not set", f.Name, d.Name, d.Index)
		}
	}
	return nil
}
