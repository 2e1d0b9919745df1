package quant

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/strata-llm/strata/internal/asmcheck"
)

// TestAct8AssemblyNotStale: act8_amd64.s and its declarations equal what
// the generator in asm/act8 writes now.
func TestAct8AssemblyNotStale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the generator (-short)")
	}
	asmcheck.NotStale(t, "asm/act8", "act8_amd64.s", "act8_amd64_decl.go", "quant")
}

// TestAssemblyAVX2Registers: the generated kernels use only the sixteen
// vector registers AVX2 has. avo's allocator reaches for X16–X31 when a
// kernel needs more (the eight-row kernels come close), which the Go
// assembler then encodes as AVX-512 (EVEX): an illegal instruction on an
// AVX2 machine rather than an error here.
func TestAssemblyAVX2Registers(t *testing.T) {
	high := regexp.MustCompile(`\b[XYZ](1[6-9]|2[0-9]|3[01])\b|\bZ([0-9]|1[0-5])\b|\bK[0-7]\b`)
	for _, name := range []string{"act8_amd64.s", "dot_amd64.s"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if high.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d: %s: a register beyond AVX2's sixteen", name, i+1, strings.TrimSpace(line))
			}
		}
	}
}
