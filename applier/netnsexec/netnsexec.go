// Package netnsexec runs a function inside another network namespace.
//
// A network namespace belongs to an OS thread, not to a process: Run locks
// a fresh goroutine to its thread, switches that thread into the
// namespace, runs the function, and switches back. Sockets and netlink
// handles the function opens stay in the namespace after it returns. A
// thread that could not be switched back is never used again: its
// goroutine ends still locked to it, and Go ends the thread.
package netnsexec

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Run runs fn on an OS thread switched into the network namespace fd (an
// open /var/run/netns/NAME or /proc/PID/ns/net) and returns fn's error,
// joined with any error of entering or leaving the namespace.
func Run(fd int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("current network namespace: %w", err)
			return // the thread ends with the goroutine
		}
		defer orig.Close()
		if err := netns.Set(netns.NsHandle(fd)); err != nil {
			errc <- fmt.Errorf("enter network namespace: %w", err)
			return
		}
		err = fn()
		if serr := netns.Set(orig); serr != nil {
			errc <- errors.Join(err, fmt.Errorf("leave network namespace: %w", serr))
			return // still locked: the thread in the wrong namespace ends
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}
