package strata

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math"
	"os"
	"time"

	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/artifact"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/cpu"
	"github.com/strata-llm/strata/runtime/metal"
	"github.com/strata-llm/strata/runtime/mslemu"
)

// Backends HFOptions.Backend names.
const (
	BackendCPU    = "cpu"    // the pure-Go kernels (runtime/cpu)
	BackendMSLEmu = "mslemu" // the generated MSL, run on the CPU (runtime/mslemu)
	BackendMetal  = "metal"  // the generated MSL on the GPU (runtime/metal; darwin/arm64)
	// BackendMetalEmu is the Metal backend, every Objective-C call made to a
	// recording device whose "GPU" runs each encoded dispatch with the MSL
	// emulator: the backend's encoding, bindings, constants, ICB replay and
	// host points, checked end to end on any platform.
	BackendMetalEmu = "metal-emu"
)

// Backends lists the backend names, default first.
var Backends = []string{BackendCPU, BackendMSLEmu, BackendMetal, BackendMetalEmu, BackendCUDA}

// backend is the engine backend opt asks for, for the graphs of model c.
// mslemu needs the kernels of exactly these graphs (their shapes and
// constants come from the config the checkpoint was opened with), so it
// generates them in memory, as stratagen would for generated/<model>.
func (opt HFOptions) backend(c *models.Config, graphs []*graph.Graph) (backend.Backend, error) {
	switch opt.Backend {
	case "", BackendCPU:
		return cpu.Backend, nil
	case BackendMSLEmu:
		m, err := ArtifactOf(c, graphs)
		if err != nil {
			return nil, err
		}
		return mslemu.New(m, opt.MSLEmu)
	case BackendMetal, BackendMetalEmu:
		m, err := ArtifactOf(c, graphs)
		if err != nil {
			return nil, err
		}
		k, err := metal.KernelsFrom(m)
		if err != nil {
			return nil, err
		}
		var b *metal.Backend
		if opt.Backend == BackendMetal {
			b, err = metal.Open(k, opt.Metal)
		} else {
			var rec *metal.Recorder
			if rec, err = emulatedMetalDevice(m, opt.MSLEmu); err == nil {
				b, err = metal.New(rec, k, opt.Metal)
			}
		}
		if err != nil {
			return nil, err
		}
		return b.Engine(), nil
	case BackendCUDA:
		return cudaBackend(c, graphs, opt.CUDA)
	}
	return nil, fmt.Errorf("unknown backend %q (want one of %v)", opt.Backend, Backends)
}

// emulatedMetalDevice is a recording Metal device whose GPU runs each
// dispatch it reaches with the MSL emulator, under the constants, bindings
// and grid the Metal backend encoded. Its library declares each function's
// constants as Metal's reflection would, so the backend's load-time check
// runs too.
func emulatedMetalDevice(m *artifact.Model, opt mslemu.Options) (*metal.Recorder, error) {
	if opt.Sanitize != mslemu.NoSanitizer {
		return nil, fmt.Errorf("backend %s runs the kernels in process: no sanitizer (use --backend mslemu)", BackendMetalEmu)
	}
	emu, err := mslemu.New(m, opt)
	if err != nil {
		return nil, err
	}
	rec := metal.NewRecorder()
	rec.HostLimit = math.MaxInt64
	info := rec.Info()
	info.PageSize = int64(os.Getpagesize()) // the emulator's pages are the host's
	rec.SetInfo(info)
	rec.Declared = metal.DeclaredFrom(m)
	rec.Execute = func(l metal.Launch) error {
		consts := make(map[int]int64, len(l.Function.Constants))
		for _, c := range l.Function.Constants {
			consts[c.Index] = c.Value
		}
		return emu.Launch(mslemu.Launch{Kernel: l.Function.Name, Constants: consts, Slots: l.Slots, Grid: l.Grid, Threadgroup: l.Threadgroup})
	}
	return rec, nil
}

