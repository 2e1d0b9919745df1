package sysmem

import (
	"runtime"
	"testing"
)

func TestRead(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no memory reader on", runtime.GOOS)
	}
	i, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if i.Total < 64<<20 || i.Available == 0 || i.Available > i.Total {
		t.Errorf("implausible memory: %+v", i)
	}
}
