package load

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
)

// Where an artifact came from (Loaded.ArtifactFrom), besides a folder.
const (
	FromCompiledIn = "compiled in" // registered by an imported generated/<model> package
	FromGenerate   = "generated in process"
)

// modelFile is what a model was opened from, for finding its artifact and
// naming the command that generates one.
type modelFile struct {
	flag, path string // "--hf" or "--gguf", and the path given
	beside     string // the artifact folder beside the model
	isDefault  bool   // the embedded default, unpacked to a temporary folder
}

// findArtifact returns the artifact that serves config c, and c as that
// artifact runs it. An artifact made for exactly c comes first: from the
// folders opt.Artifacts names, the folder beside the model, the artifact
// cache, the compiled-in ones, or opt.Generate. Failing that, one made for the
// same model and formats with a longer context or other window shapes
// serves too (c takes its context and windows, and opt.Note hears so): a
// run asking for a context of 512 uses the default model's 4096-token
// artifact rather than failing. When none serves, stratagen generates one
// into the cache (generateMissing); with opt.NoGenerate, or no stratagen,
// the error names the model, the key and the command to run.
func findArtifact(c *models.Config, mf modelFile, opt Options) (*artifact.Artifact, string, *models.Config, error) {
	key, err := artifact.KeyOf(c)
	if err != nil {
		return nil, "", nil, err
	}
	var seen []string // artifacts looked at that are for other configs, or unusable
	var near *artifact.Artifact
	var nearFrom string
	var nearConfig *models.Config
	consider := func(a *artifact.Artifact, from string) {
		cc, ok := serves(a, c)
		if !ok {
			return
		}
		if near == nil || cc.Runtime.ContextLength < nearConfig.Runtime.ContextLength ||
			cc.Runtime.ContextLength == nearConfig.Runtime.ContextLength && cc.Windows == c.Windows && nearConfig.Windows != c.Windows {
			near, nearFrom, nearConfig = a, from, cc
		}
	}
	look := func(dir string) *artifact.Artifact {
		a, err := artifact.Load(os.DirFS(dir))
		switch {
		case err != nil:
			seen = append(seen, fmt.Sprintf("%s (unusable: %v)", dir, err))
		case a.Key != key:
			seen = append(seen, fmt.Sprintf("%s (key %s, %s)", dir, artifact.ShortKey(a.Key), describe(a.Config)))
			consider(a, dir)
		default:
			return a
		}
		return nil
	}
	dirs := slices.Clone(opt.Artifacts)
	for _, d := range opt.Artifacts { // a folder of artifact folders
		if _, err := os.Stat(filepath.Join(d, artifact.ManifestFile)); err == nil {
			continue
		}
		entries, err := os.ReadDir(d)
		if err != nil {
			return nil, "", nil, fmt.Errorf("--artifacts %s: %w", d, err)
		}
		for _, e := range entries {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(d, e.Name()))
			}
		}
	}
	if mf.beside != "" {
		dirs = append(dirs, mf.beside)
	}
	if d := cachedArtifactDir(key, opt); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, artifact.ManifestFile)); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if a := look(d); a != nil {
			return a, d, c, nil
		}
	}
	if a, ok := artifact.ByKey(key); ok {
		return a, FromCompiledIn, c, nil
	}
	if opt.Generate != nil {
		a, err := opt.Generate(c)
		if err != nil {
			return nil, "", nil, err
		}
		return a, FromGenerate, c, nil
	}
	for _, a := range artifact.All() {
		consider(a, FromCompiledIn)
	}
	if near != nil {
		if opt.Note != nil {
			opt.Note(fmt.Sprintf("no artifact for %s with %s: running the one for %s (%s); %s makes an exact one",
				c.Name, describe(c), describe(nearConfig), nearFrom, generateCommand(mf, opt)))
		}
		return near, nearFrom, nearConfig, nil
	}
	return generateMissing(c, key, mf, opt, seen)
}

// serves reports whether artifact a, made for the same architecture,
// formats and routing as c but a context at least as long and perhaps other
// window shapes, can run c; the config it returns is c with a's context and
// windows, whose key is a's.
func serves(a *artifact.Artifact, c *models.Config) (*models.Config, bool) {
	if a.Config == nil || a.Config.Runtime.ContextLength < c.Runtime.ContextLength {
		return nil, false
	}
	cc := *c
	cc.Runtime.ContextLength = a.Config.Runtime.ContextLength
	cc.Windows = a.Config.Windows
	k, err := artifact.KeyOf(&cc)
	return &cc, err == nil && k == a.Key
}

