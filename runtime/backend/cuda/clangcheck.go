package cuda

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/strata-llm/strata/artifact"
)

// ClangCheck type-checks the CUDA rendering of m's kernels.metal with the
// CUDA mode of clang (a path: mslemu.Clang finds one), device side, no CUDA
// toolkit (prelude/clang_check.h declares what NVRTC provides): one
// translation unit with a wrapper for every kernel, each specialized with
// the constants of its first pipeline. It returns how many kernels the unit wraps. NVRTC on a
// GPU machine remains the compiler of record.
func ClangCheck(m *artifact.Artifact, clang string) (int, error) {
	src, err := m.Source()
	if err != nil {
		return 0, err
	}
	prelude, err := Prelude()
	if err != nil {
		return 0, err
	}
	shim, err := fs.ReadFile(preludeFS, "prelude/clang_check.h")
	if err != nil {
		return 0, fmt.Errorf("cuda: %w", err)
	}
	firsts, err := firstPipelines(m)
	if err != nil {
		return 0, err
	}
	values := map[int]int64{}
	var kernels []*artifact.Kernel
	for _, f := range firsts {
		kernels = append(kernels, f.kernel)
		for _, v := range pipelineOf(f.pipeline, f.kernel).Values {
			if _, ok := values[v.Index]; !ok {
				values[v.Index] = v.Value
			}
		}
	}
	var unit bytes.Buffer
	fmt.Fprintf(&unit, "// Type check of model %s's CUDA rendering, written by runtime/backend/cuda.\n", m.Name)
	if err := writeConstants(&unit, m, values); err != nil {
		return 0, err
	}
	unit.WriteString("#include \"metal_stdlib\"\n__STRATA_DEFAULT_DEVICE_BEGIN\n#include \"kernels.metal\"\n__STRATA_DEFAULT_DEVICE_END\n\n")
	for i, k := range kernels {
		if err := writeWrapper(&unit, m, k, fmt.Sprintf("%s_%d", entryName, i), 256); err != nil {
			return 0, err
		}
	}
	dir, err := os.MkdirTemp("", "strata-cuda-check-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	for name, b := range map[string][]byte{"unit.cu": unit.Bytes(), "kernels.metal": SharedDeclarations(src), "metal_stdlib": prelude, "clang_check.h": shim} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return 0, err
		}
	}
	cmd := exec.Command(clang, "-x", "cuda", "--cuda-device-only", "--cuda-gpu-arch=sm_80", "-nocudainc", "-nocudalib",
		"-std=c++17", "-fsyntax-only", "-fno-color-diagnostics", "-ferror-limit=20", "-Wno-unknown-cuda-version",
		"-I", dir, "-include", "clang_check.h", "unit.cu")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("cuda: clang's CUDA check of model %s: %w\n%s", m.Name, err, strings.ReplaceAll(out.String(), dir+"/", ""))
	}
	return len(kernels), nil
}
