// Package metal is the Metal backend: it runs window graphs on an Apple GPU
// through github.com/ebitengine/purego (no cgo).
//
// The package is split so that everything but the Objective-C calls builds
// and is tested on every platform:
//
//   - device.go: Device, the small interface of Objective-C operations the
//     backend makes (objects at load time; per window: passes, pipelines,
//     bindings, dispatches, barriers, events, ICB execution, commit).
//   - kernels.go, artifact.go: the contract with the MSL generator (a
//     dispatch → MSL function + function-constant tuple set by index; the
//     argument structs), and its adapter from artifact.
//   - backend.go, memory.go, program.go, run.go: load (library, pipelines
//     per tuple, guards, zero-copy shared buffers, ICB recording) and the
//     window (one command buffer; a concurrent compute encoder per stretch
//     between events; a memory barrier exactly where the graph has one; a
//     shared-event signal after each host point's router and a wait before
//     its Wait dispatch, the host spinning on one locked OS thread and
//     calling the Residency hook in between; telemetry).
//   - record.go: Recorder, a Device that records the calls and plays a GPU
//     that honours the events, so the encoding is checked against the graph
//     on Linux.
//   - objc_darwin.go, device_darwin.go (darwin/arm64 only): the real Device,
//     objc_msgSend bound once per Go signature, selectors and classes cached.
package metal
