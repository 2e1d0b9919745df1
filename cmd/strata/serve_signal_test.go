package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The strata binary, not only serveCmd: SIGTERM shuts strata serve down as
// its help says (the running requests finish, the state is saved, exit
// status 0); the process-wide handler that removes temporary files must
// not end it first.
func TestServeProcessShutsDownOnSIGTERM(t *testing.T) {
	if os.Getenv("STRATA_TEST_MAIN") != "" { // the child: strata itself
		os.Args = append([]string{"strata"}, strings.Fields(os.Getenv("STRATA_TEST_MAIN"))...)
		main()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeProcessShutsDownOnSIGTERM$")
	cmd.Env = append(os.Environ(), "STRATA_TEST_MAIN=serve --host 127.0.0.1 --port 0 --spec-state -")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var log []string
	read := func(want string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("strata serve ended before %q:\n%s", want, strings.Join(log, "\n"))
				}
				log = append(log, l)
				if strings.Contains(l, want) {
					return
				}
			case <-deadline:
				cmd.Process.Kill()
				t.Fatalf("no %q from strata serve in 30s:\n%s", want, strings.Join(log, "\n"))
			}
		}
	}
	read(" on http://")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	read("strata: shutting down")
	read("strata: stopped")
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("strata serve after SIGTERM: %v, want exit status 0:\n%s", err, strings.Join(log, "\n"))
	}
}
