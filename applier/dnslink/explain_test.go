package dnslink

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// TestExplain checks the hints of the errors a user can fix: not root,
// and a kernel without dummy links (the messages the kernel tests cannot
// provoke as root).
func TestExplain(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{err: fmt.Errorf("netlink: %w", syscall.EPERM), want: "operation not permitted (needs root, or CAP_NET_ADMIN)"},
		{err: syscall.EOPNOTSUPP, want: "(the kernel has no dummy links: load the dummy module, modprobe dummy)"},
		{err: syscall.EBUSY, want: "device or resource busy"},
	} {
		if got := explain(tc.err).Error(); !strings.HasSuffix(got, tc.want) {
			t.Errorf("explain(%v) = %q, want it to end with %q", tc.err, got, tc.want)
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{name: "netspec0", ok: true},
		{name: "a", ok: true},
		{name: "fifteen-chars-x", ok: true},
		{name: "sixteen-chars-xx"},
		{name: ""},
		{name: "."},
		{name: ".."},
		{name: "a b"},
		{name: "a:b"},
		{name: "a/b"},
	} {
		if err := checkName(tc.name); (err == nil) != tc.ok {
			t.Errorf("checkName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
