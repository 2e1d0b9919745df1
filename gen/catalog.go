package gen

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
)

// The kernel catalog: every kernel family the window graphs dispatch, with
// its function constants (tier 2 of the specialization, one index block per
// family), the MSL element type of its buffer bindings and its argument
// struct (tier 3). The MSL bodies live in templates/msl/<family>.metal.tmpl;
// the window graph supplies the bindings' slots and the constants' values.

// Function-constant value types.
const (
	ConstUInt = "uint"
	ConstBool = "bool"
)

// FamilyConst declares one function constant of a family.
type FamilyConst struct {
	Name graph.ConstName
	Type string // ConstUInt or ConstBool
	// Optional constants may be missing from a dispatch; the kernel then
	// uses Default (MSL: is_function_constant_defined).
	Optional bool
	Default  int64
}

// Family is one kernel family of the catalog.
type Family struct {
	Name graph.Family
	// Block is the first function-constant index of the family; its
	// constants take Block, Block+1, … in declaration order. Blocks are
	// fixed per family (not per model), so an index never changes meaning.
	Block  int
	Consts []FamilyConst
	// Types maps a binding name to its MSL element type; the rest are float.
	Types map[string]string
	// Formatted bindings hold weights in the kernel's storage format
	// (bound as uchar and read through the format's decoder).
	Formatted []string
	// Args is the argument struct, for families with scalars.
	Args *ArgStruct
	// ArgsOptional: only dispatches with scalars take the argument struct
	// (the router's λ exists only with MoCE), so a kernel has it or not.
	ArgsOptional bool
}

// argsUsed reports whether the library's kernels of f take its argument
// struct (an optional one may be used by none).
func (l *Library) argsUsed(f *Family) bool {
	if f.Args == nil {
		return false
	}
	if !f.ArgsOptional {
		return true
	}
	for _, k := range l.Kernels {
		if k.Family == f && k.ArgsSlot >= 0 {
			return true
		}
	}
	return false
}

// argsOf is the argument struct a dispatch of f takes, nil for none.
func (f *Family) argsOf(scalars int) *ArgStruct {
	if f.ArgsOptional && scalars == 0 {
		return nil
	}
	return f.Args
}

// ConstIndex returns the function-constant index of the constant called name.
func (f *Family) ConstIndex(name graph.ConstName) (int, bool) {
	for i, c := range f.Consts {
		if c.Name == name {
			return f.Block + i, true
		}
	}
	return 0, false
}

// Const returns the declaration of the constant called name.
func (f *Family) Const(name graph.ConstName) (FamilyConst, bool) {
	for _, c := range f.Consts {
		if c.Name == name {
			return c, true
		}
	}
	return FamilyConst{}, false
}

// GridOffsetBlock holds the grid-offset constants every family shares
// (graph.ConstGridOffsetX/Y/Z: chunks of a split dispatch).
const GridOffsetBlock = 0

// GridOffsetConsts are the shared, optional grid-offset constants.
var GridOffsetConsts = []FamilyConst{
	{Name: graph.ConstGridOffsetX, Type: ConstUInt, Optional: true},
	{Name: graph.ConstGridOffsetY, Type: ConstUInt, Optional: true},
	{Name: graph.ConstGridOffsetZ, Type: ConstUInt, Optional: true},
}

// blockSize is the width of each family's index block.
const blockSize = 100

func uintConsts(names ...graph.ConstName) []FamilyConst {
	out := make([]FamilyConst, len(names))
	for i, n := range names {
		out[i] = FamilyConst{Name: n, Type: ConstUInt}
	}
	return out
}

func boolConsts(names ...graph.ConstName) []FamilyConst {
	out := uintConsts(names...)
	for i := range out {
		out[i].Type = ConstBool
	}
	return out
}

