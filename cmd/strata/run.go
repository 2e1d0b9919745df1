package main

import (
	"cmp"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-llm/strata/runtime/backend/cuda"
	"github.com/strata-llm/strata/runtime/backend/metal"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/stream"
	"github.com/strata-llm/strata/runtime/format/safetensors"
	"github.com/strata-llm/strata/runtime/load"
)

const runAbout = `
Feeds a prompt of token ids to the model in prefill windows of up to
--prefill-rows rows, then decodes -n tokens greedily one row at a time on the
cpu backend (or, with --backend mslemu, the generated MSL kernels compiled by
clang and run on the CPU by a lane emulator; with --backend metal, on the GPU
of an Apple-silicon Mac), and prints the generated ids on one line,
space-separated. --backend metal-emu runs the metal backend itself (command
buffers, pipelines, bindings, ICB replay, host points) against a recording
device whose "GPU" is the lane emulator: the Mac's code path, checked here.
--backend cuda runs the same generated MSL on an NVIDIA GPU through a CUDA
prelude (Linux with the driver and NVRTC; each barrier group's dispatches on
several streams, each window replayed from CUDA graphs unless --icb=false).

Decoding is greedy unless --temperature is given; then the sampling chain runs
the penalties, --top-k, --top-p, --min-p and the temperature, in llama.cpp's
order (docs/sampling.md). Generation stops early at the model's EOS ids
(generation_config.json or config.json; a GGUF's tokenizer.ggml.eos_token_id)
unless --ignore-eos. The ids are printed as they are made, so a run that fails
midway has printed what it generated.

With -p TEXT (or -f FILE) the prompt is text, tokenized with the model's
tokenizer (the --hf directory's tokenizer.json, the GGUF's tokenizer metadata,
or --tokenizer FILE), and the reply is printed as text as it is made (-n
defaults to 256 there); --system TEXT renders it with the model's chat
template as a conversation. --chat holds an interactive conversation on stdin
through the template, the session kept between turns so each turn prefills
only its new tokens (/reset, /exit, Ctrl-D). docs/text.md has the details.

With --spec, a decode window also carries drafts (from the model's MTP head
when it has one, and from a suffix matcher over the prompt and output); only
the drafts the model agrees with are kept, so the tokens are the same as
without it. --spec auto lets the spec gate size every window from measured
acceptance and measured window times.

With --gguf, it runs a GGUF file written by strata convert or strata synth
(its config is inside), or a llama.cpp qwen3next file as it is (its config
from the qwen3next.* metadata), reading the routed experts through
FILE.experts when "strata pack FILE" wrote one (a pack of another file is
refused). Every tensor runs in the format the file stores it in (a Q4_K_M
mix stays q4_k/q6_k, its f16 routers f16): nothing is quantized again at
load; a tensor of a type strata cannot decode is refused by name. --stats
prints the weights per class and format, and how much is used in place.

With neither, it runs the embedded default model (tiny-go: a small trained
Qwen3.8-Flash-Next-architecture model, Go source and fortunes, with an MTP
head) on a Go snippet and streams the text, so a fresh clone has something
to run (with --tokens, it prints ids as for any model); with --chat, the
embedded tiny-go-chat instead (tiny-go fine-tuned to chat and call tools).
Timing goes to stderr.`

// runFlags are strata run's flags, parsed.
type runFlags struct {
	model                                        *modelFlags
	tokens, dump, specFlag, specState, sanitize  string
	n, suffix                                    int
	dumpMTP, noMTPDraft, stats, copyWeights, icb bool
	cudaDirect                                   func() bool
	keepAlive                                    time.Duration
	sf                                           *samplingFlags
	gf                                           *grammarFlags
	tf                                           *textFlags
	stf                                          *streamFlags
}

