package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"netspec.dev/netspec/daemon"
	"netspec.dev/netspec/internal/testnet"
)

// gossipPort is the port every agent gossips on (memberlist's default).
const gossipPort = 7946

// built is the netspec binary of this test run, built once by netspecBin.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	flag.Parse()
	atLeastParallel(64) // more than the package has tests
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// netspecBin builds the netspec command once per test run (go test puts
// its toolchain's go first in PATH) and returns the binary's path. It
// skips the test first, loudly, unless it can run the agents (root, ip
// and nft).
func netspecBin(t *testing.T) string {
	t.Helper()
	testnet.Require(t, "nft")
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "netspec-e2e-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "netspec")
		start := time.Now()
		out, err := exec.Command("go", "build", "-o", built.bin, "netspec.dev/netspec/cmd/netspec").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build netspec: %v\n%s", err, out)
			return
		}
		t.Logf("built netspec in %s", time.Since(start).Round(time.Millisecond))
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// agent is the netspec watch of one node (or of an intruder), run as a
// process of its own inside the node's namespace; restarted, it keeps
// its state dir and its log.
type agent struct {
	t     *testing.T
	name  string // --node
	ns    *testnet.NS
	state string // --state-dir
	args  []string
	log   logBuf

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd ended
	runs int
}

// newAgent prepares the agent of node name in ns watching tree; gossip,
// when not nil, are its gossip flags. It does not start it.
func newAgent(t *testing.T, ns *testnet.NS, name, tree string, gossip []string) *agent {
	t.Helper()
	a := &agent{t: t, name: name, ns: ns, state: t.TempDir()}
	a.args = append([]string{"watch", tree, "--node", name, "--state-dir", a.state,
		"--probes", "--log-format", "json"}, gossip...)
	t.Cleanup(func() {
		a.kill()
		if t.Failed() {
			t.Logf("log of the agent of %s:\n%s", a.name, a.log.String())
		}
	})
	return a
}

// gossipFlags are the gossip flags of an agent listening on addr, joining
// through join (addresses without port), with the key file key.
func gossipFlags(addr string, join []string, key string) []string {
	var j []string
	for _, a := range join {
		j = append(j, fmt.Sprintf("%s:%d", a, gossipPort))
	}
	return []string{"--gossip-listen", fmt.Sprintf("%s:%d", addr, gossipPort),
		"--join", strings.Join(j, ","), "--gossip-key-file", key}
}

// writeKey writes a new gossip key file (one base64 AES-256 key) into a
// new directory and returns its path.
func writeKey(t *testing.T) string {
	t.Helper()
	k := make([]byte, 32)
	rand.Read(k)
	p := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// start starts the agent; it must not be running.
func (a *agent) start() {
	a.t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd != nil {
		a.t.Fatalf("agent of %s started twice", a.name)
	}
	a.runs++
	fmt.Fprintf(&a.log, "--- start %d: netspec %s\n", a.runs, strings.Join(a.args, " "))
	cmd := exec.Command("ip", append([]string{"netns", "exec", a.ns.Name, netspecBin(a.t)}, a.args...)...)
	cmd.Stdout, cmd.Stderr = &a.log, &a.log
	// If the test process dies without its cleanup (a go test timeout),
	// the agent dies with it rather than run on.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		a.t.Fatalf("start the agent of %s: %v", a.name, err)
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(&a.log, "--- ended: %v\n", err)
		close(done)
	}()
	a.cmd, a.done = cmd, done
}

// pid is the running agent's process id (ip netns exec execs netspec, so
// it is netspec's); 0 when it is not running.
func (a *agent) pid() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil {
		return 0
	}
	return a.cmd.Process.Pid
}

// kill sends SIGKILL (kill -9) and waits for the process to end; a
// stopped agent is left as it is.
func (a *agent) kill() { a.signal(syscall.SIGKILL) }

// stop sends SIGTERM and waits for the process to end (SIGKILL after
// deadline).
func (a *agent) stop() { a.signal(syscall.SIGTERM) }

func (a *agent) signal(sig syscall.Signal) {
	a.mu.Lock()
	cmd, done := a.cmd, a.done
	a.cmd = nil
	a.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(deadline):
		cmd.Process.Kill()
		<-done
		a.t.Errorf("the agent of %s did not end within %s of %v; killed", a.name, deadline, sig)
	}
}

// status asks the running agent for its status over its socket.
func (a *agent) status() (*daemon.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return daemon.QueryStatus(ctx, filepath.Join(a.state, daemon.SocketName))
}

// synced tells whether the running agent answers and has applied the
// tree, with its status (or error) as detail.
func (a *agent) synced() (bool, string) {
	pid := a.pid()
	st, err := a.status()
	switch {
	case err != nil:
		return false, err.Error()
	case pid == 0:
		return false, "not running"
	case st.PID != pid:
		return false, fmt.Sprintf("status from pid %d, want %d", st.PID, pid)
	case st.LastSync == nil:
		return false, "no sync yet"
	}
	// A sync after the one that applied the tree may change nothing: a
	// probe sync for a change of the fleet's view, with gossip.
	r := st.LastSync.Result
	return st.Revision != nil && (r == daemon.ResultApplied || r == daemon.ResultUnchanged), fmt.Sprintf("last sync %+v", *st.LastSync)
}

// fleetStatus is what this test assumes `netspec status --fleet --json`
// prints: the members the agent knows and whether it fails static, with
// the counts of the tree's nodes dead, suspect and seen.
type fleetStatus struct {
	Members    []fleetMember `json:"members"`
	FailStatic bool          `json:"failStatic"`
	Dead       int           `json:"dead"`
	Suspect    int           `json:"suspect"`
	Ever       int           `json:"ever"`
}

// fleetMember is a member in fleetStatus.
type fleetMember struct {
	Name     string    `json:"name"`
	State    string    `json:"state"` // alive, suspect, dead or left
	Address  string    `json:"address"`
	Revision string    `json:"revision"`
	Since    time.Time `json:"since"`
}

// member returns the member called name, or nil.
func (s *fleetStatus) member(name string) *fleetMember {
	for i := range s.Members {
		if s.Members[i].Name == name {
			return &s.Members[i]
		}
	}
	return nil
}

// fleet runs netspec status --fleet --json for the agent.
func (a *agent) fleet() (*fleetStatus, error) {
	cmd := exec.Command(netspecBin(a.t), "status", "--fleet", "--json", "--state-dir", a.state)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("netspec status --fleet --json: %v: %s", err, stderr.Bytes())
	}
	var s fleetStatus
	if err := json.Unmarshal(out, &s); err != nil {
		return nil, fmt.Errorf("netspec status --fleet --json: %v:\n%s", err, out)
	}
	return &s, nil
}

// logBuf is an agent's log, written by its process and read by the test.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// lineWith returns the first line of the log that holds every one of
// words, or "".
func (l *logBuf) lineWith(words ...string) string {
	for line := range strings.Lines(l.String()) {
		all := true
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			return strings.TrimSuffix(line, "\n")
		}
	}
	return ""
}
