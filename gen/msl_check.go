package gen

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/strata-llm/strata/graph"
)

// kernelRE and fcRE match at the start of a line (linesMatching tries
// them there).
var (
	kernelRE = regexp.MustCompile(`\Akernel void (\w+)\(([^)]*(?:\)\]\][^)]*)*)\)\s*\{`)
	bufferRE = regexp.MustCompile(`\*?&?\s*(\w+)\s*\[\[buffer\((\d+)\)\]\]`)
	fcRE     = regexp.MustCompile(`\Aconstant (\w+) (\w+) \[\[function_constant\((\d+)\)\]\];`)
)

// linesMatching is what re's pattern after (?m)^ finds in text with
// FindAllStringSubmatch: re (anchored with \A, its pattern starting with
// prefix) tried at each line start that begins with prefix and is past the
// previous match. The regexp engine alone would try every position of the
// whole kernels.metal, most of a library's build under -race.
func linesMatching(text, prefix string, re *regexp.Regexp) [][]string {
	var out [][]string
	for start := 0; start < len(text); {
		rest := text[start:]
		if strings.HasPrefix(rest, prefix) {
			if loc := re.FindStringSubmatchIndex(rest); loc != nil {
				m := make([]string, len(loc)/2)
				for i := range m {
					if loc[2*i] >= 0 {
						m[i] = rest[loc[2*i]:loc[2*i+1]]
					}
				}
				out = append(out, m)
				end := start + loc[1]
				if text[end-1] == '\n' {
					start = end
					continue
				}
				start, rest = end, text[end:]
			}
		}
		nl := strings.IndexByte(rest, '\n')
		if nl < 0 {
			break
		}
		start += nl + 1
	}
	return out
}

// CheckSource checks emitted MSL against the library's metadata, since
// clang ignores Metal's attributes: every kernel is declared once, with
// exactly its buffers at their slots ([[buffer(n)]] distinct, the argument
// struct after the last binding, 31 slots at most), and every function
// constant is declared once, at its catalog index, with indices unique.
func (l *Library) CheckSource(src []byte) error {
	text := string(src)
	seen := map[string]bool{}
	for _, m := range linesMatching(text, "kernel void ", kernelRE) {
		name := m[1]
		k, ok := l.Kernel(name)
		if !ok || seen[name] {
			return fmt.Errorf("kernels.metal: kernel %s is not in the library metadata or declared twice", name)
		}
		seen[name] = true
		want := map[int]string{}
		for _, b := range k.Buffers {
			want[b.Slot] = b.Name
		}
		if k.ArgsSlot >= 0 {
			want[k.ArgsSlot] = "args"
		}
		got := map[int]string{}
		for _, b := range bufferRE.FindAllStringSubmatch(m[2], -1) {
			slot, _ := strconv.Atoi(b[2])
			if other, dup := got[slot]; dup {
				return fmt.Errorf("kernels.metal: kernel %s binds %s and %s to [[buffer(%d)]]", name, other, b[1], slot)
			}
			if slot >= graph.DefaultLimits.MaxBufferBindings {
				return fmt.Errorf("kernels.metal: kernel %s binds %s to [[buffer(%d)]], past the %d slots", name, b[1], slot, graph.DefaultLimits.MaxBufferBindings)
			}
			got[slot] = b[1]
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("kernels.metal: kernel %s binds %v, its metadata says %v", name, got, want)
		}
	}
	for _, k := range l.Kernels {
		if !seen[k.Name] {
			return fmt.Errorf("kernels.metal: kernel %s is missing", k.Name)
		}
	}
	wantFC := map[int]string{}
	for i, c := range GridOffsetConsts {
		wantFC[GridOffsetBlock+i], _ = graph.Family("").ConstIdents(c.Name)
	}
	for _, f := range l.Families {
		if f.Block%blockSize != 0 || len(f.Consts) >= blockSize {
			return fmt.Errorf("family %s: block %d must be a multiple of %d holding fewer than %d constants", f.Name, f.Block, blockSize, blockSize)
		}
		for i, c := range f.Consts {
			wantFC[f.Block+i], _ = f.Name.ConstIdents(c.Name)
		}
	}
	gotFC := map[int]string{}
	for _, m := range linesMatching(text, "constant ", fcRE) {
		idx, _ := strconv.Atoi(m[3])
		if other, dup := gotFC[idx]; dup {
			return fmt.Errorf("kernels.metal: function constants %s and %s share index %d", other, m[2], idx)
		}
		gotFC[idx] = m[2]
	}
	if fmt.Sprint(gotFC) != fmt.Sprint(wantFC) {
		return fmt.Errorf("kernels.metal declares function constants %v, the catalog says %v", gotFC, wantFC)
	}
	return nil
}

// Lines counts the lines of an emitted file.
func Lines(src []byte) int { return bytes.Count(src, []byte("\n")) }