func runCmd(args []string, stdout, stderr io.Writer) error {
	f, err := parseRunFlags(args, stderr)
	if err != nil {
		return err
	}
	sampling, err := f.sf.params()
	if err != nil {
		return err
	}
	sp, err := f.check()
	if err != nil {
		return err
	}
	g, err := f.gf.grammar()
	if err != nil {
		return err
	}
	m := f.model
	if err := m.checkPaths(); err != nil {
		return err // a missing model is the first thing to hear about
	}
	txt, err := f.tf.open(m.hf, m.gguf, f.tokens, f.n, f.sf.stops)
	if err != nil {
		return err
	}
	prompt, err := f.prompt(txt)
	if err != nil {
		return err
	}

	start := time.Now()
	opt := f.options(stderr)
	var packIO interface{ IOPath() string } // the pack reader, asked after the run (a refused read may change it)
	opt.WrapReader = func(r stream.Reader) stream.Reader {
		packIO, _ = r.(interface{ IOPath() string })
		return r
	}
	if *f.tf.chat {
		m.embedded = load.TinyGoChat // the default model that chats
	}
	l, err := m.open(opt)
	if err != nil {
		return err
	}
	defer closeModel(l, stderr)
	loaded := time.Since(start)

	gate := loadSpecGate(&sp, f.specState, m.gguf, l, m.backend, m.arena, m.ioThreads, stderr)
	eos, err := eosIDs(m.hf, m.gguf, l.Config)
	if err != nil {
		return fmt.Errorf("reading the EOS ids: %w", err)
	}
	printer, clock := &idPrinter{w: stdout}, &phaseClock{}
	tokenOut, finishText := printer.token, printer.end
	streamsText := f.tokens == "" && m.hf == "" && m.gguf == "" && !txt.isText() // the default model streams text
	if streamsText {
		if tokenOut, finishText, err = textStream(stdout, prompt); err != nil {
			return err
		}
	}
	onToken, err := stopOnText(f.sf.stops, txt.textOf(), func(id int) error { clock.token(); return tokenOut(id) })
	if err != nil {
		return err
	}
	gopt := engine.GenerateOptions{PrefillRows: l.PrefillRows, Spec: sp, Sampling: sampling, EOS: eos, IgnoreEOS: *f.sf.ignoreEOS, OnToken: onToken}
	if g != nil {
		if err := constrain(g, txt, streamsText, &gopt); err != nil {
			return err
		}
	}
	var dump logitsDump
	if f.dump != "" {
		gopt.OnLogits = dump.add
	}
	s := l.Model.NewSession()
	label := fmt.Sprintf("%s, %s backend, %d cpu threads", l.Config.Name, m.backend, l.Threads)
	if txt.isText() {
		txt.label = label
		if err := txt.run(l, s, gopt, loaded, stdout, stderr); err != nil {
			return err
		}
		gate.save(stderr)
		if f.stats {
			printRunStats(stderr, l, m.gguf != "", sp.Stats, gate, packIO)
		}
		return nil
	}
	clock.start = time.Now()
	out, err := s.Generate(prompt, f.n, gopt)
	end := time.Now()
	if err == nil || printer.n > 0 || streamsText {
		finishText() // the tokens streamed so far stand, also when the run failed
	}
	if err != nil && len(out) > 0 {
		return fmt.Errorf("after %d generated tokens (printed): %w", len(out), err)
	}
	if err != nil {
		return err
	}
	gate.save(stderr)
	if f.dump != "" {
		fed := append(slices.Clone(prompt), out[:max(len(out)-1, 0)]...)
		if err := dump.write(f.dump, l, f.dumpMTP, fed); err != nil {
			return err
		}
	}
	printTimings(stderr, label, loaded, clock, len(prompt), end)
	if f.stats {
		printRunStats(stderr, l, m.gguf != "", sp.Stats, gate, packIO)
	}
	return nil
}

// prompt is the token prompt: --tokens, or the default model's reference
// prompt (nil in text mode, which tokenizes its own); it also checks the
// model and output paths.
func (f *runFlags) prompt(txt *textRun) ([]int, error) {
	prompt := load.DefaultPrompt
	if f.tokens != "" {
		var err error
		if prompt, err = parseTokens(f.tokens); err != nil {
			return nil, err
		}
	} else if (f.model.hf != "" || f.model.gguf != "") && !txt.isText() {
		return nil, usagef("--tokens is required with --hf or --gguf (a model file has no default prompt), or a text prompt: -p, -f or --chat")
	}
	if err := checkRunOutputs(f.model.hf, f.model.gguf, map[string]string{"--dump-logits": f.dump, "--spec-state": f.specState}); err != nil {
		return nil, err
	}
	return prompt, nil
}

