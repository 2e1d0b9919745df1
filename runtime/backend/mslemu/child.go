package mslemu

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"
)

// child is the sanitizer build of the kernels running as a process of its
// own (emu/driver.cpp), mapping the Memory's buffers from their memfds.
type child struct {
	sanitize string
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Reader
	stderr   *tail
	mu       sync.Mutex
	dead     error // set once the process is gone
}

const childMagic = 0x454d5553

// sanitizerEnv halts at the first report, and names the symbolizer when
// clang's LLVM has one (else reports give module offsets only).
func sanitizerEnv(opt Options) []string {
	var env []string
	sym := ""
	if clang, err := compiler(opt); err == nil {
		if real, err := filepath.EvalSymlinks(clang); err == nil {
			if p := filepath.Join(filepath.Dir(real), "llvm-symbolizer"); fileExists(p) {
				sym = p
			}
		}
	}
	if sym == "" {
		if p, err := exec.LookPath("llvm-symbolizer"); err == nil {
			sym = p
		}
	}
	switch opt.Sanitize {
	case Thread:
		opts := "halt_on_error=1:exitcode=66:report_signal_unsafe=0:history_size=4"
		if sym != "" {
			opts += ":external_symbolizer_path=" + sym
		}
		env = append(env, "TSAN_OPTIONS="+opts)
	case Address:
		opts := "halt_on_error=1:exitcode=66:detect_leaks=0:detect_stack_use_after_return=0"
		if sym != "" {
			opts += ":external_symbolizer_path=" + sym
		}
		env = append(env, "ASAN_OPTIONS="+opts)
	}
	return env
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func startChild(path string, opt Options, m *Memory) (*child, error) {
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), sanitizerEnv(opt)...)
	cmd.ExtraFiles = m.files
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &child{sanitize: opt.Sanitize, cmd: cmd, in: in, out: bufio.NewReader(out), stderr: &tail{max: 64 << 10}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("mslemu: starting %s: %w", path, err)
	}
	msg := binary.NativeEndian.AppendUint32(nil, childMagic)
	msg = binary.NativeEndian.AppendUint32(msg, uint32(len(m.Layout())))
	for i := range m.Layout() {
		b := m.Host(i)
		// Where the buffer starts in its memfd (experts are aligned inside).
		skip := uint64(0)
		if len(b) > 0 {
			skip = uint64(uintptr(unsafe.Pointer(&b[0])) - uintptr(unsafe.Pointer(&m.maps[i][0])))
		}
		msg = binary.NativeEndian.AppendUint64(msg, uint64(len(b)))
		msg = binary.NativeEndian.AppendUint64(msg, skip)
	}
	if _, err := in.Write(msg); err != nil {
		return nil, c.died(err)
	}
	var ack [4]byte
	if _, err := io.ReadFull(c.out, ack[:]); err != nil {
		return nil, c.died(err)
	}
	return c, nil
}

// run sends one dispatch and waits for its answer.
func (c *child) run(s *step) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead != nil {
		return c.dead
	}
	d := s.c
	d.Bufs = s.remote
	msg := unsafe.Slice((*byte)(unsafe.Pointer(&d)), unsafe.Sizeof(d))
	msg = append([]byte{}, msg...)
	msg = binary.NativeEndian.AppendUint32(msg, uint32(len(s.args)))
	msg = append(msg, s.args...)
	msg = binary.NativeEndian.AppendUint32(msg, uint32(len(s.ranges)))
	for _, r := range s.ranges {
		msg = binary.NativeEndian.AppendUint32(msg, r.buf)
		msg = binary.NativeEndian.AppendUint64(msg, r.off)
		msg = binary.NativeEndian.AppendUint64(msg, r.size)
	}
	if _, err := c.in.Write(msg); err != nil {
		return c.died(err)
	}
	var status [4]byte
	if _, err := io.ReadFull(c.out, status[:]); err != nil {
		return c.died(err)
	}
	if binary.NativeEndian.Uint32(status[:]) == 0 {
		return nil
	}
	var text [errBytes]byte
	if _, err := io.ReadFull(c.out, text[:]); err != nil {
		return c.died(err)
	}
	d.Err = text
	return errors.New(d.err())
}

// died waits for the process and turns what it printed (the sanitizer's
// report) into the error.
func (c *child) died(cause error) error {
	c.in.Close()
	werr := c.cmd.Wait()
	report := strings.TrimSpace(c.stderr.String())
	if werr == nil {
		werr = cause
	}
	c.dead = fmt.Errorf("the %s-sanitized kernels stopped (%v):\n%s", c.sanitize, werr, report)
	return c.dead
}

func (c *child) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead != nil {
		return nil
	}
	c.in.Close() // the driver exits at the end of its input
	err := c.cmd.Wait()
	c.dead = errors.New("the sanitizer process was closed")
	return err
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
