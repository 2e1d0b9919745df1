package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/strata-llm/strata/runtime/format/planes"
)

// File names of an HF checkpoint directory.
const (
	SingleFileName = "model.safetensors"
	IndexFileName  = "model.safetensors.index.json"
)

// Checkpoint is an HF checkpoint directory: one model.safetensors, or shards
// listed by model.safetensors.index.json, seen as one set of tensors.
type Checkpoint struct {
	dir    string
	files  []*File
	byName map[string]*File
}

// OpenDir opens the checkpoint in dir. Like transformers, it prefers a single
// model.safetensors over an index when both exist.
func OpenDir(dir string) (*Checkpoint, error) {
	single := filepath.Join(dir, SingleFileName)
	if _, err := os.Stat(single); err == nil || planes.Encoded(single) {
		f, err := Open(single)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
		}
		ck := &Checkpoint{dir: dir, files: []*File{f}, byName: make(map[string]*File, len(f.tensors))}
		for name := range f.tensors {
			ck.byName[name] = f
		}
		return ck, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}

	indexPath := filepath.Join(dir, IndexFileName)
	raw, err := os.ReadFile(indexPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint %s: neither %s nor %s found", dir, SingleFileName, IndexFileName)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		return nil, fmt.Errorf("checkpoint %s: bad %s: %w", dir, IndexFileName, err)
	}
	if len(index.WeightMap) == 0 {
		return nil, fmt.Errorf("checkpoint %s: %s has an empty weight_map", dir, IndexFileName)
	}
	return openShards(dir, index.WeightMap)
}

func openShards(dir string, weightMap map[string]string) (*Checkpoint, error) {
	// Shards in sorted order, so errors and Close are deterministic.
	var shards []string
	seen := map[string]bool{}
	for _, shard := range weightMap {
		if !seen[shard] {
			seen[shard] = true
			shards = append(shards, shard)
		}
	}
	sort.Strings(shards)

	ck := &Checkpoint{dir: dir, byName: make(map[string]*File, len(weightMap))}
	byShard := map[string]*File{}
	for _, shard := range shards {
		// The index is data from the checkpoint: keep shard paths inside dir.
		if !filepath.IsLocal(shard) {
			ck.Close()
			return nil, fmt.Errorf("checkpoint %s: %s names shard %q outside the directory", dir, IndexFileName, shard)
		}
		p := filepath.Join(dir, shard)
		if _, err := os.Stat(p); err != nil && !planes.Encoded(p) {
			ck.Close()
			return nil, fmt.Errorf("checkpoint %s: shard %s listed in %s is missing: %w", dir, shard, IndexFileName, err)
		}
		f, err := Open(p)
		if err != nil {
			ck.Close()
			return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
		}
		ck.files = append(ck.files, f)
		byShard[shard] = f
	}

	var missing []string
	for name, shard := range weightMap {
		f := byShard[shard]
		if _, ok := f.tensors[name]; !ok {
			missing = append(missing, fmt.Sprintf("%s (in %s)", name, shard))
			continue
		}
		ck.byName[name] = f
	}
	if len(missing) > 0 {
		ck.Close()
		sort.Strings(missing)
		return nil, fmt.Errorf("checkpoint %s: %s lists %d tensor(s) absent from their shard: %s", dir, IndexFileName, len(missing), strings.Join(missing, ", "))
	}
	return ck, nil
}

// Dir is the checkpoint directory as given to OpenDir.
func (c *Checkpoint) Dir() string { return c.dir }

// Tensor returns the named tensor from whichever shard holds it.
func (c *Checkpoint) Tensor(name string) (Tensor, bool) {
	f, ok := c.byName[name]
	if !ok {
		return Tensor{}, false
	}
	return f.Tensor(name)
}

// FileOf returns the path of the file holding name, for error messages, or
// "" when the checkpoint has no such tensor.
func (c *Checkpoint) FileOf(name string) string {
	if f, ok := c.byName[name]; ok {
		return f.path
	}
	return ""
}

// Names lists every tensor of the checkpoint, sorted.
func (c *Checkpoint) Names() []string {
	out := make([]string, 0, len(c.byName))
	for n := range c.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Metadata returns the __metadata__ of the first file (shards normally carry
// the same map).
func (c *Checkpoint) Metadata() map[string]string {
	if len(c.files) == 0 {
		return nil
	}
	return c.files[0].metadata
}

// Close unmaps every file; tensors from the checkpoint must not be used after.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.files {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.files, c.byName = nil, nil
	return errors.Join(errs...)
}
