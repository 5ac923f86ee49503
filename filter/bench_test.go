package filter

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/spamd/spamd/internal/parallel"
	"github.com/spamd/spamd/mailbox"
	"github.com/spamd/spamd/store"
	"github.com/spamd/spamd/store/badgerstore"
)

// benchMessage is a labelled message for the benchmarks.
type benchMessage struct {
	raw   []byte
	class string
}

var (
	benchOnce sync.Once
	benchMsgs []benchMessage
	benchErr  error
)

// benchCorpus returns the messages of $SPAMD_CORPUS/index (the SpamAssassin
// public corpus), or the sample shipped in testdata when it is not set.
func benchCorpus(b *testing.B) []benchMessage {
	benchOnce.Do(func() {
		ctx := context.Background()
		if dir := os.Getenv("SPAMD_CORPUS"); dir != "" {
			var entries []mailbox.Entry
			if entries, benchErr = mailbox.ReadIndex(filepath.Join(dir, "index")); benchErr != nil {
				return
			}
			for _, e := range entries {
				raw, err := os.ReadFile(e.Path)
				if err != nil {
					benchErr = err
					return
				}
				benchMsgs = append(benchMsgs, benchMessage{raw, e.Label})
			}
			return
		}
		for _, class := range []string{Spam, Ham} {
			benchErr = mailbox.Walk(ctx, filepath.Join("..", "testdata", "sample", class), mailbox.Options{}, func(m mailbox.Message) error {
				benchMsgs = append(benchMsgs, benchMessage{m.Raw, class})
				return nil
			})
			if benchErr != nil {
				return
			}
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchMsgs
}

func benchBytes(msgs []benchMessage) int64 {
	var n int64
	for _, m := range msgs {
		n += int64(len(m.raw))
	}
	return n
}

// prepareAll prepares msgs on every core, as spamtrain does.
func prepareAll(b *testing.B, f *Filter, msgs []benchMessage, names bool) []Item {
	items := make([]Item, len(msgs))
	in := make(chan int)
	go func() {
		defer close(in)
		for i := range msgs {
			in <- i
		}
	}()
	i := 0
	err := parallel.Map(context.Background(), 0, in, func(i int) Item {
		p, _ := f.Prepare(msgs[i].raw, names)
		return Item{Prepared: p, Class: msgs[i].class}
	}, func(it Item) error {
		items[i] = it
		i++
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return items
}

func openBench(b *testing.B) *badgerstore.Store {
	st, err := badgerstore.Open(context.Background(), b.TempDir(), badgerstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// trainBatches trains items into f in batches of 256, as spamtrain does.
func trainBatches(b *testing.B, f *Filter, items []Item) {
	for i := 0; i < len(items); i += 256 {
		if _, err := f.Train(context.Background(), "", items[i:min(i+256, len(items))]); err != nil {
			b.Fatal(err)
		}
	}
}

// trainedBench returns a filter over a fresh Badger store trained on
// msgs, and the prepared messages.
func trainedBench(b *testing.B, msgs []benchMessage) (*Filter, []Item) {
	f, err := New(openBench(b), DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	items := prepareAll(b, f, msgs, false)
	trainBatches(b, f, items)
	return f, items
}

// BenchmarkPrepare measures tokenizing and bagging, the CPU-heavy part of
// classifying and training, on every core.
func BenchmarkPrepare(b *testing.B) {
	msgs := benchCorpus(b)
	f, err := New(store.NewMemory(), DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchBytes(msgs))
	b.ResetTimer()
	for b.Loop() {
		prepareAll(b, f, msgs, false)
	}
	b.ReportMetric(float64(len(msgs)*b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkTrain measures training every message into a fresh Badger
// store on disk, parsing on every core and writing in batches of 256, as
// spamtrain train does.
func BenchmarkTrain(b *testing.B) {
	msgs := benchCorpus(b)
	b.SetBytes(benchBytes(msgs))
	for b.Loop() {
		b.StopTimer()
		f, err := New(openBench(b), DefaultConfig())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		trainBatches(b, f, prepareAll(b, f, msgs, false))
	}
	b.ReportMetric(float64(len(msgs)*b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkTrainMemory measures the serial part of a first training, as
// spamtrain train runs it into an empty store: prepared messages scored
// and trained in batches of 256 into a memory model.
func BenchmarkTrainMemory(b *testing.B) {
	msgs := benchCorpus(b)
	f, err := New(store.NewMemory(), DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	items := prepareAll(b, f, msgs, false)
	b.SetBytes(benchBytes(msgs))
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		mem := store.NewMemory()
		f, err := New(mem, DefaultConfig())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		trainBatches(b, f, items)
		b.StopTimer()
		mem.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(len(msgs)*b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkClassify measures classifying every message, from raw bytes to
// verdict, against a Badger store trained on all of them, on every core.
func BenchmarkClassify(b *testing.B) {
	msgs := benchCorpus(b)
	ctx := context.Background()
	f, _ := trainedBench(b, msgs)
	b.SetBytes(benchBytes(msgs))
	b.ResetTimer()
	var next atomic.Int64
	for b.Loop() {
		next.Store(0)
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= len(msgs) {
						return
					}
					if _, err := f.Classify(ctx, "", msgs[i].raw, ClassifyOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(len(msgs)*b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkScore measures the model alone: looking up counts in a trained
// Badger store and scoring prepared messages, on one core.
func BenchmarkScore(b *testing.B) {
	msgs := benchCorpus(b)
	ctx := context.Background()
	f, items := trainedBench(b, msgs)
	b.ResetTimer()
	for b.Loop() {
		for _, it := range items {
			if _, err := f.ClassifyPrepared(ctx, "", it.Prepared, ClassifyOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(msgs)*b.N)/b.Elapsed().Seconds(), "msgs/s")
}
