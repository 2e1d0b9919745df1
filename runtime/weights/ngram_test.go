package weights

import (
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
)

// table builds rows × width values v[r][c] = r + c/100 in layout rl, split
// into shards of per rows.
func table(t *testing.T, rows, width, per int, rl quant.RowLayout) (*NgramTable, []float32) {
	t.Helper()
	vals := make([]float32, rows*width)
	for r := range rows {
		for c := range width {
			vals[r*width+c] = float32(r) + float32(c)/100
		}
	}
	var shards [][]byte
	var names []string
	for first := 0; first < rows; first += per {
		n := min(per, rows-first)
		b := make([]byte, n*rl.RowBytes())
		for r := range n {
			rl.EncodeRow(vals[(first+r)*width:(first+r+1)*width], b[r*rl.RowBytes():])
		}
		shards, names = append(shards, b), append(names, "shard")
	}
	tab, err := NewNgramTable("layers.1.ple.table", width, rl, shards, names)
	if err != nil {
		t.Fatal(err)
	}
	return tab, vals
}

func TestNgramTableGather(t *testing.T) {
	f32 := quant.RowLayout{Format: mustFormat("f32"), Len: 16, Stored: 16}
	tab, vals := table(t, 10, 16, 4, f32) // shards of 4, 4 and 2 rows
	ids := []int64{9, 0, 3, 4, 7}         // across every shard boundary
	got := make([]float32, len(ids)*16)
	if err := tab.Gather(ids, got); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if !slices.Equal(got[i*16:(i+1)*16], vals[id*16:(id+1)*16]) {
			t.Errorf("row %d: %v", id, got[i*16:(i+1)*16])
		}
	}
	for _, bad := range []int64{-1, 10} {
		if err := tab.Gather([]int64{bad}, got); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("row %d: %v", bad, err)
		}
	}
	// Rows read out in another layout (padded q8_0), across shards.
	q8, err := quant.ForRow("q8_0", 16, quant.Pad)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 5*q8.RowBytes())
	if err := tab.ReadRows(3, q8, out); err != nil {
		t.Fatal(err)
	}
	row := make([]float32, 16)
	for r := range 5 {
		q8.DecodeRow(out[r*q8.RowBytes():], row)
		for c, v := range row {
			if d := v - vals[(3+r)*16+c]; d > 0.05 || d < -0.05 {
				t.Fatalf("row %d col %d: %v, want %v", 3+r, c, v, vals[(3+r)*16+c])
			}
		}
	}
	if err := tab.ReadRows(8, q8, out); err == nil {
		t.Errorf("rows 8…12 of 10 read")
	}
	// A padded q8_0 table gathers through its padding.
	qt, _ := table(t, 10, 16, 10, q8)
	if err := qt.Gather([]int64{9}, got[:16]); err != nil {
		t.Fatal(err)
	}
	if d := got[15] - vals[9*16+15]; d > 0.05 || d < -0.05 {
		t.Errorf("padded row 9: %v", got[:16])
	}
}

func TestNgramTableErrors(t *testing.T) {
	f32 := quant.RowLayout{Format: mustFormat("f32"), Len: 16, Stored: 16}
	for _, c := range []struct {
		shards [][]byte
		width  int
		want   string
	}{
		{[][]byte{make([]byte, 64*3+1)}, 16, "not whole rows"},
		{[][]byte{make([]byte, 64*2), make([]byte, 64*3), make([]byte, 64)}, 16, "only the last shard may be shorter"},
		{[][]byte{make([]byte, 64)}, 8, "cannot be stored"},
		{nil, 16, "no shards"},
	} {
		names := make([]string, len(c.shards))
		for i := range names {
			names[i] = "s"
		}
		if _, err := NewNgramTable("t", c.width, f32, c.shards, names); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.want, err)
		}
	}
}

// Random tables generate each row from its own seed: the same row whatever
// chunk or call it comes in, different rows differ.
func TestRandomNgramTable(t *testing.T) {
	spec := models.TensorSpec{Name: "layers.1.ple.table", Shape: []int{1000, 16}, Class: models.ClassNgram}
	tab, err := NewRandom(3).NgramTable(spec)
	if err != nil {
		t.Fatal(err)
	}
	f32 := tab.Layout()
	all := make([]byte, 1000*f32.RowBytes())
	if err := tab.ReadRows(0, f32, all); err != nil {
		t.Fatal(err)
	}
	one := make([]byte, f32.RowBytes())
	if err := tab.ReadRows(617, f32, one); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(one, all[617*f32.RowBytes():618*f32.RowBytes()]) {
		t.Errorf("row 617 differs read alone")
	}
	g := make([]float32, 32)
	if err := tab.Gather([]int64{617, 618}, g); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 16)
	f32.DecodeRow(one, want)
	if !slices.Equal(g[:16], want) || slices.Equal(g[:16], g[16:]) {
		t.Errorf("gathered rows 617, 618: %v", g)
	}
	if err := NewRandom(3).CheckNgram(1, nil, nil, nil); err != nil {
		t.Error(err)
	}
}
