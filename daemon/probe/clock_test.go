package probe

import (
	"fmt"
	"testing"
	"time"
)

func TestFakeClock(t *testing.T) {
	clk := NewFakeClock(t0)
	var fired []string
	at := func(name string) func() {
		return func() { fired = append(fired, fmt.Sprintf("%s@%v", name, clk.Now().Sub(t0))) }
	}
	clk.AfterFunc(3*time.Second, at("c"))
	clk.AfterFunc(time.Second, at("a"))
	stopped := clk.AfterFunc(2*time.Second, at("never"))
	clk.AfterFunc(time.Second, func() {
		at("b")()
		clk.AfterFunc(time.Second, at("armed-by-b")) // due at 2s, within this Advance
	})
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop of a pending timer: want true, then false")
	}
	if n := clk.Pending(); n != 3 {
		t.Fatalf("Pending = %d, want 3", n)
	}
	if due, ok := clk.NextDue(); !ok || !due.Equal(t0.Add(time.Second)) {
		t.Fatalf("NextDue = %v, %v", due, ok)
	}
	clk.Advance(2500 * time.Millisecond)
	if got, want := fmt.Sprint(fired), "[a@1s b@1s armed-by-b@2s]"; got != want {
		t.Errorf("fired %s, want %s", got, want)
	}
	if !clk.Now().Equal(t0.Add(2500 * time.Millisecond)) {
		t.Errorf("Now = %v after Advance(2.5s)", clk.Now().Sub(t0))
	}
	clk.Advance(time.Second)
	if got, want := fmt.Sprint(fired), "[a@1s b@1s armed-by-b@2s c@3s]"; got != want {
		t.Errorf("fired %s, want %s", got, want)
	}
	if _, ok := clk.NextDue(); ok || clk.Pending() != 0 {
		t.Error("timers left after all fired")
	}
	fired = nil
	clk.AfterFunc(0, at("zero"))
	clk.Advance(0)
	if got, want := fmt.Sprint(fired), "[zero@3.5s]"; got != want {
		t.Errorf("fired %s, want %s", got, want)
	}
}
