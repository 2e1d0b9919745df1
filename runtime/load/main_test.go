package load

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if conversions.dir != "" {
		os.RemoveAll(conversions.dir)
	}
	os.Exit(code)
}
