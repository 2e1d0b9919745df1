package sysmem

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// parseMeminfo reads MemTotal and MemAvailable (the kernel's estimate of
// what can be allocated without swapping, page cache included).
func parseMeminfo(data []byte) (Info, error) {
	var i Info
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || (f[0] != "MemTotal:" && f[0] != "MemAvailable:") {
			continue
		}
		kb, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil || len(f) > 2 && f[2] != "kB" {
			return Info{}, fmt.Errorf("/proc/meminfo: %s is %q, expected a number of kB", f[0], strings.Join(f[1:], " "))
		}
		if f[0] == "MemTotal:" {
			i.Total = kb << 10
		} else {
			i.Available = kb << 10
		}
		found++
	}
	if found < 2 {
		return Info{}, fmt.Errorf("/proc/meminfo has no MemTotal or no MemAvailable line")
	}
	i.Source = "MemAvailable in /proc/meminfo"
	return i, nil
}
