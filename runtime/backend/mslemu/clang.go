package mslemu

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// sources are what the emulator compiles with every model's kernels: emu/
// (its metal_stdlib, the lane emulator runtime.cpp, the sanitizer driver
// driver.cpp) and check/metal_stdlib, the type check's stand-in header that
// emu/metal_stdlib includes and defines.
//
//go:embed emu/metal_stdlib emu/*.cpp check/metal_stdlib
var sources embed.FS

// Headers are the headers kernels.metal compiles against for the CPU, by
// the name it includes them with (metal_stdlib, and the stand-in
// strata_check_metal_stdlib it includes), for a build outside Emulator
// (the generator's decoder tests).
func Headers() (map[string][]byte, error) {
	out := map[string][]byte{}
	for name, embedded := range map[string]string{"metal_stdlib": "emu/metal_stdlib", "strata_check_metal_stdlib": "check/metal_stdlib"} {
		b, err := fs.ReadFile(sources, embedded)
		if err != nil {
			return nil, fmt.Errorf("mslemu: %w", err)
		}
		out[name] = b
	}
	return out, nil
}

// ErrNoClang means no clang was found to build or type-check MSL with.
var ErrNoClang = errors.New("no clang on PATH (apt-get install clang; or set STRATA_CLANG)")

// Clang finds the clang that builds the emulator and type-checks MSL (and
// that runtime/backend/cuda's clang check runs): $STRATA_CLANG, else clang, clang-19
// or clang-14 on PATH.
func Clang() (string, error) {
	if p := os.Getenv("STRATA_CLANG"); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("STRATA_CLANG=%s: %w", p, err)
		}
		return path, nil
	}
	for _, name := range []string{"clang", "clang-19", "clang-14"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoClang
}

// CheckFlags are the clang flags of the type check: C++ for OpenCL (so
// device, threadgroup and constant are distinct, enforced address spaces),
// none of OpenCL's own headers or built-ins, no double precision, and every
// warning an error.
var CheckFlags = []string{
	"--target=spir", "-x", "cl", "-cl-std=clc++2021", "-cl-no-stdinc", "-nostdinc",
	"-Xclang", "-cl-ext=-cl_khr_fp64,-__opencl_c_fp64",
	"-fsyntax-only", "-Werror", "-Wall", "-ferror-limit=50", "-fno-color-diagnostics",
}

// TypeCheck runs clang -fsyntax-only over MSL source src (reported as name)
// against the metal_stdlib stand-in (check/metal_stdlib), which declares
// only what the generator may emit. It returns ErrNoClang when clang is
// missing, and clang's diagnostics when the source does not pass.
func TypeCheck(name string, src []byte) error {
	clang, err := Clang()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "strata-msl-check-")
	if err != nil {
		return fmt.Errorf("type-checking %s: %w", name, err)
	}
	defer os.RemoveAll(dir)
	header, err := fs.ReadFile(sources, "check/metal_stdlib")
	if err != nil {
		return fmt.Errorf("type-checking %s: %w", name, err)
	}
	inc := filepath.Join(dir, "include")
	if err := os.Mkdir(inc, 0o755); err != nil {
		return fmt.Errorf("type-checking %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(inc, "metal_stdlib"), header, 0o644); err != nil {
		return fmt.Errorf("type-checking %s: %w", name, err)
	}
	file := filepath.Join(dir, filepath.Base(name))
	if err := os.WriteFile(file, src, 0o644); err != nil {
		return fmt.Errorf("type-checking %s: %w", name, err)
	}
	args := append(append([]string{}, CheckFlags...), "-isystem", inc, file)
	cmd := exec.Command(clang, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("clang rejects %s: %w\n%s", name, err, bytes.ReplaceAll(out.Bytes(), []byte(dir+"/"), nil))
	}
	return nil
}
