package mslemu

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/strata-llm/strata/artifact"
)

// Sanitizers a build can carry (Options.Sanitize).
const (
	NoSanitizer = ""
	Thread      = "thread"
	Address     = "address"
)

// ThreadgroupMemoryLimit is what an Apple GPU gives one threadgroup; a kernel
// whose threadgroup variables need more is refused.
const ThreadgroupMemoryLimit = 32 << 10

// kernelFlags compile the harness (kernels.metal included) as the type check
// does, C++ for OpenCL, but for the host CPU: double and OpenCL's headers
// off; half on; program-scope globals (the function constants) allowed.
var kernelFlags = []string{
	"-x", "cl", "-cl-std=clc++2021", "-cl-no-stdinc", "-nostdinc",
	"-Xclang", "-cl-ext=-cl_khr_fp64,-__opencl_c_fp64,+cl_khr_fp16,+__opencl_c_program_scope_global_variables",
	"-fPIC", "-fvisibility=hidden", "-ffp-contract=off", "-fno-color-diagnostics", "-ferror-limit=20",
}

var runtimeFlags = []string{"-x", "c++", "-std=c++17", "-fPIC", "-fvisibility=hidden", "-fno-exceptions", "-fno-rtti", "-fno-color-diagnostics"}

// built is a compiled library (or sanitizer executable) with what was
// learned from its symbol table.
type built struct {
	path string
	// tgmem[kernel] lists the kernel's threadgroup variables: offset from
	// strata_emu_anchor and size.
	tgmem [][][2]uint64
}

var buildMu sync.Mutex

// build compiles the model's kernels with the lane emulator: a shared
// library, or with a sanitizer an executable (emu/driver.cpp). Results are
// kept in the cache directory under a hash of every input, so a model is
// compiled once per machine.
func build(m *artifact.Artifact, opt Options) (*built, error) {
	if runtime.GOOS != "linux" {
		// ELF symbols, memfds and the stack switch's assembly are Linux's;
		// on a Mac the metal backend runs the MSL itself.
		return nil, fmt.Errorf("mslemu runs on Linux, not %s", runtime.GOOS)
	}
	switch opt.Sanitize {
	case NoSanitizer, Thread, Address:
	default:
		return nil, fmt.Errorf("mslemu: unknown sanitizer %q (want %q or %q)", opt.Sanitize, Thread, Address)
	}
	clang, err := compiler(opt)
	if err != nil {
		return nil, err
	}
	version, err := compilerVersion(clang)
	if err != nil {
		return nil, err
	}
	src, err := m.Source()
	if err != nil {
		return nil, err
	}
	h, err := harness(m)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"kernels.metal": src, "harness.cl": h}
	for name, embedded := range map[string]string{
		"include/metal_stdlib":              "emu/metal_stdlib",
		"include/strata_check_metal_stdlib": "check/metal_stdlib",
		"runtime.cpp":                       "emu/runtime.cpp",
		"driver.cpp":                        "emu/driver.cpp",
	} {
		b, err := fs.ReadFile(sources, embedded)
		if err != nil {
			return nil, fmt.Errorf("mslemu: %w", err)
		}
		files[name] = b
	}
	kflags, rflags, lflags := buildFlags(opt.Sanitize)
	sum := sha256.New()
	fmt.Fprintf(sum, "mslemu 1\n%s\n%s\n%q %q %q\n", version, opt.Sanitize, kflags, rflags, lflags)
	for _, name := range []string{"kernels.metal", "harness.cl", "include/metal_stdlib", "include/strata_check_metal_stdlib", "runtime.cpp", "driver.cpp"} {
		fmt.Fprintf(sum, "%s %d\n", name, len(files[name]))
		sum.Write(files[name])
	}
	key := hex.EncodeToString(sum.Sum(nil))[:24]
	out := "libemu.so"
	if opt.Sanitize != NoSanitizer {
		out = "emu-" + opt.Sanitize
	}
	cache, err := cacheDir(opt)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, m.Name)+"-"+key)
	path := filepath.Join(dir, out)

	buildMu.Lock()
	defer buildMu.Unlock()
	if _, err := os.Stat(path); err != nil {
		if err := compile(clang, cache, dir, files, opt.Sanitize, kflags, rflags, lflags); err != nil {
			return nil, fmt.Errorf("mslemu: building the kernels of model %s: %w", m.Name, err)
		}
	}
	b := &built{path: path}
	// Sanitizer builds pad every variable with redzones: Metal's limit is
	// checked on the plain build.
	if err := b.readSymbols(m, opt.Sanitize == NoSanitizer); err != nil {
		return nil, fmt.Errorf("mslemu: %s: %w", path, err)
	}
	return b, nil
}

