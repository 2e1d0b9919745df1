package artifact

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/strata-llm/strata/graph"
)

// ManifestFile is the artifact's description: everything but the kernels
// and the graphs, as deterministic JSON.
const ManifestFile = "manifest.json"

// Encode is the artifact's on-disk form, every file by name: ManifestFile,
// KernelsFile and the graphs. The bytes depend only on the artifact.
func (a *Artifact) Encode() (map[string][]byte, error) {
	m, err := a.manifest()
	if err != nil {
		return nil, fmt.Errorf("artifact of %s: %w", a.Name, err)
	}
	files := map[string][]byte{ManifestFile: m}
	for _, name := range a.fileNames() {
		b, err := fs.ReadFile(a.Files, name)
		if err != nil {
			return nil, fmt.Errorf("artifact of %s: %w", a.Name, err)
		}
		files[name] = b
	}
	return files, nil
}

// manifest is the artifact as JSON, one line per element of its lists (a
// kernel, a pipeline, a graph) and indented elsewhere: lines that diff well
// and 40% fewer bytes than indenting everything, for the checked-in tree.
func (a *Artifact) manifest() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("{")
	v := reflect.ValueOf(a).Elem()
	sep := "\n"
	for i := range v.NumField() {
		name, opt, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		f := v.Field(i)
		if name == "-" || opt == "omitempty" && (f.Kind() == reflect.Slice && f.Len() == 0 || f.IsZero()) {
			continue
		}
		fmt.Fprintf(&b, "%s\t%q: ", sep, name)
		sep = ",\n"
		if f.Kind() != reflect.Slice || f.Len() == 0 {
			e, err := json.MarshalIndent(f.Interface(), "\t", "\t")
			if err != nil {
				return nil, err
			}
			b.Write(e)
			continue
		}
		b.WriteString("[")
		for j := range f.Len() {
			e, err := json.Marshal(f.Index(j).Interface())
			if err != nil {
				return nil, err
			}
			if j > 0 {
				b.WriteString(",")
			}
			b.WriteString("\n\t\t")
			b.Write(e)
		}
		b.WriteString("\n\t]")
	}
	b.WriteString("\n}\n")
	return b.Bytes(), nil
}

// fileNames are the files Files must hold, sorted.
func (a *Artifact) fileNames() []string {
	names := []string{KernelsFile}
	for _, g := range a.Graphs {
		names = append(names, g.File)
	}
	sort.Strings(names)
	return names
}

// Load reads an artifact from fsys (a folder Write wrote, or one a
// generated/<model> package embeds): it decodes the manifest, checks that
// its key is the key of its config under this runtime's KeyOf and that its
// params header is the one this runtime writes, that the manifest is sound
// (Check), and that every file is there. Graphs are decoded, and validated
// against the manifest, when asked for.
func Load(fsys fs.FS) (*Artifact, error) {
	b, err := fs.ReadFile(fsys, ManifestFile)
	if err != nil {
		return nil, fmt.Errorf("reading the artifact: %w", err)
	}
	a := &Artifact{}
	if err := json.Unmarshal(b, a); err != nil {
		return nil, fmt.Errorf("artifact %s: %w", ManifestFile, err)
	}
	if a.Schema != Schema {
		return nil, fmt.Errorf("artifact of %s has schema %d, this runtime reads %d: generate it again", a.Name, a.Schema, Schema)
	}
	if a.Config == nil {
		return nil, fmt.Errorf("artifact of %s: %s has no config", a.Name, ManifestFile)
	}
	key, err := KeyOf(a.Config)
	if err != nil {
		return nil, fmt.Errorf("artifact of %s: %w", a.Name, err)
	}
	if key != a.Key {
		return nil, fmt.Errorf("artifact of %s: its key %s is not its config's key %s (made by another generator version?): generate it again", a.Name, ShortKey(a.Key), ShortKey(key))
	}
	for name, word := range CurrentParams() {
		if got, ok := a.Params[name]; !ok || got != word {
			return nil, fmt.Errorf("artifact of %s: params header field %s at word %d, this runtime writes it at %d: generate it again", a.Name, name, got, word)
		}
	}
	if err := a.Check(); err != nil {
		return nil, err
	}
	a.pipelineKeys = keysOf(a.Pipelines) // read by concurrent GraphVariant calls
	a.Files = fsys
	for _, name := range a.fileNames() {
		if _, err := fs.Stat(fsys, name); err != nil {
			return nil, fmt.Errorf("artifact of %s: %w", a.Name, err)
		}
	}
	return a, nil
}

