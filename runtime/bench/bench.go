// Package bench measures prompt processing (pp) and token generation (tg)
// of configurations of one model side by side: every configuration loaded
// once and kept, repetitions interleaved so a machine that drifts affects
// them alike.
package bench

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/sample"
	"github.com/strata-llm/strata/runtime/engine/spec"
	"github.com/strata-llm/strata/runtime/engine/stream"
	"github.com/strata-llm/strata/runtime/load"
)

// Config is one configuration compared.
type Config struct {
	Backend string // load.Backend*
	Spec    int    // drafts per window (0: off; engine.Auto: the spec gate chooses)
	Arena   int    // expert arena slots (0: every expert resident)
}

// SpecName is Spec as strata's --spec writes it: auto or the drafts.
func (c Config) SpecName() string {
	if c.Spec == engine.Auto {
		return "auto"
	}
	return strconv.Itoa(c.Spec)
}

func (c Config) String() string {
	return fmt.Sprintf("backend=%s spec=%s arena=%d", c.Backend, c.SpecName(), c.Arena)
}

// Run is a configuration loaded, and its measured repetitions.
type Run struct {
	Config Config
	Loaded *load.Loaded
	spec   engine.SpecOptions
	PP, TG []float64 // tokens/s per measured repetition
	// Spec is what speculation did over the measured repetitions' decoding.
	Spec engine.SpecStats
	// Stream is what expert streaming did over the measured repetitions'
	// decoding (tg), TGTokens the tokens they generated: per token, the
	// numbers that explain a streamed tg.
	Stream   stream.Stats
	TGTokens int
	// PPStream is what expert streaming did over the measured
	// repetitions' prompts (pp), Prompts how many there were.
	PPStream stream.Stats
	Prompts  int
	measured bool
}

// Open loads every configuration with open and sets its speculation: up to
// suffix suffix drafts, the MTP head's when the model has one, and for Auto
// a spec gate kept across repetitions. On an error it closes what it loaded.
func Open(configs []Config, suffix int, open func(Config) (*load.Loaded, error)) ([]*Run, error) {
	var runs []*Run
	for _, c := range configs {
		l, err := open(c)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("configuration %s: %w", c, err), Close(runs))
		}
		sp := engine.SpecOptions{Depth: c.Spec, SuffixDraft: suffix, MTP: true}
		if c.Spec == engine.Auto {
			sp.Gate = spec.NewGate(l.Config.Windows.MaxDecodeRows - 1)
		}
		runs = append(runs, &Run{Config: c, Loaded: l, spec: sp})
	}
	return runs, nil
}

// Gate is the spec gate of an Auto configuration (kept across its
// repetitions), nil for others.
func (r *Run) Gate() *spec.Gate { return r.spec.Gate }

// Close closes every run's model.
func Close(runs []*Run) error {
	var errs []error
	for _, r := range runs {
		errs = append(errs, r.Loaded.Close())
	}
	return errors.Join(errs...)
}

// Options are what Measure runs.
type Options struct {
	Prompt       []int
	Gen          int // tokens generated after the prompt
	Warmup, Reps int // unmeasured repetitions first, then measured ones
	// Sampling is the decode's sampling chain (zero: greedy). A model of
	// random weights decodes greedily into one repeated token, whose
	// experts then never change; sampling at a temperature keeps the
	// routing moving, as text's does. Each repetition draws the same
	// tokens (the seed is fixed).
	Sampling sample.Params
	// Profile, when set, starts a profile before the first measured
	// repetition; the function it returns stops it at the end.
	Profile func() (stop func() error, err error)
}

// Measure runs opt.Warmup and then opt.Reps repetitions of every run,
// interleaved (repetition i starts with run i mod len(runs)), appending the
// measured ones' tokens/s to each run's PP and TG.
func Measure(runs []*Run, opt Options) (err error) {
	var stop func() error
	defer func() {
		if stop != nil {
			if serr := stop(); err == nil {
				err = serr
			}
		}
	}()
	for rep := 0; rep < opt.Warmup+opt.Reps; rep++ {
		if rep == opt.Warmup && opt.Profile != nil {
			if stop, err = opt.Profile(); err != nil {
				return err
			}
		}
		for i := range runs {
			r := runs[(i+rep)%len(runs)]
			r.spec.Stats = nil
			if r.measured = rep >= opt.Warmup; r.measured {
				r.spec.Stats = &r.Spec
			}
			pp, tg, err := r.once(opt.Prompt, opt.Gen, opt.Sampling)
			if err != nil {
				return fmt.Errorf("configuration %s: %w", r.Config, err)
			}
			if rep >= opt.Warmup {
				r.PP, r.TG = append(r.PP, pp), append(r.TG, tg)
			}
		}
	}
	return nil
}

// Once runs the prompt (pp: up to the first sampled token) and then gen
// tokens (tg) on a fresh session, returning tokens/s of each. Timings are
// wall time of the engine's Generate, sampling included.
func (r *Run) Once(prompt []int, gen int) (pp, tg float64, err error) {
	return r.once(prompt, gen, sample.Params{})
}

func (r *Run) once(prompt []int, gen int, sp sample.Params) (pp, tg float64, err error) {
	s := r.Loaded.Model.NewSession()
	before := r.Loaded.Model.StreamStats()
	start := time.Now()
	first, err := s.Generate(prompt, 1, engine.GenerateOptions{PrefillRows: r.Loaded.PrefillRows})
	if err != nil {
		return 0, 0, err
	}
	pp = float64(len(prompt)) / time.Since(start).Seconds()
	if r.measured {
		r.PPStream = r.PPStream.Add(r.Loaded.Model.StreamStats().Sub(before))
		r.Prompts++
	}
	before = r.Loaded.Model.StreamStats()
	start = time.Now()
	// The sampled token is fed as a one-row window, then gen−1 decode steps.
	out, err := s.Generate(first, gen, engine.GenerateOptions{PrefillRows: r.Loaded.PrefillRows, Spec: r.spec, Sampling: sp})
	if err != nil {
		return 0, 0, err
	}
	tg = float64(len(out)) / time.Since(start).Seconds()
	if r.measured {
		d := r.Loaded.Model.StreamStats().Sub(before)
		r.Stream = r.Stream.Add(d)
		r.TGTokens += len(out)
	}
	return pp, tg, nil
}

// RandomPrompt is n pseudo-random token ids below vocab, from seed
// (splitmix64).
func RandomPrompt(n int, seed int64, vocab int) []int {
	x := uint64(seed)
	p := make([]int, n)
	for i := range p {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		p[i] = int((z ^ z>>31) % uint64(vocab))
	}
	return p
}

// MeanSD is the mean of xs and their sample standard deviation (0 for one
// sample).
func MeanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	if len(xs) > 1 {
		sd = math.Sqrt(sd / float64(len(xs)-1))
	}
	return mean, sd
}

// Speed is a mean of tokens/s and its standard deviation over repetitions.
type Speed struct{ Mean, SD float64 }

// Speeds summarizes the run's measured repetitions.
func (r *Run) Speeds() (pp, tg Speed) {
	pp.Mean, pp.SD = MeanSD(r.PP)
	tg.Mean, tg.SD = MeanSD(r.TG)
	return pp, tg
}
