// Package outfile is how strata writes an output file: never over one of its
// inputs, through a hidden temporary file beside the target that is renamed
// into place only when complete, and never leaving such a file behind: a
// temporary file is removed on failure, on SIGINT/SIGTERM (RemoveOnSignal),
// and, when a killed run (SIGKILL, power loss) left one, by the next write of
// the same target. Open temporary files hold an advisory lock, so the next
// write tells an abandoned one from one another process is still writing.
package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Temp is an output being written: the embedded *os.File is the temporary
// file; Commit renames it onto the target, Abort removes it.
type Temp struct {
	*os.File
	target string
	done   bool
}

// tempPattern is the temporary file name of target's base name.
func tempPattern(base string) string { return "." + base + ".tmp-*" }

// Create starts writing target: it removes the temporary files abandoned by
// earlier writes of target, then creates and locks a new one.
func Create(target string) (*Temp, error) {
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	RemoveStale(target)
	for range 3 {
		f, err := os.CreateTemp(dir, tempPattern(base))
		if err != nil {
			return nil, fmt.Errorf("writing %s: %w", target, err)
		}
		if err := lock(f); err != nil {
			f.Close()
			os.Remove(f.Name())
			return nil, fmt.Errorf("writing %s: locking %s: %w", target, f.Name(), err)
		}
		// Another writer's RemoveStale may have taken it between the
		// create and the lock: start again with a fresh one.
		if !stillThere(f) {
			f.Close()
			continue
		}
		t := &Temp{File: f, target: target}
		register(f.Name())
		return t, nil
	}
	return nil, fmt.Errorf("writing %s: its temporary files keep disappearing", target)
}

func stillThere(f *os.File) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(f.Name())
	return err == nil && os.SameFile(a, b)
}

// Commit makes the temporary file the target: mode 0644 (CreateTemp makes
// 0600; outputs are ordinary data files), synced, closed, renamed.
func (t *Temp) Commit() error {
	if t.done {
		return fmt.Errorf("writing %s: already committed or aborted", t.target)
	}
	err := t.Chmod(0o644)
	if err == nil {
		err = t.Sync()
	}
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(t.Name(), t.target)
	}
	t.done = true
	if err != nil {
		os.Remove(t.Name())
		unregister(t.Name())
		return fmt.Errorf("writing %s: %w", t.target, err)
	}
	unregister(t.Name())
	return nil
}

// Abort removes the temporary file; the target is untouched. Abort after
// Commit does nothing, so `defer t.Abort()` is the usual pattern.
func (t *Temp) Abort() {
	if t.done {
		return
	}
	t.done = true
	t.Close()
	os.Remove(t.Name())
	unregister(t.Name())
}

// WriteFile replaces target with data through a temporary file.
func WriteFile(target string, data []byte) error {
	t, err := Create(target)
	if err != nil {
		return err
	}
	defer t.Abort()
	if _, err := t.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", target, err)
	}
	return t.Commit()
}

// RemoveStale removes target's temporary files that no live writer holds
// (left by a killed run), and returns how many it removed.
func RemoveStale(target string) int {
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	names, _ := filepath.Glob(globEscape(filepath.Join(dir, tempPattern(base))))
	n := 0
	for _, name := range names {
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if tryLock(f) {
			if os.Remove(name) == nil {
				n++
			}
		}
		f.Close()
	}
	return n
}

// globEscape quotes the glob metacharacters of a pattern's fixed part
// (everything before the final *).
func globEscape(p string) string {
	fixed := strings.TrimSuffix(p, "*")
	var b strings.Builder
	for _, r := range fixed {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteRune('\\')
		}
		b.WriteRune(r)
	}
	return b.String() + "*"
}

// open temporary files of this process, for RemoveOnSignal.
var (
	openMu sync.Mutex
	open   = map[string]bool{}
)

func register(name string) {
	openMu.Lock()
	open[name] = true
	openMu.Unlock()
}

func unregister(name string) {
	openMu.Lock()
	delete(open, name)
	openMu.Unlock()
}

// removeOpen removes every temporary file this process has open.
func removeOpen() {
	openMu.Lock()
	defer openMu.Unlock()
	for name := range open {
		os.Remove(name)
		delete(open, name)
	}
}

// NotInput refuses an output that would replace an input: output is one of
// inputs, is a link to one, or is the same file (a hard link). An input that
// is a directory stands for the files directly in it (a checkpoint folder).
// Inputs that do not exist are skipped; what names the output is in what.
func NotInput(what, output string, inputs ...string) error {
	out, err := os.Stat(output)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // a new file replaces nothing
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, output, err)
	}
	if out.IsDir() {
		return fmt.Errorf("%s %s is a directory, expected a file name", what, output)
	}
	for _, in := range inputs {
		if in == "" || in == "-" {
			continue
		}
		st, err := os.Stat(in)
		if err != nil {
			continue
		}
		if os.SameFile(out, st) {
			return sameError(what, output, in)
		}
		if !st.IsDir() {
			continue
		}
		entries, err := os.ReadDir(in)
		if err != nil {
			continue
		}
		for _, e := range entries {
			p := filepath.Join(in, e.Name())
			if st, err := os.Stat(p); err == nil && os.SameFile(out, st) {
				return sameError(what, output, p)
			}
		}
	}
	return nil
}

func sameError(what, output, input string) error {
	if filepath.Clean(output) == filepath.Clean(input) {
		return fmt.Errorf("%s %s is an input of this command; refusing to overwrite it (write somewhere else)", what, output)
	}
	return fmt.Errorf("%s %s is the same file as the input %s; refusing to overwrite it (write somewhere else)", what, output, input)
}
