package mslemu

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/strata-llm/strata/artifact"
)

// harness writes the C++-for-OpenCL file that is compiled in place of
// kernels.metal: it includes it, then defines the two entry points the lane
// emulator calls, both from the model's metadata (never by reading the MSL):
//
//   - __strata_emu_call(kernel, bufs, ids) calls kernel number `kernel` (its
//     index in m.Kernels) with the buffer at every slot cast to the type its
//     metadata gives, the argument struct at its slot, and the thread's
//     built-in inputs;
//   - __strata_emu_constants(kernel, n, index, value) assigns the function
//     constants of a dispatch: every one is first reset (0xdeadbeef, false;
//     an optional one's derived constant to its default), then the given
//     ones are set.
//
// A signature or constant that disagrees with the metadata fails to compile;
// the metadata itself is checked first (artifact.Artifact.Check).
// (The MSL keywords kernel, device, constant, thread and threadgroup are
// macros here: the harness names nothing after them.)
func harness(m *artifact.Artifact) ([]byte, error) {
	if err := m.Check(); err != nil { // the names and types written below
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Lane-emulator harness of model %s, written by runtime/backend/mslemu from its kernel metadata.\n", m.Name)
	b.WriteString("#include \"kernels.metal\"\n\n")
	b.WriteString("extern \"C\" void __strata_emu_call(int which, void *const *b, const __strata_emu_ids *t) {\n")
	b.WriteString("    const uint3 tgpig = uint3(t->tgpig[0], t->tgpig[1], t->tgpig[2]);\n")
	b.WriteString("    switch (which) {\n")
	for i, k := range m.Kernels {
		var args []string
		for slot, buf := range k.Buffers {
			qual := ""
			if buf.Space == artifact.SpaceDevice && !buf.Write {
				qual = "const "
			}
			args = append(args, fmt.Sprintf("(%s %s%s *)b[%d]", buf.Space, qual, buf.Type, slot))
		}
		if k.ArgsSlot >= 0 {
			args = append(args, fmt.Sprintf("__strata_args_ref<%d>{b[%d]}", k.ArgsSize, k.ArgsSlot))
		}
		args = append(args, "tgpig", "t->tid", "t->ntg", "t->lane", "t->sg", "t->nsg")
		fmt.Fprintf(&b, "    case %d:\n        %s(%s);\n        return;\n", i, k.Name, strings.Join(args, ", "))
	}
	b.WriteString("    }\n}\n\n")

	b.WriteString("extern \"C\" void __strata_emu_constants(int which, int n, const int *index, const uint *value) {\n")
	b.WriteString("    (void)which;\n")
	var cases bytes.Buffer
	for _, c := range m.Constants {
		ident, derived := constIdents(c)
		poison, val := "0xdeadbeefu", "value[i]"
		if c.Type == artifact.Bool {
			poison, val = "false", "value[i] != 0u"
		}
		fmt.Fprintf(&b, "    %s = %s;\n", ident, poison)
		fmt.Fprintf(&cases, "        case %d:\n            %s = %s;\n", c.Index, ident, val)
		if c.Optional {
			def := fmt.Sprintf("%du", c.Default)
			if c.Type == artifact.Bool {
				def = fmt.Sprint(c.Default != 0)
			}
			fmt.Fprintf(&b, "    %s = %s;\n", derived, def)
			fmt.Fprintf(&cases, "            %s = %s;\n", derived, val)
		}
		cases.WriteString("            break;\n")
	}
	b.WriteString("    for (int i = 0; i < n; i++) {\n        switch (index[i]) {\n")
	b.Write(cases.Bytes())
	b.WriteString("        }\n    }\n}\n")
	return b.Bytes(), nil
}

// constIdents are the MSL names the generator gives a function constant
// (graph.Family.ConstIdents).
func constIdents(c artifact.FunctionConstant) (ident, derived string) {
	return c.Family.ConstIdents(c.Name)
}