// MustLoad is Load of the folder dir of fsys, for the generated packages'
// init: a broken embedded artifact is a build error of the program.
func MustLoad(fsys fs.FS, dir string) *Artifact {
	sub, err := fs.Sub(fsys, dir)
	if err == nil {
		var a *Artifact
		if a, err = Load(sub); err == nil {
			return a
		}
	}
	panic(fmt.Sprintf("artifact: loading the embedded %s: %v", dir, err))
}

// Write writes the artifact to the folder dir: into a fresh temporary
// folder beside it, renamed into place when every file is written, so dir
// never holds half an artifact. An existing dir is replaced only when it is
// an artifact (it holds a manifest).
func (a *Artifact) Write(dir string) error {
	files, err := a.Encode()
	if err != nil {
		return err
	}
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("writing the artifact: %s exists and is not a folder", dir)
		}
		if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err != nil {
			return fmt.Errorf("writing the artifact: %s exists and is not an artifact (no %s); not replacing it", dir, ManifestFile)
		}
	}
	parent, base := filepath.Split(filepath.Clean(dir))
	if parent == "" {
		parent = "."
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("writing the artifact: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".tmp-")
	if err != nil {
		return fmt.Errorf("writing the artifact: %w", err)
	}
	defer os.RemoveAll(tmp) // gone once renamed
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("writing the artifact: %w", err)
	}
	for name, b := range files {
		if err := writeSynced(filepath.Join(tmp, name), b); err != nil {
			return fmt.Errorf("writing the artifact: %w", err)
		}
	}
	old := ""
	if _, err := os.Stat(dir); err == nil {
		old = filepath.Join(parent, "."+base+".old-"+filepath.Base(tmp))
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("writing the artifact: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			_ = os.Rename(old, dir) // put the previous one back
		}
		return fmt.Errorf("writing the artifact: %w", err)
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("writing the artifact: removing the previous one: %w", err)
		}
	}
	return nil
}

func writeSynced(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// Gzip compresses a graph's JSON deterministically: a fixed header (no
// name, zero time) and the best compression, so the bytes depend only on
// the graph (the graphs shrink ~25×, which keeps generated/ small).
func Gzip(data []byte) ([]byte, error) {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// EncodeGraph is a graph's file: gzipped JSON.
func EncodeGraph(g *graph.Graph) ([]byte, error) {
	j, err := g.JSON()
	if err != nil {
		return nil, err
	}
	return Gzip(j)
}

// MapFS is an in-memory file system of plain files (no folders), for an
// artifact built in process.
type MapFS map[string][]byte

// Open opens the file called name.
func (m MapFS) Open(name string) (fs.File, error) {
	b, ok := m[name]
	if !ok || !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &memFile{Reader: bytes.NewReader(b), name: path.Base(name), size: int64(len(b))}, nil
}

type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f, nil }
func (f *memFile) Close() error               { return nil }
func (f *memFile) Name() string               { return f.name }
func (f *memFile) Size() int64                { return f.size }
func (f *memFile) Mode() fs.FileMode          { return 0o444 }
func (f *memFile) ModTime() time.Time         { return time.Time{} }
func (f *memFile) IsDir() bool                { return false }
func (f *memFile) Sys() any                   { return nil }

// DirFor is the artifact folder of a model file, where stratagen generate
// writes it and strata looks for it: FILE.artifact beside a GGUF file,
// DIR/artifact inside an HF checkpoint directory.
func DirFor(isGGUF bool, model string) string {
	if isGGUF {
		return model + ".artifact"
	}
	return filepath.Join(model, "artifact")
}