// parseRunFlags declares strata run's flags and parses args.
func parseRunFlags(args []string, stderr io.Writer) (*runFlags, error) {
	fs := newFlagSet("run", "[--hf DIR | --gguf FILE] [--tokens IDS] [-n N] [--prefill-rows K] [--dump-logits FILE]", runAbout, stderr)
	f := &runFlags{model: addModelFlags(fs, allModelFlags)}
	fs.StringVar(&f.tokens, "tokens", "", "prompt token `ids`, comma-separated (default: the default model's reference prompt)")
	fs.IntVar(&f.n, "n", 16, "number of tokens to generate (0: only run the prompt)")
	fs.StringVar(&f.dump, "dump-logits", "", "write the logits of every fed token to this safetensors `file` (tensor \"logits\", f32 [rows, vocab])")
	fs.BoolVar(&f.dumpMTP, "dump-mtp", false, "with --dump-logits: also write tensor \"mtp_logits\" f32 [fed−1, vocab], row t the MTP head's logits for fed token t+2 given the true token t+1 (teacher-forced)")
	fs.StringVar(&f.specFlag, "spec", "0", "speculative decoding: `auto` (the spec gate picks the drafts per window), 0 (off), or a fixed number of drafts")
	fs.IntVar(&f.suffix, "suffix-draft", 3, "most suffix (prompt-lookup) drafts per window with --spec; 0 turns the suffix drafter off")
	fs.BoolVar(&f.noMTPDraft, "no-mtp-draft", false, "with --spec: never draft with the model's MTP head (suffix drafts only)")
	fs.StringVar(&f.specState, "spec-state", "", "with --spec auto: the spec gate's estimates, read at the start and saved at the end, so the next run starts warm (default: FILE.spec next to a --gguf FILE; - for none)")
	f.sf = addSamplingFlags(fs)
	f.gf = addGrammarFlags(fs)
	fs.BoolVar(&f.stats, "stats", false, "print one-line reports of what speculation and expert streaming did to stderr (with --gguf, the weights per class: format, MB, in place)")
	fs.BoolVar(&f.copyWeights, "copy-weights", false, "copy every weight into the engine's buffers instead of using a GGUF's tensors in place from the mapped file")
	fs.BoolVar(&f.icb, "icb", false, "with --backend metal: record each window shape once into indirect command buffers and replay them (--backend cuda replays CUDA graphs unless --icb=false)")
	fs.DurationVar(&f.keepAlive, "keepalive", 0, "with --backend metal: keep the GPU clocked up for this `long` after each window (e.g. 50ms; 0: off)")
	fs.StringVar(&f.sanitize, "sanitize", "", "with --backend mslemu: build the kernels with a sanitizer, `thread` (races: missing barriers) or address (reads and writes outside a dispatch's ranges)")
	f.tf = addTextFlags(fs)
	f.stf = addStreamFlags(fs)
	f.cudaDirect = cudaDirectFlag(fs, &f.icb)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "tokens" && f.tokens == "" {
			f.tokens = " " // given but empty: refused by parseTokens, not the default prompt
		}
	})
	return f, nil
}

