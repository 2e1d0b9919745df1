package outfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func temps(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".*.tmp-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCommitAndAbort(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.bin")
	if err := WriteFile(out, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(out)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("stat %v, mode %v; want 0644", err, st.Mode())
	}
	tmp, err := Create(out)
	if err != nil {
		t.Fatal(err)
	}
	tmp.Write([]byte("half"))
	tmp.Abort()
	if b, _ := os.ReadFile(out); string(b) != "hello" {
		t.Errorf("target after Abort = %q", b)
	}
	if l := temps(t, dir); len(l) != 0 {
		t.Errorf("temporary files left: %v", l)
	}
}

// A temporary file nobody holds (its writer was killed) goes at the next
// write of the same target; one a live writer holds stays.
func TestStaleTempsRemoved(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "m[1].gguf") // glob metacharacters in the name
	stale := filepath.Join(dir, ".m[1].gguf.tmp-123")
	other := filepath.Join(dir, ".other.gguf.tmp-9")
	for _, p := range []string{stale, other} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	live, err := Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Abort()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temp still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another target's temp was removed: %v", err)
	}
	if n := RemoveStale(out); n != 0 {
		t.Errorf("RemoveStale removed %d files while their writer lives", n)
	}
	if _, err := os.Stat(live.Name()); err != nil {
		t.Errorf("live temp removed: %v", err)
	}
}

// The helper process of TestSignalRemovesTemps: it starts a write and waits.
func TestMain(m *testing.M) {
	if out := os.Getenv("OUTFILE_TEST_HELPER"); out != "" {
		RemoveOnSignal()
		t, err := Create(out)
		if err != nil {
			os.Exit(3)
		}
		t.Write([]byte("partial"))
		os.Stdout.WriteString(t.Name() + "\n")
		time.Sleep(time.Minute)
		os.Exit(4)
	}
	os.Exit(m.Run())
}

func TestSignalRemovesTemps(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "x.gguf")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "OUTFILE_TEST_HELPER="+out)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4096)
			n, _ := stdout.Read(buf)
			name := strings.TrimSpace(string(buf[:n]))
			if _, err := os.Stat(name); err != nil {
				t.Fatalf("helper's temp %q: %v", name, err)
			}
			cmd.Process.Signal(sig)
			cmd.Wait()
			if sig == syscall.SIGKILL {
				// Nothing runs at SIGKILL: the next write cleans up.
				if len(temps(t, dir)) != 1 {
					t.Fatalf("want the killed run's temp left, got %v", temps(t, dir))
				}
				if err := WriteFile(out, []byte("ok")); err != nil {
					t.Fatal(err)
				}
			}
			if l := temps(t, dir); len(l) != 0 {
				t.Errorf("temporary files left after %v: %v", sig, l)
			}
		})
	}
}

func TestNotInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "model.gguf")
	ck := filepath.Join(dir, "ck")
	os.Mkdir(ck, 0o755)
	shard := filepath.Join(ck, "model.safetensors")
	for _, p := range []string{in, shard} {
		os.WriteFile(p, []byte("data"), 0o644)
	}
	link := filepath.Join(dir, "link.gguf")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.gguf")
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		out    string
		inputs []string
		want   string
	}{
		{in, []string{in}, "is an input"},
		{filepath.Join(dir, ".", "model.gguf"), []string{in}, "is an input"},
		{link, []string{in}, "same file as the input"},
		{hard, []string{in}, "same file as the input"},
		{in, []string{link}, "same file as the input"},
		{shard, []string{ck}, "is an input"},
		{ck, []string{in}, "is a directory"},
		{filepath.Join(dir, "new.gguf"), []string{in, ck}, ""},
		{filepath.Join(dir, "other"), []string{in}, ""},
	} {
		if c.out == filepath.Join(dir, "other") {
			os.WriteFile(c.out, []byte("other"), 0o644)
		}
		err := NotInput("-o", c.out, c.inputs...)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("NotInput(%s, %v) = %v; want %q", c.out, c.inputs, err, c.want)
		}
	}
}
