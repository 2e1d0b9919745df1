package outfile

import (
	"os"
	"os/signal"
	"syscall"
)

// RemoveOnSignal makes SIGINT and SIGTERM remove this process's temporary
// files before it exits (status 128 + the signal's number, as a shell
// reports it), so an interrupted convert, synth or pack leaves nothing
// behind. CLIs call it once at the start of main.
func RemoveOnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-ch
		removeOpen()
		code := 130
		if sig == syscall.SIGTERM {
			code = 143
		}
		os.Exit(code)
	}()
}
