package engine

// CopyLanes makes the lanes m adds from now on share its memory and swap
// state on a switch, as on a backend that is no backend.Forker: the tests
// run both ways on the cpu backend.
func CopyLanes(m *Model) { m.lane0.copies = true }
