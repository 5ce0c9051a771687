package netnsexec

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
)

// TestRun: fn sees the other namespace's interfaces, its error comes back,
// and the caller's namespace is unchanged afterwards.
func TestRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: creating a network namespace needs root (CI runs as root)")
	}
	name := "nsx-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + strconv.Itoa(os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("SKIPPED: ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "netns", "exec", name, "ip", "link", "add", "nsx-probe0", "type", "veth", "peer", "name", "nsx-probe1").CombinedOutput(); err != nil {
		t.Fatalf("add a veth pair: %v: %s", err, out)
	}
	h, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	var inside []byte
	if err := Run(int(h), func() (err error) { inside, err = os.ReadFile("/proc/thread-self/net/dev"); return err }); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(inside), "nsx-probe0") {
		t.Errorf("inside the namespace, net/dev lacks its link:\n%s", inside)
	}
	outside, err := os.ReadFile("/proc/self/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(outside), "nsx-probe0") {
		t.Errorf("the caller's namespace has the other namespace's link")
	}
	want := errors.New("fn failed")
	if err := Run(int(h), func() error { return want }); !errors.Is(err, want) {
		t.Errorf("Run returned %v, want fn's error", err)
	}
}
