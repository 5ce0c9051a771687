package testnet

import (
	"net"
	"testing"
)

// FreeLoopbackAddr returns "127.0.0.1:PORT" with a port that is free for
// both UDP and TCP right now, for a server (DNS) that listens on both.
func FreeLoopbackAddr(t testing.TB) string {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := pc.LocalAddr().String()
		l, err := net.Listen("tcp", addr)
		pc.Close()
		if err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatal("no loopback port free for both UDP and TCP")
	return ""
}
