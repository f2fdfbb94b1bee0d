package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// interruptible returns a context cancelled by the first SIGINT or SIGTERM,
// its cause naming the signal ("received terminated"), so a long command
// (build) stops at its next check, cleans up and says why. After the first
// signal the default handling is restored: a second one kills the process
// at once, for an operator who does not want to wait for the cleanup.
// stop releases the handler.
func interruptible(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			signal.Stop(ch)
			cancel(fmt.Errorf("received %s", sig))
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(context.Canceled)
	}
}
