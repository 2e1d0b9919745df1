package planes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// ReadFile reads name from fsys: the file itself, or when it is absent
// name.planes decoded (its delta base read the same way, from beside it).
func ReadFile(fsys fs.FS, name string) ([]byte, error) {
	return readFile(fsys, name, 0)
}

func readFile(fsys fs.FS, name string, depth int) ([]byte, error) {
	b, err := fs.ReadFile(fsys, name)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return b, err
	}
	enc, err2 := fs.ReadFile(fsys, name+Ext)
	if err2 != nil {
		if errors.Is(err2, fs.ErrNotExist) {
			return nil, err // the plain file's not-exist error
		}
		return nil, err2
	}
	if depth > 4 {
		return nil, fmt.Errorf("%s%s: delta bases nested too deep", name, Ext)
	}
	out, err := Decode(enc, func(base string) ([]byte, error) {
		return readFile(fsys, path.Join(path.Dir(name), base), depth+1)
	})
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", name, Ext, err)
	}
	return out, nil
}

// ReadOSFile is ReadFile on the operating system's files.
func ReadOSFile(name string) ([]byte, error) {
	fsys, rel, err := osFS(name)
	if err != nil {
		return nil, err
	}
	b, err := ReadFile(fsys, rel)
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == rel {
		pe.Path = name // errors name the path as the caller gave it
	}
	return b, err
}

// osFS is the file system root of name and name's path in it, so a delta
// base may lie in another folder ("../tiny-go/…").
func osFS(name string) (fs.FS, string, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, "", err
	}
	root := filepath.VolumeName(abs) + string(filepath.Separator)
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return nil, "", err
	}
	return os.DirFS(root), filepath.ToSlash(rel), nil
}

// Encoded reports whether name is absent and name.planes stands for it.
func Encoded(name string) bool {
	if _, err := os.Stat(name); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	_, err := os.Stat(name + Ext)
	return err == nil
}

// Exists reports whether name, or name.planes, exists.
func Exists(name string) bool {
	if _, err := os.Stat(name); err == nil {
		return true
	}
	return Encoded(name)
}