// check validates the flags that stand on their own and returns the
// speculation settings they ask for.
func (f *runFlags) check() (engine.SpecOptions, error) {
	backend := f.model.backend
	if err := f.stf.check(f.model.arena); err != nil {
		return engine.SpecOptions{}, err
	}
	sp, err := parseSpec(f.specFlag)
	if err != nil {
		return sp, err
	}
	if err := f.model.check(); err != nil {
		return sp, err
	}
	switch {
	case f.suffix < 0:
		return sp, usagef("--suffix-draft must be ≥ 0, got %d", f.suffix)
	case f.sanitize != "" && (backend != load.BackendMSLEmu || f.sanitize != mslemu.Thread && f.sanitize != mslemu.Address):
		return sp, usagef("--sanitize is %q: expected thread or address, with --backend mslemu", f.sanitize)
	}
	onMetal := backend == load.BackendMetal || backend == load.BackendMetalEmu
	if f.icb && backend == load.BackendCUDA {
		onMetal = f.keepAlive == 0
	}
	switch {
	case (f.icb || f.keepAlive != 0) && !onMetal:
		return sp, usagef("--icb and --keepalive apply to --backend metal (or metal-emu), not %s", backend)
	case f.keepAlive < 0:
		return sp, usagef("--keepalive must be ≥ 0, got %v", f.keepAlive)
	case f.n < 0:
		return sp, usagef("-n must be ≥ 0, got %d", f.n)
	case f.dumpMTP && f.dump == "":
		return sp, usagef("--dump-mtp adds a tensor to the --dump-logits file; give --dump-logits FILE too")
	}
	sp.SuffixDraft, sp.MTP = f.suffix, !f.noMTPDraft
	sp.Stats = &engine.SpecStats{}
	return sp, nil
}

// options are the load options the flags ask for.
func (f *runFlags) options(stderr io.Writer) load.Options {
	opt := load.Options{AllLogits: f.dump != "", CopyWeights: f.copyWeights,
		MSLEmu: mslemu.Options{Sanitize: f.sanitize}, Metal: metal.Options{ICB: f.icb, KeepAlive: f.keepAlive}, CUDA: cuda.Options{Direct: f.cudaDirect()},
		Warn: warner(stderr), AutoArena: f.model.arena == 0 && *f.stf.arenaGB == 0, Note: noter(stderr)}
	f.model.apply(&opt)
	f.stf.apply(&opt)
	return opt
}

// logitsDump collects the rows --dump-logits writes.
type logitsDump struct {
	logits []float32
	rows   int
}

func (d *logitsDump) add(r []float32) error {
	d.logits = append(d.logits, r...)
	d.rows++
	return nil
}

