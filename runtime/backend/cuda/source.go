package cuda

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"github.com/strata-llm/strata/artifact"
)

// prelude/ holds metal_stdlib, the CUDA prelude that gives Metal's names
// CUDA meanings, and clang_check.h, what NVRTC provides declared for
// ClangCheck.
//
//go:embed prelude/metal_stdlib prelude/clang_check.h
var preludeFS embed.FS

// Prelude is the CUDA metal_stdlib kernels.metal includes (prelude/).
func Prelude() ([]byte, error) {
	b, err := fs.ReadFile(preludeFS, "prelude/metal_stdlib")
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	return b, nil
}

// SharedDeclarations is the one textual change made to kernels.metal: MSL's
// threadgroup is both an address space (in pointer types and casts, which
// CUDA lacks: the prelude defines it away) and the storage class of a
// variable (CUDA's __shared__). A threadgroup that begins a statement
// declares such a variable; every other one qualifies a pointer. Comments,
// strings and longer identifiers (threadgroup_barrier) are left alone.
func SharedDeclarations(src []byte) []byte {
	const word = "threadgroup"
	var out bytes.Buffer
	out.Grow(len(src) + 256)
	atStart := true // after ; { } or at the file's start, ignoring space and comments
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			j := bytes.IndexByte(src[i:], '\n')
			if j < 0 {
				j = len(src) - i
			}
			out.Write(src[i : i+j])
			i += j
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			j := bytes.Index(src[i+2:], []byte("*/"))
			end := len(src)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			out.Write(src[i:end])
			i = end
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(src))
			out.Write(src[i:j])
			i = j
			atStart = false
		case c == '#' && atStart:
			// A preprocessor line keeps the statement start after it.
			j := bytes.IndexByte(src[i:], '\n')
			if j < 0 {
				j = len(src) - i
			}
			out.Write(src[i : i+j])
			i += j
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			out.WriteByte(c)
			i++
		case isIdentByte(c):
			j := i
			for j < len(src) && isIdentByte(src[j]) {
				j++
			}
			if atStart && string(src[i:j]) == word {
				out.WriteString("__shared__")
			} else {
				out.Write(src[i:j])
			}
			atStart = false
			i = j
		default:
			out.WriteByte(c)
			atStart = c == ';' || c == '{' || c == '}'
			i++
		}
	}
	return out.Bytes()
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// pipelineSource is the CUDA translation unit of one pipeline: the values of
// every function constant kernels.metal declares (the pipeline's, a poison
// value for an unset required one, an optional one marked undefined), then
// kernels.metal (which includes the prelude), then the __global__ wrapper
// of kernel k. maxThreads bounds the threadgroups it is launched with
// (__launch_bounds__).
func pipelineSource(m *artifact.Artifact, k *artifact.Kernel, values map[int]int64, maxThreads int) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Pipeline %s of model %s, written by runtime/backend/cuda from its kernel metadata.\n", k.Name, m.Name)
	if err := writeConstants(&b, m, values); err != nil {
		return nil, err
	}
	b.WriteString("#include \"kernels.metal\"\n\n")
	if err := writeWrapper(&b, m, k, entryName, maxThreads); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeConstants defines every function constant's value macro and its
// defined flag.
func writeConstants(b *bytes.Buffer, m *artifact.Artifact, values map[int]int64) error {
	for _, c := range m.Constants {
		ident, _ := constIdent(c)
		v, given := values[c.Index]
		val := "0xdeadbeefu"
		if c.Type == artifact.Bool {
			val = "false"
		}
		switch {
		case given && !c.Fits(v):
			return fmt.Errorf("function constant %s = %d does not fit a %s", c.Name, v, c.Type)
		case given && c.Type == artifact.Bool:
			val = fmt.Sprint(v == 1)
		case given:
			val = fmt.Sprintf("%du", v)
		}
		def := 0
		if given {
			def = 1
		}
		fmt.Fprintf(b, "#define __STRATA_FC_%d %s\n#define __STRATA_FCDEF_%s %d\n", c.Index, val, ident, def)
	}
	return nil
}

