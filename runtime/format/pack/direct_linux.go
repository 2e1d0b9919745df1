package pack

import (
	"fmt"
	"os"
	"syscall"
)

// directAlign is what O_DIRECT needs the buffer address, file offset and
// length aligned to: the device's logical block, which 4096 covers on every
// disk in practice (pack entries sit on 16 KiB pages).
const directAlign = 4096

func openDirect(path string) (*os.File, string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return nil, "", fmt.Errorf("opening with O_DIRECT: %w", err)
	}
	return f, "O_DIRECT", nil
}

// tmpfsMagic is statfs's f_type of tmpfs (linux/magic.h).
const tmpfsMagic = 0x01021994

// fsNote says when bypassing the page cache reads memory rather than a device
// (tmpfs takes O_DIRECT since Linux 6.6), so read rates are not taken for a
// disk's.
func fsNote(path string) string {
	var st syscall.Statfs_t
	if syscall.Statfs(path, &st) == nil && st.Type == tmpfsMagic {
		return "on tmpfs: memory, not a device"
	}
	return ""
}