func joinConsts(lists ...[]FamilyConst) []FamilyConst {
	var out []FamilyConst
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// eps/rope argument structs: the scalars of the norm and RoPE kernels.
func floatArgs(family graph.Family, fields ...string) *ArgStruct {
	s := &ArgStruct{Name: string(family) + "_args"}
	for _, f := range fields {
		s.Fields = append(s.Fields, ArgField{Name: f, Type: ArgFloat})
	}
	return s
}

var (
	gdnConsts   = joinConsts(uintConsts(graph.ConstRows, graph.ConstNK, graph.ConstNV, graph.ConstDK, graph.ConstDV), boolConsts(graph.ConstGrouped))
	attnConsts  = joinConsts(uintConsts(graph.ConstRows, graph.ConstHeads, graph.ConstKVHeads, graph.ConstHeadDim, graph.ConstRotDim), boolConsts(graph.ConstGate), uintConsts(graph.ConstCtx))
	indexConsts = uintConsts(graph.ConstRows, graph.ConstHeads, graph.ConstHeadDim, graph.ConstRotDim, graph.ConstRatio, graph.ConstTopK, graph.ConstCtx)
	moeConsts   = uintConsts(graph.ConstRows, graph.ConstExperts, graph.ConstTopK, graph.ConstHidden, graph.ConstInter, graph.ConstWFmt, graph.ConstStride, graph.ConstGateOff, graph.ConstUpOff, graph.ConstDownOff)
	smapTypes   = map[string]string{"ids": "uint", "smap": "uint"}
)

// catalog lists the families in block order. Append new families at the end
// with a fresh block: blocks are part of the pipeline contract.
var catalog = []*Family{
	{Name: graph.FamilyEmbed, Block: 100, Consts: uintConsts(graph.ConstRows, graph.ConstDim, graph.ConstVocab, graph.ConstCopies, graph.ConstWFmt), Formatted: []string{"table"}},
	{Name: graph.FamilyRMSNorm, Block: 200, Consts: joinConsts(uintConsts(graph.ConstRows, graph.ConstDim, graph.ConstGroup), boolConsts(graph.ConstZeroCentred)), Args: floatArgs(graph.FamilyRMSNorm, "eps")},
	{Name: graph.FamilyMatmul, Block: 300, Consts: joinConsts(uintConsts(graph.ConstRows, graph.ConstN, graph.ConstK, graph.ConstWFmt), []FamilyConst{{Name: graph.ConstFold, Type: ConstUInt, Optional: true, Default: 1}}),
		Formatted: []string{"w"}},
	{Name: graph.FamilyResidualAdd, Block: 400, Consts: uintConsts(graph.ConstRows, graph.ConstDim)},
	{Name: graph.FamilySwiGLU, Block: 500, Consts: uintConsts(graph.ConstRows, graph.ConstDim)},
	{Name: graph.FamilyCopyLastRow, Block: 600, Consts: uintConsts(graph.ConstRows, graph.ConstDim)},
	{Name: graph.FamilyCopyRows, Block: 700, Consts: uintConsts(graph.ConstRows, graph.ConstDim)},
	{Name: graph.FamilyConcat, Block: 800, Consts: uintConsts(graph.ConstRows, graph.ConstA, graph.ConstB)},
	{Name: graph.FamilyStreamAdd, Block: 900, Consts: uintConsts(graph.ConstRows, graph.ConstHidden, graph.ConstStreams)},
	{Name: graph.FamilyGDNConv, Block: 1000, Consts: joinConsts(gdnConsts, uintConsts(graph.ConstKernel))},
	{Name: graph.FamilyGDNGates, Block: 1100, Consts: gdnConsts},
	{Name: graph.FamilyGDNRule, Block: 1200, Consts: gdnConsts},
	{Name: graph.FamilyGDNNormGate, Block: 1300, Consts: joinConsts(gdnConsts, boolConsts(graph.ConstGateSigmoid)), Args: floatArgs(graph.FamilyGDNNormGate, "eps")},
	{Name: graph.FamilyAttnPrep, Block: 1400, Consts: attnConsts, Args: floatArgs(graph.FamilyAttnPrep, "eps", "rope_theta")},
	{Name: graph.FamilyAttention, Block: 1500, Consts: joinConsts(attnConsts, boolConsts(graph.ConstSparse), uintConsts(graph.ConstRatio, graph.ConstTopK)),
		Types: map[string]string{"sel": "uint", "count": "uint"}},
	{Name: graph.FamilyRouter, Block: 1600, Consts: joinConsts(uintConsts(graph.ConstRows, graph.ConstExperts, graph.ConstTopK), boolConsts(graph.ConstNormTopK),
		[]FamilyConst{{Name: graph.ConstMoCE, Type: ConstBool, Optional: true}, {Name: graph.ConstProtect, Type: ConstUInt, Optional: true}, {Name: graph.ConstMaxRank, Type: ConstUInt, Optional: true}}),
		Types: map[string]string{"ids": "uint", "resident": "uint"}, Args: floatArgs(graph.FamilyRouter, "lambda"), ArgsOptional: true},
	{Name: graph.FamilyMoEGateUp, Block: 1700, Consts: moeConsts, Types: smapTypes, Formatted: []string{"experts"}},
	{Name: graph.FamilyMoEDown, Block: 1800, Consts: joinConsts(moeConsts, uintConsts(graph.ConstParts)), Types: smapTypes, Formatted: []string{"experts"}},
	{Name: graph.FamilyMoECombine, Block: 1900, Consts: joinConsts(uintConsts(graph.ConstRows, graph.ConstDim, graph.ConstParts), boolConsts(graph.ConstShared, graph.ConstAdd))},
	{Name: graph.FamilyHCAct, Block: 2000, Consts: uintConsts(graph.ConstRows, graph.ConstDim, graph.ConstStreams)},
	{Name: graph.FamilyHCMix, Block: 2100, Consts: uintConsts(graph.ConstRows, graph.ConstHidden, graph.ConstStreams)},
	{Name: graph.FamilyHCInject, Block: 2200, Consts: uintConsts(graph.ConstRows, graph.ConstHidden, graph.ConstStreams)},
	{Name: graph.FamilyPLEGate, Block: 2300, Consts: uintConsts(graph.ConstRows, graph.ConstHidden, graph.ConstStreams)},
	{Name: graph.FamilyPLEConv, Block: 2400, Consts: uintConsts(graph.ConstRows, graph.ConstDim, graph.ConstKernel, graph.ConstDilation)},
	{Name: graph.FamilyIndexPrep, Block: 2500, Consts: indexConsts, Args: floatArgs(graph.FamilyIndexPrep, "eps", "rope_theta")},
	{Name: graph.FamilyIndexPool, Block: 2600, Consts: indexConsts, Args: floatArgs(graph.FamilyIndexPool, "eps", "rope_theta")},
	{Name: graph.FamilyIndexSelect, Block: 2700, Consts: indexConsts, Types: map[string]string{"sel": "uint", "count": "uint"}},
	{Name: graph.FamilyArgmax, Block: 2800, Consts: uintConsts(graph.ConstRows, graph.ConstDim), Types: map[string]string{"best": "uint"}},
}

// Families returns the kernel catalog in block order.
func Families() []*Family { return catalog }

// FamilyByName returns the catalog entry of a kernel family.
func FamilyByName(name graph.Family) (*Family, error) {
	for _, f := range catalog {
		if f.Name == name {
			return f, nil
		}
	}
	return nil, fmt.Errorf("kernel family %q is not in the catalog (gen/catalog.go)", name)
}

// elemType is the MSL element type of binding name.
func (f *Family) elemType(name string) string {
	if name == graph.ParamsBuffer {
		return "uint"
	}
	for _, n := range f.Formatted {
		if n == name {
			return "uchar"
		}
	}
	if t, ok := f.Types[name]; ok {
		return t
	}
	return "float"
}

func (f *Family) formatted(name string) bool {
	for _, n := range f.Formatted {
		if n == name {
			return true
		}
	}
	return false
}
