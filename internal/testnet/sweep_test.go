package testnet

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSweepOrphans leaves a namespace named for a process that is gone
// and one named for this live process: the sweep deletes the first only.
func TestSweepOrphans(t *testing.T) {
	Require(t)
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	dead := done.Process.Pid
	if unix.Kill(dead, 0) != unix.ESRCH {
		t.Skipf("SKIPPED: pid %d of a finished process is already in use again", dead)
	}
	orphan := fmt.Sprintf("netspec-sweep-%d-%08x", dead, rand.Uint32())
	live := fmt.Sprintf("netspec-sweep-%d-%08x", os.Getpid(), rand.Uint32())
	for _, name := range []string{orphan, live} {
		if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v\n%s", name, err, out)
		}
		t.Cleanup(func() {
			if exists(name) {
				exec.Command("ip", "netns", "delete", name).Run()
			}
		})
	}
	sweepOrphans(t)
	if exists(orphan) {
		t.Errorf("namespace %s of gone process %d is still there", orphan, dead)
	}
	if !exists(live) {
		t.Errorf("namespace %s of this live process was deleted", live)
	}
}

func exists(name string) bool {
	_, err := os.Stat(filepath.Join("/var/run/netns", name))
	return err == nil
}
