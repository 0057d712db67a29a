// groupcheck: two franz-go consumers in one group on a 6-partition topic. Produces n records
// (franz-go's idempotent producer), consumes until every record is seen, and prints "OK" when
// the two assignments were disjoint, covered every partition and no record came twice.
// Args: bootstrap topic group n. Every wait is bounded by a 60 s context.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func fail(format string, a ...any) {
	fmt.Printf("FAIL "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	bootstrap, topic, group := os.Args[1], os.Args[2], os.Args[3]
	n, _ := strconv.Atoi(os.Args[4])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	admin, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		fail("client: %v", err)
	}
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 6, 1, nil, topic); err != nil {
		fail("create topic: %v", err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		fail("producer: %v", err)
	}
	for i := 0; i < n; i++ {
		prod.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				fail("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		fail("flush: %v", err)
	}
	prod.Close()

	var mu sync.Mutex
	seen := map[string]int{}
	assigned := make([]map[int32]bool, 2)
	var wg sync.WaitGroup
	done := make(chan struct{})
	for ci := 0; ci < 2; ci++ {
		ci := ci
		assigned[ci] = map[int32]bool{}
		c, err := kgo.NewClient(
			kgo.SeedBrokers(bootstrap),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.Balancers(kgo.RangeBalancer()),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range m[topic] {
					assigned[ci][p] = true
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				for _, p := range m[topic] {
					delete(assigned[ci], p)
				}
			}),
		)
		if err != nil {
			fail("consumer: %v", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			for {
				select {
				case <-done:
					return
				case <-ctx.Done():
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
				fs := c.PollFetches(pctx)
				pcancel()
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)]++
					mu.Unlock()
				})
			}
		}()
	}
	for {
		mu.Lock()
		total := len(seen)
		mu.Unlock()
		if total >= n || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	// Snapshot the assignments before closing: closing revokes them.
	mu.Lock()
	final := make([]map[int32]bool, len(assigned))
	for i, a := range assigned {
		final[i] = map[int32]bool{}
		for p := range a {
			final[i][p] = true
		}
	}
	mu.Unlock()
	close(done)
	wg.Wait()
	assigned = final
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		fail("saw %d distinct records of %d", len(seen), n)
	}
	for v, c := range seen {
		if c != 1 {
			fail("record %s seen %d times", v, c)
		}
	}
	union := map[int32]bool{}
	for _, a := range assigned {
		if len(a) == 0 {
			fail("a consumer got no partitions: %v", assigned)
		}
		for p := range a {
			if union[p] {
				fail("partition %d assigned twice: %v", p, assigned)
			}
			union[p] = true
		}
	}
	if len(union) != 6 {
		fail("assignments %v do not cover 6 partitions", assigned)
	}
	fmt.Println("OK", len(seen))
}