// write saves the rows as tensor "logits" f32 [rows, vocab] (and, with mtp,
// the MTP head's teacher-forced rows over the fed tokens).
func (d *logitsDump) write(path string, l *load.Loaded, mtp bool, fed []int) error {
	data := make([]byte, 4*len(d.logits))
	for i, v := range d.logits {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	ts := []safetensors.Tensor{{Name: "logits", DType: "F32", Shape: []int{d.rows, l.Config.Architecture.VocabSize}, Data: data}}
	if mtp {
		mt, err := mtpTensor(l, fed)
		if err != nil {
			return err
		}
		ts = append(ts, mt)
	}
	if err := safetensors.WriteFile(path, ts, nil); err != nil {
		return fmt.Errorf("--dump-logits: %w", err)
	}
	return nil
}

// printRunStats prints --stats' one-line reports: weights (per class for a
// GGUF), speculation and the spec gate, the metal backend's window timings,
// and expert streaming.
func printRunStats(stderr io.Writer, l *load.Loaded, gguf bool, st *engine.SpecStats, gate *specGateFile, packIO interface{ IOPath() string }) {
	ws := l.Model.Weights()
	how := fmt.Sprintf("%.1f MB used in place from the mapped file (%d stretches wrapped", float64(ws.InPlace)/1e6, ws.Wrapped)
	if ws.Staged > 0 {
		how += fmt.Sprintf(", %d staged through aligned copies", ws.Staged)
	}
	how += ")"
	if ws.InPlace == 0 && ws.Staged == 0 {
		how = "none in place: " + ws.Why
	}
	fmt.Fprintf(stderr, "strata: weights: %.1f MB copied; %s\n", float64(ws.Copied)/1e6, how)
	if gguf { // what each class runs as: the file's own formats
		printWeightTable(stderr, l)
	}
	printBufferLine(stderr, l)
	fmt.Fprintf(stderr, "strata: speculation: %d decode windows, %d drafts fed, %d accepted, %d windows re-run after a rejection\n",
		st.Windows, st.Drafted, st.Accepted, st.Rerun)
	if gate.gate != nil {
		fmt.Fprintf(stderr, "strata: %s\n", gate.gate.Report())
	}
	if mb, ok := l.Model.Backend().(interface{ Stats() metal.Stats }); ok {
		ms := mb.Stats()
		per := func(d time.Duration) time.Duration {
			return (d / time.Duration(max(ms.Windows, 1))).Round(time.Microsecond)
		}
		fmt.Fprintf(stderr, "strata: metal: %d windows; per window: host before %v, encode %v, host points %v (%d), GPU %v, wall %v; %d commands replayed from ICBs, %d encoded directly\n",
			ms.Windows, per(ms.Total.HostBefore), per(ms.Total.Encode), per(ms.Total.Host), ms.Total.HostPoints/max(ms.Windows, 1),
			per(ms.Total.GPU), per(ms.Total.Wall), ms.Total.Replayed, ms.Total.Direct)
	}
	if d, n := l.Model.NgramGatherTime(); n > 0 {
		fmt.Fprintf(stderr, "strata: n-gram rows: gathered before %d windows in %v (%v a window), %d rows read ahead\n",
			n, d.Round(time.Microsecond), (d / time.Duration(n)).Round(time.Microsecond), l.Model.NgramRowsPrefetched())
	}
	if l.ArenaExperts > 0 {
		ss := l.Model.StreamStats()
		ioPath := "through the weight source (no pack)"
		if packIO != nil {
			ioPath = packIO.IOPath()
		}
		fmt.Fprintf(stderr, "strata: streaming: arena of %d experts; %d hits, %d misses (%.1f%% hit), %d read-aheads (%d used), %.1f MB read, %v stalled; reads %s, %.0f MB/s per thread, %.0f MB/s while reading\n",
			l.ArenaExperts, ss.Hits, ss.Misses, 100*float64(ss.Hits)/float64(max(ss.Hits+ss.Misses, 1)), ss.Prefetched, ss.Used,
			float64(ss.BytesRead)/1e6, ss.Stall.Round(time.Millisecond), ioPath,
			float64(ss.BytesRead)/1e6/max(ss.ReadTime.Seconds(), 1e-9), float64(ss.BytesRead)/1e6/max(ss.ReadBusy.Seconds(), 1e-9))
		if ss.Batches > 0 {
			fmt.Fprintf(stderr, "strata: streaming: the prompt's routed experts ran in %d layer batches of %.0f rows on average (each expert read once a batch, for all of its rows)\n",
				ss.Batches, float64(ss.BatchRows)/float64(ss.Batches))
		}
	}
}

// openModel opens the HF checkpoint directory hf, the GGUF file ggufPath,
// or (neither given) the embedded model embedded ("": tiny-go).
func openModel(hf, ggufPath, embedded string, opt load.Options) (*load.Loaded, error) {
	if opt.Generate == nil {
		opt.Generate = generate
	}
	switch {
	case hf != "":
		return load.HF(hf, opt)
	case ggufPath != "":
		return load.GGUF(ggufPath, load.GGUFOptions{Options: opt})
	}
	return load.Embedded(cmp.Or(embedded, load.TinyGo), opt)
}

// parseSpec reads --spec: auto, or a number of drafts (0: off).
func parseSpec(v string) (engine.SpecOptions, error) {
	if v == "auto" {
		return engine.SpecOptions{Depth: engine.Auto}, nil
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 0 {
		return engine.SpecOptions{}, usagef("--spec is %q, expected auto or a number of drafts ≥ 0", v)
	}
	return engine.SpecOptions{Depth: k}, nil
}

// parseTokens reads "1,2,3" (spaces allowed).
func parseTokens(s string) ([]int, error) {
	var out []int
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		v, err := strconv.Atoi(f)
		if err != nil || v < 0 {
			return nil, usagef("--tokens: item %d is %q, expected a non-negative integer token id", i+1, f)
		}
		out = append(out, v)
	}
	return out, nil
}

// cudaDirectFlag reports, once fs is parsed, whether the cuda backend runs
// each dispatch directly: only when --icb=false is given, since replaying
// CUDA graphs is its default (exact, and cheaper), while metal replays ICBs
// only with --icb.
func cudaDirectFlag(fs *flag.FlagSet, icb *bool) func() bool {
	return func() bool {
		set := false
		fs.Visit(func(f *flag.Flag) { set = set || f.Name == "icb" })
		return set && !*icb
	}
}
