package graph

import "fmt"

// ICBPlan says how a backend can record a window once into an indirect
// command buffer (an ICB on Metal) and replay it every window of that shape.
// Commands are the dispatches, in order. A command replays when every
// argument comes from a buffer and every buffer offset is below 2^32; the
// rest are encoded directly each window. Nothing is patched per window: the
// values that change (rows, position, token ids) live in the params buffer,
// and the host rewrites that buffer, not the commands.
type ICBPlan struct {
	// ArgsSize is the size of the static argument buffer: the argument
	// struct of every command with scalars, filled once at load.
	ArgsSize int64        `json:"args_size"`
	Commands []ICBCommand `json:"commands"`
	// Runs are the maximal stretches of replayable commands that cross no
	// host signal or wait (events are command-buffer level, so an ICB
	// execution cannot span one): one executeCommandsInBuffer each.
	Runs []ICBRun `json:"runs"`
	// PatchPerStep lists the commands whose recorded arguments change from
	// window to window. Empty by construction: the IR has no inline
	// per-window values.
	PatchPerStep []int `json:"patch_per_step"`
}

// ICBCommand is one recorded command.
type ICBCommand struct {
	Replay bool `json:"replay"`
	// Barrier is the command's barrier bit: it waits for every earlier
	// command, exactly where the dispatch has its barrier. A run that starts
	// with the bit set needs a memory barrier before it is executed.
	Barrier bool     `json:"barrier"`
	Args    *ICBArgs `json:"args,omitempty"`
	Reason  string   `json:"reason,omitempty"` // why it is encoded directly
}

// ICBArgs places a command's argument struct (its Scalars, as float32 in
// order) in the static argument buffer. It is bound at Slot, the slot after
// the dispatch's last binding; encoded directly, the same struct goes in with
// setBytes at that slot.
type ICBArgs struct {
	Slot   int   `json:"slot"`
	Offset int64 `json:"offset"`
	Size   int64 `json:"size"`
}

// ICBRun is a stretch of commands replayed with one call.
type ICBRun struct {
	First int `json:"first"`
	Count int `json:"count"`
}

// maxICBOffset bounds the buffer offsets an indirect command records.
const maxICBOffset = int64(1) << 32

// argsAlign is the alignment of each argument struct in the static buffer.
const argsAlign = 16

// argsSlot is the slot of a dispatch's argument struct: after its bindings.
func argsSlot(d *Dispatch) int {
	slot := 0
	for _, b := range d.Args {
		slot = max(slot, b.Slot+1)
	}
	return slot
}

// PlanICB builds the replay plan of g in its current order, with its barrier
// flags and host points as they are.
func PlanICB(g *Graph) *ICBPlan {
	p := &ICBPlan{Commands: make([]ICBCommand, len(g.Dispatches)), PatchPerStep: []int{}}
	cut := map[int]bool{} // commands a run may not continue into
	for _, h := range g.HostPoints {
		cut[h.After+1] = true
		if h.Wait > 0 {
			cut[h.Wait] = true
		}
	}
	start := -1
	closeRun := func(end int) {
		if start >= 0 {
			p.Runs = append(p.Runs, ICBRun{First: start, Count: end - start})
			start = -1
		}
	}
	for i := range g.Dispatches {
		d := &g.Dispatches[i]
		c := &p.Commands[i]
		c.Barrier = d.Barrier
		if len(d.Scalars) > 0 {
			off := (p.ArgsSize + argsAlign - 1) / argsAlign * argsAlign
			size := int64(4 * len(d.Scalars))
			c.Args = &ICBArgs{Slot: argsSlot(d), Offset: off, Size: size}
			p.ArgsSize = off + size
		}
		c.Replay = true
		for _, b := range d.Args {
			if b.Offset >= maxICBOffset {
				c.Replay = false
				c.Reason = fmt.Sprintf("binding %s at offset %d of buffer %s, past the 2^32 an indirect command can record", b.Name, b.Offset, b.Buffer)
				break
			}
		}
		if cut[i] || !c.Replay {
			closeRun(i)
		}
		if c.Replay && start < 0 {
			start = i
		}
	}
	closeRun(len(g.Dispatches))
	p.ArgsSize = (p.ArgsSize + argsAlign - 1) / argsAlign * argsAlign
	return p
}

// Replayable counts the commands that replay.
func (p *ICBPlan) Replayable() int {
	n := 0
	for _, c := range p.Commands {
		if c.Replay {
			n++
		}
	}
	return n
}
