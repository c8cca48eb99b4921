// Package fanout runs a benchmark's many API calls with bounded concurrency.
package fanout

import "sync"

// Run runs f(0..n-1) on w goroutines and returns the first error.
func Run(w, n int, f func(int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int)
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}
