package ngram

import (
	"slices"
	"testing"
)

// q4aParams are the q4-a oracle's store parameters (vocab 512, base 1000, 2
// heads per order, padding to 8).
var q4aParams = Params{VocabSize: 512, NgramSize: 3, HeadsPerNgram: 2, Base: 1000, DivisibleBy: 8, Seed: 1234}

// The geometry and multipliers of both q4-a and Flash-Next, as the spec
// (qwen4_exp.md §1 and §3.1) lists them and the q4-a checkpoint stores them.
func TestTables(t *testing.T) {
	q4, err := New(q4aParams)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got, want []int64) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("q4-a primes", q4.Primes, []int64{1009, 1013, 1019, 1021})
	check("q4-a offsets", q4.Offsets, []int64{0, 1009, 2022, 3041})
	check("q4-a multipliers", q4.Multipliers, []int64{4295158889763781, 17440218147737327, 1270917961434445})
	if q4.Rows != 4064 {
		t.Errorf("q4-a rows %d, want 4064", q4.Rows)
	}

	fn, err := New(Params{VocabSize: 248320, NgramSize: 3, HeadsPerNgram: 8, Base: 20_000_000, DivisibleBy: 128, Seed: 1234})
	if err != nil {
		t.Fatal(err)
	}
	check("Flash-Next primes", fn.Primes, []int64{20000003, 20000023, 20000033, 20000047, 20000059, 20000063, 20000069, 20000077,
		20000081, 20000093, 20000107, 20000147, 20000153, 20000159, 20000161, 20000171})
	check("Flash-Next offsets", fn.Offsets, []int64{0, 20000003, 40000026, 60000059, 80000106, 100000165, 120000228, 140000297,
		160000374, 180000455, 200000548, 220000655, 240000802, 260000955, 280001114, 300001275})
	check("Flash-Next multipliers", fn.Multipliers, []int64{23703573157769, 20109073645365, 8052911324071})
	if fn.Rows != 320_001_536 {
		t.Errorf("Flash-Next rows %d, want 320001536", fn.Rows)
	}

	// A second PLE layer takes the primes after the first layer's.
	p2 := q4aParams
	p2.Ordinal = 1
	second, _ := New(p2)
	check("q4-a ordinal 1 primes", second.Primes, []int64{1031, 1033, 1039, 1049})
}

// Row ids of a hand-worked sequence with EOS (id 3) at tokens 1, 4 and 5:
// expected values computed from the spec's formulas (context tokens replaced
// by EOS at or before the last EOS strictly before the position; bigram key
// t0·M0 ⊕ t1·M1, trigram key ⊕ t2·M2; row = offset_j + key mod P_j) with
// Python's exact integers, independently of this package.
func TestRowIDsHandWorked(t *testing.T) {
	tab, _ := New(q4aParams)
	const eos = 3
	tokens := []int{7, 3, 9, 12, 3, 3, 500}
	want := []int64{
		708, 1154, 2520, 3617, // 7: context [EOS, EOS] (fresh sequence)
		883, 1988, 2421, 3897, // 3 (EOS): keeps its document's context [7, EOS]
		625, 1411, 2343, 3844, // 9: after an EOS, context [EOS, EOS]
		449, 1296, 2743, 3833, // 12: [9, EOS]
		156, 1159, 2164, 3729, // 3: [12, 9]
		473, 1846, 2548, 3274, // 3: [EOS, EOS]
		574, 1326, 2475, 3890, // 500: [EOS, EOS]
	}
	got, h := tab.RowIDs(tab.Fresh(eos), tokens, eos)
	if !slices.Equal(got, want) {
		t.Fatalf("row ids\n got %v\nwant %v", got, want)
	}
	if !slices.Equal(h, History{3, 500}) {
		t.Errorf("history %v, want [3 500]", h)
	}
	// Any split into windows gives the same ids: the history carries the context.
	for split := 0; split <= len(tokens); split++ {
		a, h1 := tab.RowIDs(tab.Fresh(eos), tokens[:split], eos)
		b, _ := tab.RowIDs(h1, tokens[split:], eos)
		if !slices.Equal(append(a, b...), want) {
			t.Errorf("split at %d: ids differ", split)
		}
	}
}
