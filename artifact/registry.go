package artifact

import (
	"fmt"
	"sort"
	"sync"
)

var (
	mu     sync.RWMutex
	byName = map[string]*Artifact{}
	byKey  = map[string]*Artifact{}
)

// Register adds an artifact compiled into the program; generated/<model>
// packages call it from init. A second one of the same name or key is a
// build error of the program, so it panics.
func Register(a *Artifact) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := byName[a.Name]; dup {
		panic("artifact: model " + a.Name + " registered twice")
	}
	if o, dup := byKey[a.Key]; dup {
		panic("artifact: models " + o.Name + " and " + a.Name + " have one key")
	}
	byName[a.Name] = a
	byKey[a.Key] = a
}

// Lookup returns the registered artifact of the model called name.
func Lookup(name string) (*Artifact, error) {
	mu.RLock()
	a, ok := byName[name]
	mu.RUnlock()
	if ok {
		return a, nil
	}
	return nil, fmt.Errorf("no generated model %q is linked in (registered: %v); import its package github.com/strata-llm/strata/generated/%s", name, Names(), name)
}

// ByKey returns the registered artifact of content key key.
func ByKey(key string) (*Artifact, bool) {
	mu.RLock()
	defer mu.RUnlock()
	a, ok := byKey[key]
	return a, ok
}

// Names lists the registered models, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	var out []string
	for n := range byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// All returns the registered artifacts, sorted by name.
func All() []*Artifact {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]*Artifact, 0, len(byName))
	for _, a := range byName {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