// buildFlags are the kernel, runtime and link flags of a build.
func buildFlags(sanitize string) (kernel, rt, link []string) {
	kernel = append([]string{}, kernelFlags...)
	rt = append([]string{}, runtimeFlags...)
	switch sanitize {
	case NoSanitizer:
		kernel = append(kernel, "-O2")
		rt = append(rt, "-O2")
		link = []string{"-shared", "-Wl,-z,defs", "-Wl,-Bsymbolic"}
	case Thread:
		// The runtime itself stays uninstrumented: its hand-over of values
		// between fibers is ordered by the scheduler, which TSan cannot see.
		kernel = append(kernel, "-O1", "-g", "-fsanitize=thread")
		rt = append(rt, "-O1", "-g", "-DSTRATA_EMU_TSAN")
		link = []string{"-fsanitize=thread"}
	case Address:
		kernel = append(kernel, "-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer")
		rt = append(rt, "-O1", "-g", "-DSTRATA_EMU_ASAN")
		link = []string{"-fsanitize=address"}
	}
	return kernel, rt, link
}

// compile builds into a fresh directory beside dir, then renames it into
// place, so a concurrent or interrupted build never leaves half a library.
func compile(clang, cache, dir string, files map[string][]byte, sanitize string, kflags, rflags, lflags []string) error {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(cache, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for name, b := range files {
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	// Debug info (sanitizer reports) names the sources where they stay.
	prefix := "-fdebug-prefix-map=" + tmp + "=" + dir
	run := func(args ...string) error {
		if args[0] == "-x" {
			args = append([]string{prefix}, args...)
		}
		cmd := exec.Command(clang, args...)
		cmd.Dir = tmp
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s %s: %w\n%s", filepath.Base(clang), strings.Join(args, " "), err, bytes.ReplaceAll(out.Bytes(), []byte(tmp+"/"), nil))
		}
		return nil
	}
	objs := []string{"kernels.o", "runtime.o"}
	jobs := [][]string{
		append(append([]string{}, kflags...), "-isystem", "include", "-c", "harness.cl", "-o", "kernels.o"),
	}
	// The runtime is the same for every model: a plain build takes its
	// object from the cache (sanitizer builds carry debug paths of their
	// own directory, so they compile it).
	rtJob := append(append([]string{}, rflags...), "-c", "runtime.cpp", "-o", "runtime.o")
	if sanitize != NoSanitizer || !cachedObject(clang, cache, tmp, "runtime.o", files["runtime.cpp"], rtJob) {
		jobs = append(jobs, rtJob)
	}
	out := "libemu.so"
	if sanitize != NoSanitizer {
		objs = append(objs, "driver.o")
		jobs = append(jobs, append(append([]string{}, rflags...), "-c", "driver.cpp", "-o", "driver.o"))
		out = "emu-" + sanitize
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, args := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = run(args...)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if sanitize == NoSanitizer {
		storeObject(clang, cache, tmp, "runtime.o", files["runtime.cpp"], rtJob)
	}
	link := append(append(append([]string{}, lflags...), "-o", out), objs...)
	if err := run(append(link, "-lm")...); err != nil {
		return err
	}
	// The sources stay: sanitizer reports point into kernels.metal.
	for _, o := range objs {
		os.Remove(filepath.Join(tmp, o))
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, out)); statErr == nil {
			return nil // another process built it first
		}
		return err
	}
	return nil
}

