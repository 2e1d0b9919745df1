package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/strata-llm/strata/runtime/sysmem"
)

// progress draws a one-line bar on stderr for long work (conversion, packing),
// redrawn in place at most every 100 ms, with throughput and time left. When
// stderr is not a terminal (a log, a pipe) it prints one plain line per 10%
// instead of carriage-return frames.
type progress struct {
	w     io.Writer
	label string
	start time.Time
	last  time.Time
	drawn bool
	tty   bool
	step  int // lines printed so far, without a terminal
}

func newProgress(w io.Writer, label string) *progress {
	return &progress{w: w, label: label, start: time.Now(), tty: isTerminal(w)}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// update redraws the bar for done of total bytes.
func (p *progress) update(done, total int64) {
	now := time.Now()
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	if !p.tty {
		// One line per 10% reached, the last at 100%.
		if step := int(frac * 10); step > p.step {
			p.step = step
			elapsed := now.Sub(p.start).Seconds()
			fmt.Fprintf(p.w, "%s: %3.0f%%  %s / %s  %s/s\n", p.label, 100*frac, sizeOf(done), sizeOf(total), sizeOf(int64(float64(done)/max(elapsed, 1e-9))))
		}
		return
	}
	if done < total && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last, p.drawn = now, true
	const width = 30
	fill := int(frac * width)
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
	elapsed := now.Sub(p.start).Seconds()
	rate := float64(done) / max(elapsed, 1e-9)
	eta := ""
	if done < total && rate > 0 {
		eta = fmt.Sprintf("  %s left", time.Duration(float64(total-done)/rate*float64(time.Second)).Round(time.Second))
	}
	fmt.Fprintf(p.w, "\r%s [%s] %3.0f%%  %s / %s  %s/s%s   ", p.label, bar, 100*frac, sizeOf(done), sizeOf(total), sizeOf(int64(rate)), eta)
}

// finish ends the bar's line.
func (p *progress) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

// sizeOf renders a byte count in decimal units, as sysmem.Size does, with
// bytes below a kB.
func sizeOf(n int64) string {
	if n >= 1e3 {
		return sysmem.Size(uint64(n))
	}
	return fmt.Sprintf("%d B", n)
}

// parseFlagsAnd parses args, flags and positional arguments in any order,
// turning flag errors into usage errors, and returns the positional ones.
func parseFlagsAnd(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, helps[fs]()
			}
			return nil, usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
