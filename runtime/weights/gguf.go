package weights

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/arch"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/pack"
)

// GGUF reads our roles back from a qwen3next or qwen4exp GGUF file: through
// the name maps of runtime/format/gguf (qwen3next: both GDN forms, fused or split
// experts and attention; qwen4exp: value heads in llama.cpp's tiled order),
// the inverse value transforms (exact, from strata.exact metadata, when
// strata wrote the file), rows as the file stores them (zero-padded rows
// included). A tensor stored in the format asked for is copied; any other
// decodable format is converted through float32. With a pack (UsePack),
// routed experts come from the .experts file, one positioned read per
// expert. It serves the n-gram table of a qwen4exp file row by row from the
// mapping (NgramTable), so the file must stay open while the model runs. It
// is not safe for concurrent use.
type GGUF struct {
	f        *gguf.File
	cfg      *models.Config
	roles    func(role string) (gguf.RoleMap, error) // the architecture's name map
	pack     *pack.Reader
	resolved map[string]*ggufRole
	// noRequant (WithFileFormats): Read refuses to quantize a tensor again.
	noRequant bool
	// splitGDN: a qwen3next file whose GDN input projections are attn_qkv
	// and attn_gate (not the legacy grouped ssm_in)
	splitGDN bool
	// the last pack entry read, since gate, up and down share one
	entry struct {
		block, expert int
		data          []byte
	}
}

// ggufRole is a role resolved against the file.
type ggufRole struct {
	spec    models.TensorSpec
	tr      gguf.Transform
	tensor  string // the whole-role tensor, when there is one
	slices  int    // leading slices (experts) of a stacked role, else 1
	rowsPer int    // role rows per slice
	segs    []ggufSegment
	cols    []gguf.ColRun // each row's columns in the tensor's order (nil: the role's)
	exact   []float32     // the role's values from strata.exact metadata
}

// ggufSegment moves rows [trow, trow+rows) of each slice of tensor ti to role
// rows [rrow, rrow+rows) of the same slice.
type ggufSegment struct {
	ti               gguf.TensorInfo
	src              quant.RowLayout // how the tensor stores its rows
	tRowsPer         int             // tensor rows per slice
	trow, rrow, rows int
}

// ConfigOf reads the model config strata embeds in the files it writes.
func ConfigOf(f *gguf.File) (*models.Config, error) {
	v, ok := f.Value(gguf.KeyConfig)
	if !ok {
		return nil, fmt.Errorf("gguf %s has no %s metadata, which strata convert and strata synth write: convert the checkpoint with strata convert, or pass its model config (strata.GGUFOptions.Config)", f.Path, gguf.KeyConfig)
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("gguf %s: metadata %s is a %T, want a string (a model.toml)", f.Path, gguf.KeyConfig, v)
	}
	return models.Parse([]byte(s), f.Path+" (metadata "+gguf.KeyConfig+")")
}

// NewGGUF returns a reader of f for the model cfg, after checking the file's
// architecture and hyperparameters against cfg. Call Check before loading to
// see every problem with the tensors at once.
func NewGGUF(f *gguf.File, cfg *models.Config) (*GGUF, error) {
	g := &GGUF{f: f, cfg: cfg, resolved: map[string]*ggufRole{}}
	g.entry.block = -1
	ar, err := arch.ByModelType(cfg.Architecture.ModelType)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: %w", f.Path, err)
	}
	if err := ar.Check(f, cfg); err != nil {
		return nil, err
	}
	names := ar.Names(cfg, f)
	g.roles, g.splitGDN = names.Role, names.SplitGDN
	return g, nil
}

// ConfigFromMetadata builds the model config of a GGUF without
// strata.config (a llama.cpp file) from its metadata: arch.ConfigOf, under
// the name runtime/load's tests call it by.
func ConfigFromMetadata(f *gguf.File) (*models.Config, error) { return arch.ConfigOf(f) }