// readSymbols finds every kernel's threadgroup variables: in C++ for OpenCL
// a kernel's threadgroup variable is a function-local static, _ZZ<kernel>E…
func (b *built) readSymbols(m *artifact.Artifact, checkLimit bool) error {
	f, err := elf.Open(b.path)
	if err != nil {
		return err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return err
	}
	anchor := -1
	for i, s := range syms {
		if s.Name == "strata_emu_anchor" {
			anchor = i
		}
	}
	if anchor < 0 {
		return errors.New("no strata_emu_anchor in the symbol table")
	}
	base := syms[anchor].Value
	b.tgmem = make([][][2]uint64, len(m.Kernels))
	for k, kern := range m.Kernels {
		prefix := fmt.Sprintf("_ZZ%d%sE", len(kern.Name), kern.Name)
		total := uint64(0)
		for _, s := range syms {
			if !strings.HasPrefix(s.Name, prefix) || elf.ST_TYPE(s.Info) != elf.STT_OBJECT || s.Section >= elf.SectionIndex(len(f.Sections)) {
				continue
			}
			if sec := f.Sections[s.Section]; sec.Type != elf.SHT_NOBITS {
				continue // a constant with an initializer, not threadgroup memory
			}
			b.tgmem[k] = append(b.tgmem[k], [2]uint64{s.Value - base, s.Size})
			total += s.Size
		}
		if len(b.tgmem[k]) > maxTGMem {
			return fmt.Errorf("kernel %s has %d threadgroup variables, the emulator takes %d", kern.Name, len(b.tgmem[k]), maxTGMem)
		}
		if checkLimit && total > ThreadgroupMemoryLimit {
			return fmt.Errorf("kernel %s needs %d bytes of threadgroup memory, more than the %d an Apple GPU gives a threadgroup", kern.Name, total, ThreadgroupMemoryLimit)
		}
	}
	return nil
}

// compiler is the clang that builds the emulator: Options.Compiler, else
// Clang's.
func compiler(opt Options) (string, error) {
	if opt.Compiler != "" {
		p, err := exec.LookPath(opt.Compiler)
		if err != nil {
			return "", fmt.Errorf("mslemu: compiler: %w", err)
		}
		return p, nil
	}
	p, err := Clang()
	if err != nil {
		return "", fmt.Errorf("mslemu: %w", err)
	}
	return p, nil
}

var versions sync.Map // compiler path → version text

func compilerVersion(clang string) (string, error) {
	if v, ok := versions.Load(clang); ok {
		return v.(string), nil
	}
	out, err := exec.Command(clang, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("mslemu: %s --version: %w", clang, err)
	}
	v := clang + "\n" + string(out)
	versions.Store(clang, v)
	return v, nil
}

// cacheDir is Options.CacheDir, else $STRATA_MSLEMU_CACHE, else strata/mslemu
// in the user's cache directory (the temporary directory without one).
func cacheDir(opt Options) (string, error) {
	if opt.CacheDir != "" {
		return opt.CacheDir, nil
	}
	if d := os.Getenv("STRATA_MSLEMU_CACHE"); d != "" {
		return d, nil
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "strata", "mslemu"), nil
	}
	return filepath.Join(os.TempDir(), "strata-mslemu"), nil
}

// objectKey names a compiled object by everything that made it: the
// compiler and its version, the arguments and the source.
func objectKey(clang string, src []byte, args []string) string {
	v, _ := compilerVersion(clang)
	sum := sha256.New()
	fmt.Fprintf(sum, "mslemu object 1\n%s\n%q\n", v, args)
	sum.Write(src)
	return hex.EncodeToString(sum.Sum(nil))[:24]
}

// cachedObject copies a cached object into dir as name; false when there
// is none yet.
func cachedObject(clang, cache, dir, name string, src []byte, args []string) bool {
	b, err := os.ReadFile(filepath.Join(cache, "objects", objectKey(clang, src, args)+".o"))
	if err != nil {
		return false
	}
	return os.WriteFile(filepath.Join(dir, name), b, 0o644) == nil
}

// storeObject keeps dir's object name for later builds (best effort: a
// failure only costs a compile next time).
func storeObject(clang, cache, dir, name string, src []byte, args []string) {
	objDir := filepath.Join(cache, "objects")
	dst := filepath.Join(objDir, objectKey(clang, src, args)+".o")
	if _, err := os.Stat(dst); err == nil {
		return
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil || os.MkdirAll(objDir, 0o755) != nil {
		return
	}
	tmp, err := os.CreateTemp(objDir, ".obj-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), dst) != nil {
		os.Remove(tmp.Name())
	}
}
