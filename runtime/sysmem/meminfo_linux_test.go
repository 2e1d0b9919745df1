package sysmem

import (
	"strings"
	"testing"
)

func TestParseMeminfo(t *testing.T) {
	i, err := parseMeminfo([]byte("MemTotal:       16318480 kB\nMemFree:          400000 kB\nMemAvailable:   12000000 kB\n"))
	if err != nil || i.Total != 16318480<<10 || i.Available != 12000000<<10 {
		t.Errorf("got %+v, %v", i, err)
	}
	for _, bad := range []string{"MemTotal: 5 kB\n", "MemTotal: x kB\nMemAvailable: 1 kB\n", "MemTotal: 5 MB\nMemAvailable: 1 kB\n"} {
		if _, err := parseMeminfo([]byte(bad)); err == nil || !strings.Contains(err.Error(), "meminfo") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}