// UsePack reads routed experts from p instead of the GGUF's tensors. p must
// have been opened against the same file (pack.Open checks the tie).
func (g *GGUF) UsePack(p *pack.Reader) { g.pack = p }

// Check resolves every spec against the file (presence, shape, type, codec)
// and returns all problems joined.
func (g *GGUF) Check(specs []models.TensorSpec) error {
	var errs []error
	for _, s := range specs {
		if s.Host() {
			if _, err := g.NgramTable(s); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if _, err := g.resolve(s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// resolve maps a role to its tensors and checks them.
func (g *GGUF) resolve(spec models.TensorSpec) (*ggufRole, error) {
	if r, ok := g.resolved[spec.Name]; ok && slices.Equal(r.spec.Shape, spec.Shape) {
		return r, nil
	}
	m, err := g.roles(spec.Name)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: %w", g.f.Path, err)
	}
	if len(spec.Shape) == 0 || spec.Shape[len(spec.Shape)-1] <= 0 {
		return nil, fmt.Errorf("role %s: shape %v has no rows", spec.Name, spec.Shape)
	}
	r := &ggufRole{spec: spec, tr: m.Transform, tensor: m.Tensor, slices: 1, rowsPer: spec.Rows()}
	if len(spec.Shape) == 3 {
		r.slices = spec.Shape[0]
		r.rowsPer = spec.Rows() / max(r.slices, 1)
	}
	runs := m.Runs
	if m.Tensor != "" {
		runs = []gguf.RowRun{{Tensor: m.Tensor, Rows: r.rowsPer}}
	}
	cols := spec.Shape[len(spec.Shape)-1]
	for _, run := range runs {
		seg, err := g.segment(spec, r.slices, cols, run, m.Tensor != "")
		if err != nil {
			return nil, err
		}
		r.segs = append(r.segs, seg)
	}
	if m.Cols != nil {
		if err := checkCols(m.Cols, cols, len(spec.Shape) == 3 || m.Tensor == ""); err != nil {
			return nil, fmt.Errorf("gguf %s: tensor %s (role %s): %w", g.f.Path, m.Tensor, spec.Name, err)
		}
		r.cols = m.Cols
	}
	if m.Transform != gguf.Same {
		if err := g.transformed(r); err != nil {
			return nil, err
		}
	}
	g.resolved[spec.Name] = r
	return r, nil
}

// Mapping is the mapped file (see gguf.File.Mapping).
func (g *GGUF) Mapping() []byte { return g.f.Mapping() }

// Mapped reports where in Mapping a whole (unstacked) role lies when the
// file's bytes are exactly what Read would write for format: one tensor,
// no value transform or column reordering, stored in format with the same
// row layout. The engine then uses it in place instead of copying it.
func (g *GGUF) Mapped(spec models.TensorSpec, format string) (offset, size int64, ok bool) {
	if g.f.Mapping() == nil || len(spec.Shape) == 3 || spec.Host() {
		return 0, 0, false
	}
	f, err := quant.Lookup(format)
	if err != nil {
		return 0, 0, false
	}
	r, err := g.resolve(spec)
	if err != nil || r.tr != gguf.Same || r.cols != nil || len(r.segs) != 1 {
		return 0, 0, false
	}
	rl, err := rowLayout(spec, f)
	if err != nil {
		return 0, 0, false
	}
	seg := r.segs[0]
	size = int64(r.rowsPer) * int64(rl.RowBytes())
	if seg.src != rl || seg.trow != 0 || seg.rrow != 0 || seg.rows != r.rowsPer || seg.ti.Size != size {
		return 0, 0, false
	}
	return g.f.DataOffset + seg.ti.Offset, size, true
}

// segment checks one source tensor of a role.
func (g *GGUF) segment(spec models.TensorSpec, nSlices, cols int, run gguf.RowRun, whole bool) (ggufSegment, error) {
	ti, ok := g.tensorInfo(run.Tensor)
	if !ok {
		return ggufSegment{}, fmt.Errorf("gguf %s has no tensor %s (role %s)", g.f.Path, run.Tensor, spec.Name)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("gguf %s: tensor %s (role %s, shape %v): %s", g.f.Path, ti.Name, spec.Name, spec.Shape, fmt.Sprintf(format, args...))
	}
	f, err := quant.ByCode(ti.Type.Code)
	if err != nil {
		return ggufSegment{}, fmt.Errorf("gguf %s: tensor %s is ggml type %s (%d), which strata cannot decode (role %s; it reads %s)", g.f.Path, ti.Name, ti.Type.Name, ti.Type.Code, spec.Name, strings.Join(quant.Names(), ", "))
	}
	stored := int(ti.Dims[0])
	if stored != cols {
		// A padded tensor: whole blocks of its format, its real length recorded.
		n, err := g.f.Uint(gguf.KeyRowLengthPrefix + ti.Name)
		if err != nil || int(n) != cols || stored < cols || stored%f.BlockElems != 0 || stored-cols >= f.BlockElems {
			return ggufSegment{}, bad("rows of %d elements, the model's are %d (and no %s%s = %d recording zero padding to whole %s blocks)", stored, cols, gguf.KeyRowLengthPrefix, ti.Name, cols, f.Name)
		}
	}
	seg := ggufSegment{ti: ti, src: quant.RowLayout{Format: f, Len: cols, Stored: stored}, trow: run.TensorRow, rrow: run.RoleRow, rows: run.Rows}
	switch {
	case len(spec.Shape) == 3:
		if len(ti.Dims) != 3 || int(ti.Dims[2]) != nSlices {
			return ggufSegment{}, bad("dims %v, expected [%d, rows, %d] (stacked experts)", ti.Dims, stored, nSlices)
		}
		seg.tRowsPer = int(ti.Dims[1])
	default:
		seg.tRowsPer = int(ti.Elements() / int64(stored))
	}
	if whole && !sameShape(ti.Dims[1:], spec.Shape[:len(spec.Shape)-1]) {
		return ggufSegment{}, bad("dims %v, expected %v (the role's shape, innermost first)", ti.Dims, reversed(spec.Shape))
	}
	if seg.trow < 0 || seg.trow+seg.rows > seg.tRowsPer {
		return ggufSegment{}, bad("rows [%d, %d) of the role lie outside its %d rows", seg.trow, seg.trow+seg.rows, seg.tRowsPer)
	}
	return seg, nil
}

// sameShape compares GGUF dims (innermost first) with a torch shape's leading
// dims (outermost first), ignoring outer dims of 1 (llama.cpp loads HF's
// [1, H] shared-expert gate as {H}).
func sameShape(dims []uint64, shape []int) bool {
	for len(dims) > 0 && dims[len(dims)-1] == 1 {
		dims = dims[:len(dims)-1]
	}
	for len(shape) > 0 && shape[0] == 1 {
		shape = shape[1:]
	}
	if len(dims) != len(shape) {
		return false
	}
	for i, d := range dims {
		if int(d) != shape[len(shape)-1-i] {
			return false
		}
	}
	return true
}

func reversed(shape []int) []int {
	out := slices.Clone(shape)
	slices.Reverse(out)
	return out
}

// transformed prepares a role stored with a value transform (+1, −exp):
// float data only, and the exact values when strata recorded them and they
// still match the tensor.
func (g *GGUF) transformed(r *ggufRole) error {
	seg := r.segs[0]
	if len(r.segs) != 1 || seg.src.Format.BlockElems != 1 || seg.src.Padded() {
		return fmt.Errorf("gguf %s: tensor %s (role %s) holds transformed values (%s) and must be a float tensor, not %s", g.f.Path, seg.ti.Name, r.spec.Name, r.tr, seg.src.Format.Name)
	}
	arr, err := g.f.Array(gguf.KeyExactPrefix + seg.ti.Name)
	if err != nil {
		return nil // a file strata did not write: invert the transform
	}
	v, ok := arr.Values.([]float32)
	if !ok || len(v) != r.spec.Elements() {
		return fmt.Errorf("gguf %s: metadata %s%s holds %d %s values, want %d float32", g.f.Path, gguf.KeyExactPrefix, seg.ti.Name, arr.Len(), arr.Elem, r.spec.Elements())
	}
	// The recorded values must give the tensor's bytes exactly.
	t, _ := g.f.Tensor(seg.ti.Name)
	want := make([]float32, len(v))
	for i, x := range v {
		want[i] = r.tr.ToGGUF(x)
	}
	want = permuteRows(r.cols, want, r.spec.Shape[len(r.spec.Shape)-1], false)
	b := make([]byte, seg.src.Format.Bytes(len(want)))
	seg.src.Format.Encode(want, b)
	if !bytes.Equal(b, t.Data) {
		return nil // edited since strata wrote it: the tensor wins
	}
	r.exact = v
	return nil
}

func (g *GGUF) tensorInfo(name string) (gguf.TensorInfo, bool) {
	t, ok := g.f.Tensor(name)
	return t.TensorInfo, ok
}

// Read writes the tensor for spec.Name into dst in storage format format, as
// weights.HF.Read does: index −1 for the whole role, ≥ 0 for one slice of a
// stacked role; rows zero-padded to whole blocks when they are not.
func (g *GGUF) Read(spec models.TensorSpec, index int, format string, dst []byte) error {
	f, err := quant.Lookup(format)
	if err != nil {
		return fmt.Errorf("role %s: %w", spec.Name, err)
	}
	r, err := g.resolve(spec)
	if err != nil {
		return err
	}
	rl, err := rowLayout(spec, f)
	if err != nil {
		return err
	}
	first, n := 0, r.slices
	switch {
	case index >= 0 && index < r.slices && len(spec.Shape) == 3:
		first, n = index, 1
	case index != -1:
		return fmt.Errorf("role %s: index %d out of range [0,%d) of shape %v", spec.Name, index, r.slices, spec.Shape)
	}
	rb := rl.RowBytes()
	if want := n * r.rowsPer * rb; len(dst) != want {
		return fmt.Errorf("role %s: destination has %d bytes, want %d for %d rows of %d stored as %s", spec.Name, len(dst), want, n*r.rowsPer, rl.Len, describe(rl))
	}
	if r.tr != gguf.Same {
		return g.readTransformed(r, rl, dst)
	}
	if r.cols != nil {
		return g.readCols(r, rl, dst)
	}
	for k := 0; k < n; k++ {
		s := first + k
		for _, seg := range r.segs {
			src, err := g.segmentBytes(r, seg, s)
			if err != nil {
				return err
			}
			out := dst[(k*r.rowsPer+seg.rrow)*rb : (k*r.rowsPer+seg.rrow+seg.rows)*rb]
			if seg.src == rl {
				copy(out, src)
				continue
			}
			if err := g.requantizes(spec, seg, rl); err != nil {
				return err
			}
			if err := TranscodeRows(src, seg.src, out, rl, seg.rows, nil); err != nil {
				return fmt.Errorf("gguf %s: tensor %s (role %s): %w", g.f.Path, seg.ti.Name, spec.Name, err)
			}
		}
	}
	return nil
}

// segmentBytes returns the source rows of a segment for slice s: from the
// pack for routed experts when one is in use, else from the mapping.
func (g *GGUF) segmentBytes(r *ggufRole, seg ggufSegment, s int) ([]byte, error) {
	srb := seg.src.RowBytes()
	if g.pack != nil && len(r.spec.Shape) == 3 {
		if block, ok := gguf.BlockOf(seg.ti.Name); ok {
			if parts, ok := g.pack.Parts(block); ok {
				for _, p := range parts {
					if p.Tensor == seg.ti.Name && p.Row == seg.trow && p.Rows == seg.rows {
						entry, err := g.packEntry(block, s)
						if err != nil {
							return nil, err
						}
						return entry[p.Offset : p.Offset+p.Length], nil
					}
				}
			}
			return nil, fmt.Errorf("pack %s has no part for rows [%d, %d) of %s (role %s)", g.pack.Path(), seg.trow, seg.trow+seg.rows, seg.ti.Name, r.spec.Name)
		}
	}
	t, ok := g.f.Tensor(seg.ti.Name)
	if !ok {
		return nil, fmt.Errorf("gguf %s: tensor %s is gone (file closed?)", g.f.Path, seg.ti.Name)
	}
	start := (s*seg.tRowsPer + seg.trow) * srb
	return t.Data[start : start+seg.rows*srb], nil
}

// packEntry reads one expert's entry (one positioned read) and checks it.
func (g *GGUF) packEntry(block, expert int) ([]byte, error) {
	if g.entry.block == block && g.entry.expert == expert {
		return g.entry.data, nil
	}
	e, err := g.pack.Entry(block, expert)
	if err != nil {
		return nil, err
	}
	if cap(g.entry.data) < e.Length {
		g.entry.data = make([]byte, e.Length)
	}
	data := g.entry.data[:e.Length]
	if err := g.pack.ReadExpert(block, expert, 0, data); err != nil {
		return nil, err
	}
	if err := g.pack.Verify(block, expert, data); err != nil {
		g.entry.block = -1
		return nil, err
	}
	g.entry.block, g.entry.expert, g.entry.data = block, expert, data
	return data, nil
}

// readTransformed reads a role stored with a value transform.
func (g *GGUF) readTransformed(r *ggufRole, rl quant.RowLayout, dst []byte) error {
	v := r.exact
	if v == nil {
		seg := r.segs[0]
		t, _ := g.f.Tensor(seg.ti.Name)
		v = make([]float32, r.spec.Elements())
		seg.src.Format.Decode(t.Data, v)
		v = permuteRows(r.cols, v, r.spec.Shape[len(r.spec.Shape)-1], true)
		for i, x := range v {
			v[i] = r.tr.FromGGUF(x)
		}
	}
	if rl.Format.BlockElems == 1 {
		rl.Format.Encode(v, dst)
		return nil
	}
	if err := g.requantizes(r.spec, r.segs[0], rl); err != nil {
		return err
	}
	f32 := quant.RowLayout{Format: mustFormat("f32"), Len: rl.Len, Stored: rl.Len}
	b := make([]byte, 4*len(v))
	f32.Format.Encode(v, b)
	return TranscodeRows(b, f32, dst, rl, len(v)/rl.Len, nil)
}

// readCols reads a role whose tensor holds each row's columns in another
// order (qwen4exp's tiled value heads): block by block when the runs are
// whole blocks of a tensor already stored as asked, else through float32 (a
// quantized row whose blocks straddle runs is quantized again).
func (g *GGUF) readCols(r *ggufRole, rl quant.RowLayout, dst []byte) error {
	seg := r.segs[0]
	t, ok := g.f.Tensor(seg.ti.Name)
	if !ok {
		return fmt.Errorf("gguf %s: tensor %s is gone (file closed?)", g.f.Path, seg.ti.Name)
	}
	rows, srb, rb := r.rowsPer, seg.src.RowBytes(), rl.RowBytes()
	f := rl.Format
	aligned := seg.src == rl && !rl.Padded()
	for _, c := range r.cols {
		aligned = aligned && c.TensorCol%f.BlockElems == 0 && c.RoleCol%f.BlockElems == 0 && c.Cols%f.BlockElems == 0
	}
	if aligned {
		for row := 0; row < rows; row++ {
			src, out := t.Data[row*srb:(row+1)*srb], dst[row*rb:(row+1)*rb]
			for _, c := range r.cols {
				copy(out[f.Bytes(c.RoleCol):f.Bytes(c.RoleCol+c.Cols)], src[f.Bytes(c.TensorCol):f.Bytes(c.TensorCol+c.Cols)])
			}
		}
		return nil
	}
	if err := g.requantizes(r.spec, seg, rl); err != nil {
		return err
	}
	parallelRows(rows, max(1, convChunk/max(rl.Stored, 1)), func(lo, hi int) {
		a, b := make([]float32, rl.Len), make([]float32, rl.Len)
		for row := lo; row < hi; row++ {
			seg.src.DecodeRow(t.Data[row*srb:(row+1)*srb], a)
			for _, c := range r.cols {
				copy(b[c.RoleCol:c.RoleCol+c.Cols], a[c.TensorCol:c.TensorCol+c.Cols])
			}
			rl.EncodeRow(b, dst[row*rb:(row+1)*rb])
		}
	})
	return nil
}

// checkCols checks that column runs cover rows of n columns exactly, both in
// the tensor and in the role, on a whole-tensor 1-D or 2-D role.
func checkCols(cols []gguf.ColRun, n int, unsupported bool) error {
	if unsupported {
		return errors.New("column runs apply only to a whole 1-D or 2-D tensor")
	}
	seenT, seenR := make([]bool, n), make([]bool, n)
	for _, c := range cols {
		if c.Cols <= 0 || c.TensorCol < 0 || c.RoleCol < 0 || c.TensorCol+c.Cols > n || c.RoleCol+c.Cols > n {
			return fmt.Errorf("column run %+v lies outside rows of %d", c, n)
		}
		for i := 0; i < c.Cols; i++ {
			if seenT[c.TensorCol+i] || seenR[c.RoleCol+i] {
				return fmt.Errorf("column run %+v overlaps another", c)
			}
			seenT[c.TensorCol+i], seenR[c.RoleCol+i] = true, true
		}
	}
	if slices.Contains(seenR, false) {
		return fmt.Errorf("column runs do not cover rows of %d", n)
	}
	return nil
}

// permuteRows moves the columns of each row of n values in v: from the
// tensor's order to the role's (toRole), or back. nil cols: v itself.
func permuteRows(cols []gguf.ColRun, v []float32, n int, toRole bool) []float32 {
	if cols == nil {
		return v
	}
	out := make([]float32, len(v))
	for row := 0; row+n <= len(v); row += n {
		for _, c := range cols {
			t, r := row+c.TensorCol, row+c.RoleCol
			if toRole {
				copy(out[r:r+c.Cols], v[t:t+c.Cols])
			} else {
				copy(out[t:t+c.Cols], v[r:r+c.Cols])
			}
		}
	}
	return out
}

// NgramTable serves the n-gram table of a PLE role row by row from the
// mapping (per_layer_token_embd.weight, in any decodable format, rows padded
// when the file records their real length).
func (g *GGUF) NgramTable(spec models.TensorSpec) (*NgramTable, error) {
	if len(spec.Shape) != 2 || spec.Shape[0] <= 0 || spec.Shape[1] <= 0 {
		return nil, fmt.Errorf("gguf %s: role %s of shape %v is not an n-gram table", g.f.Path, spec.Name, spec.Shape)
	}
	m, err := g.roles(spec.Name)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: %w", g.f.Path, err)
	}
	if m.Tensor == "" || m.Cols != nil || m.Transform != gguf.Same {
		return nil, fmt.Errorf("gguf %s: role %s is not stored as one plain tensor", g.f.Path, spec.Name)
	}
	seg, err := g.segment(spec, 1, spec.Shape[1], gguf.RowRun{Tensor: m.Tensor, Rows: spec.Shape[0]}, true)
	if err != nil {
		return nil, err
	}
	t, ok := g.f.Tensor(m.Tensor)
	if !ok {
		return nil, fmt.Errorf("gguf %s: tensor %s is gone (file closed?)", g.f.Path, m.Tensor)
	}
	return NewNgramTable(spec.Name, spec.Shape[1], seg.src, [][]byte{t.Data}, []string{g.f.Path + ": tensor " + m.Tensor})
}

// CheckNgram compares the hash parameters the file records for its n-gram
// table (qwen4exp.ple.layer_multipliers, head_vocab_sizes, head_offsets) with
// the ones computed from the config. Every qwen4exp file with a table records
// them, so their absence is an error too.
func (g *GGUF) CheckNgram(layer int, multipliers, primes, offsets []int64) error {
	names := arch.NgramKeys
	var got [3][]int64
	for i, n := range names {
		v, err := g.f.Ints(n)
		if err != nil {
			return fmt.Errorf("%w (the n-gram table's hash parameters, layer %d)", err, layer)
		}
		got[i] = v
	}
	return compareNgram("gguf "+g.f.Path, layer, names, got, [3][]int64{multipliers, primes, offsets})
}

func mustFormat(name string) *quant.Format {
	f, err := quant.Lookup(name)
	if err != nil {
		panic(err)
	}
	return f
}

// ExpertLayers lists what `strata pack` packs from a qwen3next GGUF: for
// every block with routed experts (trunk and MTP), the gate, up and down
// rows of each expert, from split or fused (ffn_gate_up_exps) tensors.
func ExpertLayers(f *gguf.File) ([]pack.Layer, error) {
	blocks := map[int]bool{}
	for _, t := range f.Tensors {
		if b, ok := gguf.BlockOf(t.Name); ok && strings.HasSuffix(t.Name, "_exps.weight") {
			blocks[b] = true
		}
	}
	var order []int
	for b := range blocks {
		order = append(order, b)
	}
	sort.Ints(order)
	var out []pack.Layer
	for _, b := range order {
		name := func(s string) string { return fmt.Sprintf("blk.%d.%s", b, s) }
		down, ok := f.Tensor(name("ffn_down_exps.weight"))
		if !ok {
			return nil, fmt.Errorf("gguf %s: block %d has expert tensors but no %s", f.Path, b, name("ffn_down_exps.weight"))
		}
		l := pack.Layer{Block: b}
		if gu, ok := f.Tensor(name("ffn_gate_up_exps.weight")); ok && len(gu.Dims) == 3 {
			half := int(gu.Dims[1]) / 2
			l.Parts = []pack.Part{{Tensor: gu.Name, Rows: half}, {Tensor: gu.Name, Row: half, Rows: half}}
		} else {
			gate, okG := f.Tensor(name("ffn_gate_exps.weight"))
			up, okU := f.Tensor(name("ffn_up_exps.weight"))
			if !okG || !okU || len(gate.Dims) != 3 || len(up.Dims) != 3 {
				return nil, fmt.Errorf("gguf %s: block %d lacks stacked %s and %s (or a fused %s)", f.Path, b, name("ffn_gate_exps.weight"), name("ffn_up_exps.weight"), name("ffn_gate_up_exps.weight"))
			}
			l.Parts = []pack.Part{{Tensor: gate.Name, Rows: int(gate.Dims[1])}, {Tensor: up.Name, Rows: int(up.Dims[1])}}
		}
		if len(down.Dims) != 3 {
			return nil, fmt.Errorf("gguf %s: tensor %s has dims %v, expected stacked experts", f.Path, down.Name, down.Dims)
		}
		l.Parts = append(l.Parts, pack.Part{Tensor: down.Name, Rows: int(down.Dims[1])})
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("gguf %s has no routed-expert tensors (blk.N.ffn_*_exps.weight) to pack", f.Path)
	}
	return out, nil
}