// describe is the graph-relevant settings of c, for messages.
func describe(c *models.Config) string {
	s := fmt.Sprintf("context %d, prefill rows %d", c.Runtime.ContextLength, c.Windows.PrefillRows)
	if c.Runtime.MoCE {
		s += fmt.Sprintf(", MoCE λ %v protect %d max rank %d", c.Runtime.MoCELambda, c.Runtime.MoCEProtect, c.Runtime.MoCEMaxRank)
	}
	if c.Runtime.ReadAhead {
		s += ", read-ahead"
	}
	return s
}

// noArtifact is the error when no artifact matches: the model, its key, what
// was looked at, and the stratagen command that makes the artifact.
func noArtifact(c *models.Config, key string, mf modelFile, opt Options, seen []string) error {
	msg := fmt.Sprintf("no generated artifact for %s (key %s) with %s: run  %s", c.Name, artifact.ShortKey(key), describe(c), generateCommand(mf, opt))
	if len(seen) > 0 {
		msg += "\n(artifacts found that do not match: " + strings.Join(seen, "; ") + ")"
	}
	return errors.New(msg)
}

// generateCommand is the stratagen command that makes the artifact of the
// model mf opened with opt (for the embedded default, from its source
// folder into one --artifacts then names).
func generateCommand(mf modelFile, opt Options) string {
	path, then := mf.path, ""
	var out []string
	if mf.isDefault {
		path = "models/tiny-go"
		out = []string{"--out", "DIR"}
		then = ", then add --artifacts DIR"
	}
	return strings.Join(append(append([]string{"stratagen"}, generateArgs(mf, opt, path)...), out...), " ") + then
}

// generateArgs is the arguments of stratagen that generate the artifact of
// the model at path, opened with opt, but for --out.
func generateArgs(mf modelFile, opt Options, path string) []string {
	flags := []string{"generate", mf.flag, path}
	if opt.Context > 0 {
		flags = append(flags, "--context", fmt.Sprint(opt.Context))
	}
	if opt.PrefillRows > 0 {
		flags = append(flags, "--prefill-rows", fmt.Sprint(opt.PrefillRows))
	}
	if opt.MoCE {
		flags = append(flags, "--moce")
		if opt.MoCEMaxRank != 0 {
			flags = append(flags, "--moce-max-rank", fmt.Sprint(opt.MoCEMaxRank))
		}
		if opt.MoCELambda > 0 {
			flags = append(flags, "--moce-lambda", fmt.Sprint(opt.MoCELambda))
		}
	}
	if opt.ReadAhead {
		flags = append(flags, "--read-ahead")
	}
	return flags
}

// graphsOf decodes the graphs a run of c uses from a: every decode shape,
// the prefill shape (its all-logits variant when allLogits), and the MTP
// head's, named after c (the key, not the name, says which models an
// artifact serves). JSON decoding is most of a small model's load time, so
// the graphs decode concurrently.
func graphsOf(a *artifact.Artifact, c *models.Config, allLogits bool) ([]*graph.Graph, error) {
	var refs []artifact.GraphRef
	for _, ref := range a.Graphs {
		prefill := ref.Kind == graph.KindTrunk && ref.Rows > c.Windows.MaxDecodeRows
		if ref.AllLogits == (prefill && allLogits) {
			refs = append(refs, ref)
		}
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("artifact of %s has no window graphs", a.Name)
	}
	out := make([]*graph.Graph, len(refs))
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	for i, ref := range refs {
		wg.Go(func() {
			if out[i], errs[i] = a.GraphVariant(ref.Kind, ref.Rows, ref.AllLogits); errs[i] == nil {
				out[i].Model = c.Name
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// capGraphs keeps the graphs of at most maxRows rows, for an arena that
// holds maxRows rows' experts; prefill falls back to the largest trunk
// shape left.
func capGraphs(graphs []*graph.Graph, maxRows int) ([]*graph.Graph, int) {
	var out []*graph.Graph
	largest := 0
	for _, g := range graphs {
		if g.Rows <= maxRows {
			out = append(out, g)
			if g.Kind == graph.KindTrunk {
				largest = max(largest, g.Rows)
			}
		}
	}
	return out, largest
}
