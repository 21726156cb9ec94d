package tracer

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sigscope/sigscope/tracer/sigvocab"
)

// checkEncoder holds one Encoder's line for e to AppendJSON's.
func checkEncoder(t *testing.T, enc *sigvocab.Encoder, e *sigvocab.Event) {
	t.Helper()
	want := e.AppendJSON(nil)
	if got := enc.AppendEvent([]byte("[1,"), e); !bytes.Equal(got[3:], want) || string(got[:3]) != "[1," {
		t.Fatalf("Encoder differs from AppendJSON for %+v:\n got %s\nwant %s", *e, got[3:], want)
	}
}

// The Encoder's cached parts are AppendJSON's whatever came before: every
// case after every other, in order and shuffled, so that each part is
// looked up where a part of another event that differs from it in one
// field (same pids: same slot) is cached.
func TestEncoderMatchesAppendJSON(t *testing.T) {
	cases := jsonCases()
	for _, raw := range recordedRecords(t) {
		var e sigvocab.Event
		if err := Decode(raw, Clock{}, &e); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, e)
	}
	// Within one second, across one, and the same second in other zones.
	at := time.Date(2026, 11, 26, 9, 59, 59, 999_999_000, time.UTC)
	for _, d := range []time.Duration{0, 420, 999, 1000, 1420} {
		e := cases[0]
		e.Time = at.Add(d)
		cases = append(cases, e)
		e.Time = e.Time.In(time.FixedZone("", 3600))
		cases = append(cases, e)
	}
	var enc sigvocab.Encoder
	rng := rand.New(rand.NewPCG(24, 0))
	for round := range 4 {
		for i := range cases {
			checkEncoder(t, &enc, &cases[i])
		}
		if round > 0 {
			rng.Shuffle(len(cases), func(i, j int) { cases[i], cases[j] = cases[j], cases[i] })
		}
	}
}

// Once its parts are cached, a storm's line allocates nothing.
func TestEncoderAllocatesNothing(t *testing.T) {
	evs := benchEvents()
	var enc sigvocab.Encoder
	buf := make([]byte, 0, 4096)
	for i := range evs {
		buf = enc.AppendEvent(buf[:0], &evs[i])
		if n := testing.AllocsPerRun(100, func() { buf = enc.AppendEvent(buf[:0], &evs[i]) }); n != 0 {
			t.Errorf("Encoder allocates %v times for %s", n, buf)
		}
	}
}

// FuzzEncoder is FuzzJSON's comparison for a stream: two records, any
// fields on top, written one after the other by one Encoder, twice.
func FuzzEncoder(f *testing.F) {
	fx := fuzzFixtures(f)
	for i, raw := range fx {
		f.Add(raw, fx[(i+1)%len(fx)], uint16(0), int64(0), uint32(0))
	}
	f.Add(fuzzRecord(sigvocab.KindGenerate, nil), fuzzRecord(sigvocab.KindExec, nil), uint16(0xffff), int64(1_700_000_000), uint32(999_999_999))
	f.Fuzz(func(t *testing.T, raw1, raw2 []byte, flags uint16, sec int64, nsec uint32) {
		var evs [2]sigvocab.Event
		for i, raw := range [][]byte{raw1, raw2} {
			rec := make([]byte, RecordSize)
			copy(rec, raw)
			if err := Decode(rec, Clock{}, &evs[i]); err != nil {
				return
			}
		}
		evs[1].Flags ^= sigvocab.Flags(flags)
		if sec != 0 || nsec != 0 {
			evs[1].Time = time.Unix(sec, int64(nsec%1_000_000_000))
		}
		var enc sigvocab.Encoder
		for range 2 {
			for i := range evs {
				checkEncoder(t, &enc, &evs[i])
			}
		}
	})
}
