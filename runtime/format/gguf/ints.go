package gguf

import (
	"fmt"
	"math"
	"slices"
)

func (f *File) has(key string) bool {
	_, ok := f.kvIndex[key]
	return ok
}

// Ints returns an array of any integer element type as int64 values (a
// uint64 above MaxInt64 is an error): writers differ in the width they use.
func (f *File) Ints(key string) ([]int64, error) {
	a, err := f.Array(key)
	if err != nil {
		return nil, err
	}
	out, ok := int64s(a.Values)
	if !ok {
		return nil, fmt.Errorf("gguf %s: metadata key %s is an array of %s, want integers that fit int64", f.Path, key, a.Elem)
	}
	return out, nil
}

func int64s(vs any) ([]int64, bool) {
	conv := func(n int, at func(i int) int64) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = at(i)
		}
		return out
	}
	switch s := vs.(type) {
	case []uint8:
		return conv(len(s), func(i int) int64 { return int64(s[i]) }), true
	case []int8:
		return conv(len(s), func(i int) int64 { return int64(s[i]) }), true
	case []uint16:
		return conv(len(s), func(i int) int64 { return int64(s[i]) }), true
	case []int16:
		return conv(len(s), func(i int) int64 { return int64(s[i]) }), true
	case []uint32:
		return conv(len(s), func(i int) int64 { return int64(s[i]) }), true
	case []int32:
		return conv(len(s), func(i int) int64 { return int64(s[i]) }), true
	case []int64:
		return slices.Clone(s), true
	case []uint64:
		for _, v := range s {
			if v > math.MaxInt64 {
				return nil, false
			}
		}
		return conv(len(s), func(i int) int64 { return int64(s[i]) }), true
	}
	return nil, false
}
