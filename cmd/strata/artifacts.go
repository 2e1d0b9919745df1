package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/runtime/load"
)

// dirList is a repeatable, comma-separated list of folders.
type dirList []string

func (d *dirList) String() string { return strings.Join(*d, ",") }

func (d *dirList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s != "" {
			*d = append(*d, s)
		}
	}
	return nil
}

// artifactFlags are --artifacts and --no-generate, for every command that
// opens a model: where else to look for the model's generated artifact, and
// whether strata may generate a missing one.
type artifactFlags struct {
	dirs       dirList
	noGenerate bool
	stderr     io.Writer // hears the generate step
}

// addArtifactsFlag declares --artifacts and --no-generate.
func addArtifactsFlag(fs *flag.FlagSet) *artifactFlags {
	a := &artifactFlags{stderr: flagStderr[fs]}
	fs.Var(&a.dirs, "artifacts", "more `folders` to look in for the model's generated artifact (stratagen generate --out's; each an artifact folder or a folder of them; repeatable or comma-separated); "+
		"strata also looks beside the model (FILE.gguf.artifact, DIR/artifact), in its artifact cache and in the artifacts compiled in (the default model's)")
	fs.BoolVar(&a.noGenerate, "no-generate", false, "where no artifact serves the model, stop and name the stratagen command to run, "+
		"instead of running stratagen (beside strata, else on PATH) into the artifact cache (strata/artifacts in the user cache folder, e.g. ~/.cache)")
	return a
}

// openModelIn is openModel with the artifact flags applied.
func openModelIn(arts artifactFlags, hf, ggufPath, embedded string, opt load.Options) (*load.Loaded, error) {
	opt.Artifacts = append(opt.Artifacts, arts.dirs...)
	opt.NoGenerate = opt.NoGenerate || arts.noGenerate
	if opt.GenerateNote == nil && opt.Note == nil && arts.stderr != nil {
		opt.GenerateNote = noter(arts.stderr)
	}
	return openModel(hf, ggufPath, embedded, opt)
}

// noteArtifact tells what the first run of the GGUF out does: generate its
// artifact, for the formats its tensors hold, into the cache (or what to
// run ahead, for a machine without stratagen).
func noteArtifact(stderr io.Writer, out string) {
	dir := artifact.DirFor(true, out)
	fmt.Fprintf(stderr, "next: strata run --gguf %s   (the first run generates the file's artifact with stratagen and caches it; "+
		"stratagen generate --gguf %s writes it beside the file, as %s, ahead)\n", out, out, dir)
	if _, err := os.Stat(filepath.Join(dir, artifact.ManifestFile)); err == nil {
		fmt.Fprintf(stderr, "note: %s was generated for the file this one replaced; strata uses it only while its key still matches\n", dir)
	}
}
