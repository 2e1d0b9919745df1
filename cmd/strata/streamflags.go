package main

import (
	"flag"
	"fmt"
	"io"
	"math"

	"github.com/strata-llm/strata/runtime/load"
)

// streamFlags are the expert-streaming flags run and bench share: the
// arena's size in memory and cache-aware routing (MoCE).
type streamFlags struct {
	arenaGB, moceLambda *float64
	moce, readAhead     *bool
	waitEveryLayer      *bool
	windowMajor         *bool
	moceMaxRank         *int
	ioSplit             *int
}

func addStreamFlags(fs *flag.FlagSet) *streamFlags {
	return &streamFlags{
		arenaGB:        fs.Float64("arena-gb", 0, "stream the routed experts through an arena of this many `GB` (10⁹ bytes); without it or --arena-experts, strata run sizes the arena from the available memory less the other buffers and a margin, and keeps every expert resident when they fit"),
		moce:           fs.Bool("moce", false, "cache-aware routing (MoCE) with an expert arena: a resident expert may replace a missing one whose router score is within --moce-lambda (changes the tokens)"),
		moceLambda:     fs.Float64("moce-lambda", 0, "with --moce: the score ratio λ in (0, 1] a resident substitute must reach (0: the model config's, else 0.85)"),
		readAhead:      fs.Bool("read-ahead", false, "with an expert arena: predict each layer's next-layer experts (the next router on this layer's input) and read them ahead while the layer runs (one more small matmul per layer; the prediction never changes the tokens)"),
		waitEveryLayer: fs.Bool("wait-every-layer", false, "with an expert arena on cuda: stop the GPU for the host at every MoE layer (by default the GPU checks each layer's routed experts against the residency map itself and waits for the host only at layers that miss; the tokens are the same either way)"),
		windowMajor:    fs.Bool("window-major", false, "with an expert arena: prefill a prompt of several windows window by window, each through every layer (by default every window runs a layer before the next layer, so each layer's experts are read once for all the windows rather than once per window; the tokens are the same either way)"),
		ioSplit:        fs.Int("io-split", 0, "with an expert arena: read a missed expert in parts of this many `KiB`, one reader thread each, up to the reader threads (0: 256 KiB; -1: whole)"),
		moceMaxRank:    fs.Int("moce-max-rank", 0, "with --moce: only the top `N` ranks of a row may be substituted, N ≥ experts_per_token (0: the model config's, else 16; -1: any rank)"),
	}
}

// check validates the flags; arenaExperts is --arena-experts' value (run's;
// bench passes 0).
func (f *streamFlags) check(arenaExperts int) error {
	if g := *f.arenaGB; math.IsNaN(g) || math.IsInf(g, 0) || g < 0 {
		return usagef("--arena-gb must be a number of GB > 0, got %v", g)
	}
	if *f.arenaGB > 0 && arenaExperts > 0 {
		return usagef("--arena-experts and --arena-gb are two sizes for one arena; give one")
	}
	if l := *f.moceLambda; math.IsNaN(l) || l < 0 || l > 1 {
		return usagef("--moce-lambda must be in (0, 1], got %v", l)
	}
	if s := *f.ioSplit; s < -1 || (s > 0 && s < 4) {
		return usagef("--io-split must be a size in KiB ≥ 4, 0 (256 KiB) or -1 (whole experts), got %d", s)
	}
	if *f.moceMaxRank < -1 {
		return usagef("--moce-max-rank must be ≥ 1, 0 (the config's) or -1 (any), got %d", *f.moceMaxRank)
	}
	if !*f.moce && (*f.moceLambda != 0 || *f.moceMaxRank != 0) {
		return usagef("--moce-lambda and --moce-max-rank tune --moce; add --moce")
	}
	return nil
}

// apply sets the options the flags ask for.
func (f *streamFlags) apply(opt *load.Options) {
	opt.ArenaGB = *f.arenaGB
	opt.MoCE, opt.MoCELambda, opt.MoCEMaxRank = *f.moce, *f.moceLambda, *f.moceMaxRank
	opt.ReadAhead, opt.WaitEveryLayer, opt.WindowMajor = *f.readAhead, *f.waitEveryLayer, *f.windowMajor
	switch {
	case *f.ioSplit > 0:
		opt.Stream.SplitBytes = *f.ioSplit << 10
	case *f.ioSplit < 0:
		opt.Stream.SplitBytes = -1
	}
}

// noter prints how the experts are held, once at load.
func noter(stderr io.Writer) func(string) {
	return func(s string) { fmt.Fprintf(stderr, "strata: %s\n", s) }
}
