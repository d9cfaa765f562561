package pipeline

import (
	"fmt"
	"runtime"
	"testing"
)

// fatalTB lets verifytest's helpers (written for tests) run without a test: Fatalf records the
// error and ends the goroutine, as testing's FailNow does. Only Helper and Fatal(f) are used by
// the helpers this package calls; the embedded nil TB panics on anything else, so a new use shows.
type fatalTB struct {
	testing.TB
	err error
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.err = fmt.Errorf(format, args...)
	runtime.Goexit()
}

func (f *fatalTB) Fatal(args ...any) {
	f.err = fmt.Errorf("%s", fmt.Sprint(args...))
	runtime.Goexit()
}

// asTest runs fn on its own goroutine with a fatalTB and returns what it failed with.
func asTest(fn func(testing.TB)) error {
	tb := &fatalTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(tb)
	}()
	<-done
	return tb.err
}