// ArtifactOf builds in memory what generated/<model>/bindings.go registers
// for graphs of model c: kernels.metal with its kernel, function-constant and
// pipeline metadata and an argument-struct encoder. Only here (and cmd/) may
// the generator meet the runtime.
func ArtifactOf(c *models.Config, graphs []*graph.Graph) (*artifact.Model, error) {
	lib, err := gen.BuildLibrary(c, graphs)
	if err != nil {
		return nil, err
	}
	src, err := lib.MSL()
	if err != nil {
		return nil, err
	}
	m := &artifact.Model{Name: c.Name, Files: oneFile{name: artifact.KernelsFile, data: src}}
	seen := map[string]bool{}
	for _, g := range graphs {
		for _, b := range g.Buffers {
			if !seen[b.Name] {
				seen[b.Name] = true
				m.Buffers = append(m.Buffers, b.Name)
			}
		}
	}
	fc := func(index int, family graph.Family, c gen.FamilyConst) artifact.FunctionConstant {
		t := artifact.UInt
		if c.Type == gen.ConstBool {
			t = artifact.Bool
		}
		return artifact.FunctionConstant{Index: index, Family: family, Name: c.Name, Type: t, Optional: c.Optional, Default: c.Default}
	}
	for i, c := range gen.GridOffsetConsts {
		m.Constants = append(m.Constants, fc(gen.GridOffsetBlock+i, "", c))
	}
	layouts := map[graph.Family]gen.StructLayout{}
	optional := map[graph.Family]bool{} // families whose struct only dispatches with scalars take
	for _, f := range lib.Families {
		for i, c := range f.Consts {
			m.Constants = append(m.Constants, fc(f.Block+i, f.Name, c))
		}
		if f.Args != nil {
			l, err := f.Args.Layout()
			if err != nil {
				return nil, err
			}
			layouts[f.Name] = l
			optional[f.Name] = f.ArgsOptional
		}
	}
	for _, k := range lib.Kernels {
		ak := artifact.Kernel{Name: k.Name, Family: k.Family.Name, Format: k.Format, ArgsSlot: k.ArgsSlot, Constants: k.Consts}
		if k.ArgsSlot >= 0 {
			ak.ArgsSize = layouts[k.Family.Name].Size
		}
		for _, b := range k.Buffers {
			ak.Buffers = append(ak.Buffers, artifact.Buffer{Slot: b.Slot, Name: b.Name, Type: b.Type, Space: b.Space, Write: b.Write})
		}
		m.Kernels = append(m.Kernels, ak)
	}
	for _, p := range lib.Pipelines {
		ap := artifact.Pipeline{Kernel: p.Kernel}
		for _, c := range p.Consts {
			ap.Values = append(ap.Values, artifact.ConstValue{Index: c.Index, Value: c.Value})
		}
		m.Pipelines = append(m.Pipelines, ap)
	}
	for _, mk := range lib.Missing {
		m.Missing = append(m.Missing, mk.Kernel+": "+mk.Reason)
	}
	m.EncodeArgs = func(family graph.Family, scalars []graph.Scalar) ([]byte, error) {
		l, ok := layouts[family]
		if !ok || optional[family] && len(scalars) == 0 {
			if len(scalars) == 0 {
				return nil, nil
			}
			return nil, fmt.Errorf("model %s: kernel family %q has no argument struct", c.Name, family)
		}
		if len(scalars) != len(l.Fields) {
			return nil, fmt.Errorf("model %s: %s has %d scalars, its argument struct %d fields", c.Name, family, len(scalars), len(l.Fields))
		}
		out := make([]byte, l.Size)
		for i, f := range l.Fields {
			if f.Name != scalars[i].Name || f.Type != gen.ArgFloat {
				return nil, fmt.Errorf("model %s: %s scalar %d is %s, its argument struct has %s %s", c.Name, family, i, scalars[i].Name, f.Type, f.Name)
			}
			binary.LittleEndian.PutUint32(out[f.Offset:], math.Float32bits(float32(scalars[i].Value)))
		}
		return out, nil
	}
	return m, nil
}

// oneFile is an fs.FS holding one file.
type oneFile struct {
	name string
	data []byte
}

func (o oneFile) Open(name string) (fs.File, error) {
	if name != o.name {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &openFile{Reader: bytes.NewReader(o.data), info: fileInfo{o}}, nil
}

type openFile struct {
	*bytes.Reader
	info fileInfo
}

func (f *openFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *openFile) Close() error               { return nil }

type fileInfo struct{ oneFile }

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return int64(len(i.data)) }
func (i fileInfo) Mode() fs.FileMode  { return 0o444 }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return false }
func (i fileInfo) Sys() any           { return nil }