// writeWrapper writes kernel k's __global__ wrapper, from its metadata: a
// parameter per buffer slot, typed as the metadata says (const where the
// kernel only reads), and the argument struct by value.
func writeWrapper(b *bytes.Buffer, m *artifact.Artifact, k *artifact.Kernel, name string, maxThreads int) error {
	var params, args []string
	if err := k.Check(); err != nil { // the names and types written below
		return fmt.Errorf("model %s: %w", m.Name, err)
	}
	for slot, buf := range k.Buffers {
		qual := ""
		if !buf.Write {
			qual = "const "
		}
		params = append(params, fmt.Sprintf("%s%s *b%d", qual, buf.Type, slot))
		args = append(args, fmt.Sprintf("b%d", slot))
	}
	if k.ArgsSlot >= 0 {
		params = append(params, fmt.Sprintf("__strata_args<%d> a", k.ArgsSize))
		args = append(args, fmt.Sprintf("__strata_args_ref<%d>{a.b}", k.ArgsSize))
	}
	args = append(args, "__STRATA_BUILTINS")
	if maxThreads < 1 || maxThreads > 1024 {
		return fmt.Errorf("kernel %s: %d threads per threadgroup", k.Name, maxThreads)
	}
	fmt.Fprintf(b, "extern \"C\" __global__ void __launch_bounds__(%d) %s(%s) {\n    %s(%s);\n}\n", maxThreads, name, strings.Join(params, ", "), k.Name, strings.Join(args, ", "))
	return nil
}

// entryName is every pipeline's __global__ function.
const entryName = "strata_entry"

// constIdent is the MSL name of a function constant (graph.Family.ConstIdents).
func constIdent(c artifact.FunctionConstant) (ident, derived string) {
	return c.Family.ConstIdents(c.Name)
}

// CompileAll compiles the first and the last pipeline of every kernel of m
// (as m.Pipelines lists them: the smallest window's and the largest's, so a
// matmul's scalar decode path and its matrix-unit prefill path both reach
// ptxas) with NVRTC for compute capability major.minor, no GPU needed, and
// returns how many kernels it compiled. Where libnvrtc is installed this
// checks the prelude against a model's kernels.metal.
func CompileAll(m *artifact.Artifact, major, minor int) (int, error) {
	if err := m.Check(); err != nil {
		return 0, err
	}
	n, err := loadNVRTC()
	if err != nil {
		return 0, err
	}
	src, err := m.Source()
	if err != nil {
		return 0, err
	}
	prelude, err := Prelude()
	if err != nil {
		return 0, err
	}
	headers := map[string][]byte{"kernels.metal": SharedDeclarations(src), "metal_stdlib": prelude}
	firsts, err := firstPipelines(m)
	if err != nil {
		return 0, err
	}
	last := map[string]artifact.Pipeline{}
	for _, p := range m.Pipelines {
		last[p.Kernel] = p
	}
	for _, f := range firsts {
		k := f.kernel
		ps := []artifact.Pipeline{f.pipeline}
		if l := last[k.Name]; l.Key() != f.pipeline.Key() {
			ps = append(ps, l)
		}
		for _, p := range ps {
			values := map[int]int64{}
			for _, v := range pipelineOf(p, k).Values {
				values[v.Index] = v.Value
			}
			unit, err := pipelineSource(m, k, values, 256)
			if err != nil {
				return 0, err
			}
			bin, _, err := n.Compile(unit, k.Name+".cu", headers, compileOptions(major, minor))
			if err != nil {
				return 0, fmt.Errorf("model %s, pipeline %s: %w", m.Name, p.Key(), err)
			}
			if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
				return 0, fmt.Errorf("model %s, kernel %s: NVRTC gave no ELF cubin", m.Name, k.Name)
			}
		}
	}
	return len(firsts), nil
}

// kernelPipeline is a kernel and the first of m.Pipelines that uses it.
type kernelPipeline struct {
	kernel   *artifact.Kernel
	pipeline artifact.Pipeline
}

// firstPipelines is every kernel m's pipelines use, in their order, each
// with its first pipeline.
func firstPipelines(m *artifact.Artifact) ([]kernelPipeline, error) {
	var out []kernelPipeline
	seen := map[string]bool{}
	for _, p := range m.Pipelines {
		if seen[p.Kernel] {
			continue
		}
		seen[p.Kernel] = true
		k, ok := m.Kernel(p.Kernel)
		if !ok {
			return nil, fmt.Errorf("model %s: pipeline of unknown kernel %s", m.Name, p.Kernel)
		}
		out = append(out, kernelPipeline{k, p})
	}
	return out, nil
}

// NVRTCVersion is the loaded libnvrtc's version, or why none loads.
func NVRTCVersion() (major, minor int, err error) {
	n, err := loadNVRTC()
	if err != nil {
		return 0, 0, err
	}
	major, minor = n.Version()
	return major, minor, nil
}
