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
	Name string
	Type string // ConstUInt or ConstBool
	// Optional constants may be missing from a dispatch; the kernel then
	// uses Default (MSL: is_function_constant_defined).
	Optional bool
	Default  int64
}

// Family is one kernel family of the catalog.
type Family struct {
	Name string
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
func (f *Family) ConstIndex(name string) (int, bool) {
	for i, c := range f.Consts {
		if c.Name == name {
			return f.Block + i, true
		}
	}
	return 0, false
}

// Const returns the declaration of the constant called name.
func (f *Family) Const(name string) (FamilyConst, bool) {
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

func uintConsts(names ...string) []FamilyConst {
	out := make([]FamilyConst, len(names))
	for i, n := range names {
		out[i] = FamilyConst{Name: n, Type: ConstUInt}
	}
	return out
}

func boolConsts(names ...string) []FamilyConst {
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
func floatArgs(family string, fields ...string) *ArgStruct {
	s := &ArgStruct{Name: family + "_args"}
	for _, f := range fields {
		s.Fields = append(s.Fields, ArgField{Name: f, Type: ArgFloat})
	}
	return s
}

var (
	gdnConsts   = joinConsts(uintConsts("rows", "nk", "nv", "dk", "dv"), boolConsts("grouped"))
	attnConsts  = joinConsts(uintConsts("rows", "heads", "kv_heads", "head_dim", "rot_dim"), boolConsts("gate"), uintConsts("ctx"))
	indexConsts = uintConsts("rows", "heads", "head_dim", "rot_dim", "ratio", "top_k", "ctx")
	moeConsts   = uintConsts("rows", "experts", "top_k", "hidden", "inter", "wfmt", "stride", "gate_off", "up_off", "down_off")
	smapTypes   = map[string]string{"ids": "uint", "smap": "uint"}
)

// catalog lists the families in block order. Append new families at the end
// with a fresh block: blocks are part of the pipeline contract.
var catalog = []*Family{
	{Name: "embed", Block: 100, Consts: uintConsts("rows", "dim", "vocab", "copies", "wfmt"), Formatted: []string{"table"}},
	{Name: "rmsnorm", Block: 200, Consts: joinConsts(uintConsts("rows", "dim", "group"), boolConsts("zero_centred")), Args: floatArgs("rmsnorm", "eps")},
	{Name: "matmul", Block: 300, Consts: joinConsts(uintConsts("rows", "n", "k", "wfmt"), []FamilyConst{{Name: "fold", Type: ConstUInt, Optional: true, Default: 1}}),
		Formatted: []string{"w"}},
	{Name: "residual_add", Block: 400, Consts: uintConsts("rows", "dim")},
	{Name: "swiglu", Block: 500, Consts: uintConsts("rows", "dim")},
	{Name: "copy_last_row", Block: 600, Consts: uintConsts("rows", "dim")},
	{Name: "copy_rows", Block: 700, Consts: uintConsts("rows", "dim")},
	{Name: "concat", Block: 800, Consts: uintConsts("rows", "a", "b")},
	{Name: "stream_add", Block: 900, Consts: uintConsts("rows", "hidden", "streams")},
	{Name: "gdn_conv", Block: 1000, Consts: joinConsts(gdnConsts, uintConsts("kernel"))},
	{Name: "gdn_gates", Block: 1100, Consts: gdnConsts},
	{Name: "gdn_rule", Block: 1200, Consts: gdnConsts},
	{Name: "gdn_norm_gate", Block: 1300, Consts: joinConsts(gdnConsts, boolConsts("gate_sigmoid")), Args: floatArgs("gdn_norm_gate", "eps")},
	{Name: "attn_prep", Block: 1400, Consts: attnConsts, Args: floatArgs("attn_prep", "eps", "rope_theta")},
	{Name: "attention", Block: 1500, Consts: joinConsts(attnConsts, boolConsts("sparse"), uintConsts("ratio", "top_k")),
		Types: map[string]string{"sel": "uint", "count": "uint"}},
	{Name: "router", Block: 1600, Consts: joinConsts(uintConsts("rows", "experts", "top_k"), boolConsts("norm_topk"),
		[]FamilyConst{{Name: "moce", Type: ConstBool, Optional: true}, {Name: "protect", Type: ConstUInt, Optional: true}, {Name: "max_rank", Type: ConstUInt, Optional: true}}),
		Types: map[string]string{"ids": "uint", "resident": "uint"}, Args: floatArgs("router", "lambda"), ArgsOptional: true},
	{Name: "moe_gate_up", Block: 1700, Consts: moeConsts, Types: smapTypes, Formatted: []string{"experts"}},
	{Name: "moe_down", Block: 1800, Consts: moeConsts, Types: smapTypes, Formatted: []string{"experts"}},
	{Name: "moe_combine", Block: 1900, Consts: joinConsts(uintConsts("rows", "dim"), boolConsts("shared", "add"))},
	{Name: "hc_act", Block: 2000, Consts: uintConsts("rows", "dim", "streams")},
	{Name: "hc_mix", Block: 2100, Consts: uintConsts("rows", "hidden", "streams")},
	{Name: "hc_inject", Block: 2200, Consts: uintConsts("rows", "hidden", "streams")},
	{Name: "ple_gate", Block: 2300, Consts: uintConsts("rows", "hidden", "streams")},
	{Name: "ple_conv", Block: 2400, Consts: uintConsts("rows", "dim", "kernel", "dilation")},
	{Name: "index_prep", Block: 2500, Consts: indexConsts, Args: floatArgs("index_prep", "eps", "rope_theta")},
	{Name: "index_pool", Block: 2600, Consts: indexConsts, Args: floatArgs("index_pool", "eps", "rope_theta")},
	{Name: "index_select", Block: 2700, Consts: indexConsts, Types: map[string]string{"sel": "uint", "count": "uint"}},
}

// Families returns the kernel catalog in block order.
func Families() []*Family { return catalog }

// FamilyByName returns the catalog entry of a kernel family.
func FamilyByName(name string) (*Family, error) {
	for _, f := range catalog {
		if f.Name == name {
			return f, nil
		}
	}
	return nil, fmt.Errorf("kernel family %q is not in the catalog (gen/catalog.go)", name)
}

// elemType is the MSL element type of binding name.
func (f *Family) elemType(name string) string {
	if name == "params" {
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
