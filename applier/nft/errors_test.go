package nft

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestOpenNotRoot: without root (or CAP_NET_ADMIN) Open fails with an
// error that says what is missing, not a raw errno. As root, the test
// drops to uid nobody for the call (the effective capabilities go with
// the effective uid) and takes root back afterwards.
func TestOpenNotRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		if err := syscall.Setresuid(-1, 65534, -1); err != nil {
			t.Skipf("SKIPPED: cannot drop root to test the error: %v", err)
		}
		defer func() {
			if err := syscall.Setresuid(-1, 0, -1); err != nil {
				panic("cannot get root back: " + err.Error())
			}
		}()
	}
	a, err := Open(0)
	if err == nil {
		a.Close()
		t.Fatal("Open without privileges succeeded")
	}
	if !strings.Contains(err.Error(), "needs root, or CAP_NET_ADMIN") {
		t.Errorf("Open without privileges: %v, want it to say root or CAP_NET_ADMIN is needed", err)
	}
}
