package cuda

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
)

// nvrtc is libnvrtc, loaded with purego.
type nvrtc struct {
	path    string
	version func(major, minor *int32) int32
	create  func(prog *uintptr, src, name *byte, n int32, headers, names **byte) int32
	compile func(prog uintptr, n int32, opts **byte) int32
	logSize func(prog uintptr, n *uintptr) int32
	log     func(prog uintptr, dst *byte) int32
	binSize func(prog uintptr, n *uintptr) int32
	bin     func(prog uintptr, dst *byte) int32
	destroy func(prog *uintptr) int32
}

// nvrtcNames are where libnvrtc is looked for, after $STRATA_NVRTC.
var nvrtcNames = []string{
	"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2",
	"/usr/local/cuda/lib64/libnvrtc.so", "/usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so",
}

var (
	nvrtcOnce sync.Once
	nvrtcLib  *nvrtc
	nvrtcErr  error
)

// loadNVRTC opens libnvrtc once per process.
func loadNVRTC() (*nvrtc, error) {
	nvrtcOnce.Do(func() { nvrtcLib, nvrtcErr = openNVRTC() })
	return nvrtcLib, nvrtcErr
}

func openNVRTC() (*nvrtc, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("cuda: NVRTC is loaded on Linux only, not %s", runtime.GOOS)
	}
	names := libNames("STRATA_NVRTC", nvrtcNames)
	h, name, err := dlopenFirst(names)
	if err != nil {
		return nil, fmt.Errorf("cuda: no libnvrtc loads (tried %s; STRATA_NVRTC names one; first: %w)", strings.Join(names, ", "), err)
	}
	n := &nvrtc{path: name}
	for sym, fn := range map[string]any{
		"nvrtcVersion": &n.version, "nvrtcCreateProgram": &n.create, "nvrtcCompileProgram": &n.compile,
		"nvrtcGetProgramLogSize": &n.logSize, "nvrtcGetProgramLog": &n.log,
		"nvrtcGetCUBINSize": &n.binSize, "nvrtcGetCUBIN": &n.bin, "nvrtcDestroyProgram": &n.destroy,
	} {
		if _, err := purego.Dlsym(h, sym); err != nil {
			return nil, fmt.Errorf("cuda: %s has no %s: %w", name, sym, err)
		}
		purego.RegisterLibFunc(fn, h, sym)
	}
	return n, nil
}

// Version is NVRTC's major and minor version.
func (n *nvrtc) Version() (int, int) {
	var a, b int32
	n.version(&a, &b)
	return int(a), int(b)
}

// cstr is s NUL-terminated.
func cstr(s string) *byte {
	b := append([]byte(s), 0)
	return &b[0]
}

// Compile builds src (with the named headers) to a CUBIN with opts. The log
// comes back in the error on failure.
func (n *nvrtc) Compile(src []byte, name string, headers map[string][]byte, opts []string) (cubin []byte, log string, err error) {
	var hs, hn []*byte
	for k, v := range headers {
		hn = append(hn, cstr(k))
		hs = append(hs, cstr(string(v)))
	}
	var hsp, hnp **byte
	if len(hs) > 0 {
		hsp, hnp = &hs[0], &hn[0]
	}
	var prog uintptr
	if r := n.create(&prog, cstr(string(src)), cstr(name), int32(len(hs)), hsp, hnp); r != 0 {
		return nil, "", fmt.Errorf("nvrtcCreateProgram: error %d", r)
	}
	defer n.destroy(&prog)
	var op []*byte
	for _, o := range opts {
		op = append(op, cstr(o))
	}
	r := n.compile(prog, int32(len(op)), &op[0])
	runtime.KeepAlive(hs)
	runtime.KeepAlive(hn)
	runtime.KeepAlive(op)
	var size uintptr
	if n.logSize(prog, &size) == 0 && size > 1 {
		buf := make([]byte, size)
		n.log(prog, &buf[0])
		log = string(buf[:size-1])
	}
	if r != 0 {
		return nil, log, fmt.Errorf("nvrtc: compiling %s (error %d):\n%s", name, r, log)
	}
	if r := n.binSize(prog, &size); r != 0 || size == 0 {
		return nil, log, fmt.Errorf("nvrtcGetCUBINSize: error %d (size %d)", r, size)
	}
	cubin = make([]byte, size)
	if r := n.bin(prog, &cubin[0]); r != 0 {
		return nil, log, fmt.Errorf("nvrtcGetCUBIN: error %d", r)
	}
	return cubin, log, nil
}

// compileOptions are NVRTC's flags for a pipeline on compute capability
// major.minor: real machine code for the chip, unannotated functions on the
// device, and Metal's safe math (IEEE division and square root, denormals
// kept, no contraction into FMAs, no fast-math intrinsics).
func compileOptions(major, minor int) []string {
	return []string{
		fmt.Sprintf("--gpu-architecture=sm_%d%d", major, minor),
		"--std=c++17", "--device-as-default-execution-space",
		"--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false",
		"-w",
	}
}
