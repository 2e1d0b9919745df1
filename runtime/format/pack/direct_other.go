//go:build !linux && !darwin

package pack

import (
	"errors"
	"os"
)

const directAlign = 1

func openDirect(string) (*os.File, string, error) {
	return nil, "", errors.ErrUnsupported
}

func fsNote(string) string { return "" }
