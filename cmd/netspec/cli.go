package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/pprof"
	"slices"
	"strings"

	"netspec.dev/netspec/applier/nft"
	"netspec.dev/netspec/internal/suggest"
)

// Exit codes, one rule for every command (as terraform's): 0 success, 1
// any error, a usage error (an unknown flag, a missing argument) included,
// and 2 only for "differences found" (plan and diff with
// --detailed-exitcode), so that a typo can never pass for differences.
const (
	exitOK      = 0
	exitError   = 1
	exitChanges = 2
)

// exitStatusHelp is the exit status rule, as --help gives it.
const exitStatusHelp = `Exit status: 0 success; 1 any error, a usage error (an unknown flag, a
missing argument) included; 2 only when plan or diff, with
--detailed-exitcode, found differences.`

// command is one subcommand of netspec.
type command struct {
	name    string
	args    string // positional arguments, for the usage line
	summary string
	help    string // what it does and examples
	// nargs is how many positional arguments it takes, and want how the
	// usage error names them ("one TREE"); nargs < 0: run checks them.
	nargs int
	want  string
	opts  func() options // a new set of its options, zero
}

// options are a command's flags and what it does with them.
type options interface {
	register(fs *flag.FlagSet) // defines its flags on fs, bound to its fields
	run(e *env, args []string) int
}

// runFunc is the options of a command without flags: its run function.
type runFunc func(e *env, args []string) int

func (runFunc) register(*flag.FlagSet)          {}
func (f runFunc) run(e *env, args []string) int { return f(e, args) }

// flagSet is c's flags, bound to a new set of its options.
func (c *command) flagSet() (*flag.FlagSet, options) {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := c.opts()
	o.register(fs)
	return fs, o
}

// env is what a command may touch: its output streams and working
// directory, and the node's nftables.
type env struct {
	stdin          io.Reader // a TREE of "-"; nil reads as empty
	stdout, stderr io.Writer
	// nftables is the nftables plan, apply and cleanup act on instead of
	// the kernel's: the script tests' nft.Fake. nil: the kernel's.
	nftables nft.Kernel
}

// commands is the command table, by name; each command's file defines
// its entry.
var commands = map[string]*command{}

func init() {
	for _, c := range []*command{applyCommand, cleanupCommand, completionCommand, diffCommand, explainCommand, lockCommand,
		planCommand, renderCommand, schemaCommand, statusCommand, validateCommand, versionCommand, watchCommand} {
		commands[c.name] = c
	}
}

const mainHelp = `netspec turns a directory of Kubernetes Service, Endpoints, EndpointSlice,
Pod and Node files (YAML, JSON or CUE) into load-balancing rules, DNS data and
service environment files on each node, without a Kubernetes API server.

Usage:
  netspec <command> [arguments] [flags]

Commands:
%s
Run 'netspec <command> --help' for a command's flags and examples.

%s

Examples:
  netspec validate examples/basic
  netspec lock examples/basic
  netspec validate --locked examples/basic   # in CI: fail when netspec.lock is stale
  netspec render examples/basic --node node-1 --out out/node-1
  netspec diff main-checkout/ pr-checkout/   # what a pull request changes, in sentences
  sudo netspec plan examples/basic --node node-1    # what apply would change on this machine
  sudo netspec apply examples/basic --node node-1   # install it (nftables, zone and env files)
`

// Main runs the netspec command line and returns the process exit code.
func Main() int {
	// NETSPEC_CPUPROFILE=FILE writes a CPU profile, for performance work.
	if f := os.Getenv("NETSPEC_CPUPROFILE"); f != "" {
		if out, err := os.Create(f); err == nil {
			defer out.Close()
			if pprof.StartCPUProfile(out) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	return run(os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
}

func run(args []string, e *env) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage())
		return exitError
	}
	name := args[0]
	switch name {
	case "-h", "--help", "-help", "help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				printCommandHelp(e.stdout, c)
				return exitOK
			}
			fmt.Fprintf(e.stderr, "netspec help: unknown command %q\n%s", args[1], didYouMean(args[1], sortedCommandNames()))
			return exitError
		}
		fmt.Fprint(e.stdout, usage())
		return exitOK
	case "-v", "--version":
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		if hint := didYouMean(name, sortedCommandNames()); hint != "" {
			fmt.Fprintf(e.stderr, "netspec: unknown command %q\n%sRun 'netspec --help' for the commands.\n", name, hint)
			return exitError
		}
		fmt.Fprintf(e.stderr, "netspec: unknown command %q\n\n%s", name, usage())
		return exitError
	}
	fs, opts := c.flagSet()
	pos, err := parseInterleaved(fs, args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		printCommandHelp(e.stdout, c)
		return exitOK
	case err != nil:
		return e.fail(c.name, "%v\n%sRun 'netspec %s --help' for usage.", err, flagHint(fs, err), c.name)
	case c.nargs >= 0 && len(pos) != c.nargs:
		return e.usageError(c.name, "want %s, got %d argument(s)", c.want, len(pos))
	}
	return opts.run(e, pos)
}

// sortedCommandNames are the names of the commands, sorted.
func sortedCommandNames() []string { return slices.Sorted(maps.Keys(commands)) }

// didYouMean is the line that suggests the candidate closest to a
// mistyped word ("did you mean validate?"), or "" when none is close.
func didYouMean(word string, candidates []string) string {
	if c, ok := suggest.Closest(word, candidates); ok {
		return fmt.Sprintf("did you mean %s?\n", c)
	}
	return ""
}

// undefinedFlag is how package flag starts the error of a flag it does
// not know, before the flag's name.
const undefinedFlag = "flag provided but not defined: -"

// flagHint is didYouMean for the flag that err (fs's parse error) says
// is not defined: the closest of fs's flags, with its dashes.
func flagHint(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), undefinedFlag)
	if !ok {
		return ""
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if c, ok := suggest.Closest(name, names); ok {
		return fmt.Sprintf("did you mean --%s?\n", c)
	}
	return ""
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments (netspec validate TREE --locked), as users expect.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func usage() string {
	var b strings.Builder
	for _, n := range sortedCommandNames() {
		fmt.Fprintf(&b, "  %-10s %s\n", n, commands[n].summary)
	}
	return fmt.Sprintf(mainHelp, b.String(), exitStatusHelp)
}

func printCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: netspec %s %s\n\n%s\n", c.name, c.args, strings.TrimSpace(c.help))
	fs, _ := c.flagSet()
	header := "\nFlags:\n"
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprint(w, header)
		header = ""
		name, u := flag.UnquoteUsage(f)
		if name != "" {
			name = " " + name
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			def = fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "  --%s%s\n        %s%s\n", f.Name, name, u, def)
	})
}

// fail reports an error of command cmd on stderr, as "netspec CMD: " and
// the message, and returns exitError: every command's errors read alike.
func (e *env) fail(cmd, format string, a ...any) int {
	fmt.Fprintf(e.stderr, "netspec "+cmd+": "+format+"\n", a...)
	return exitError
}

// printJSON writes v to stdout as every --json does, indented by two
// spaces, and a newline; an error is command cmd's.
func (e *env) printJSON(cmd string, v any) int {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return e.fail(cmd, "%v", err)
	}
	return exitOK
}

// usageError is fail for a usage error: it tells where the usage is.
func (e *env) usageError(cmd, format string, a ...any) int {
	return e.fail(cmd, format+"\nRun 'netspec %s --help' for usage.", append(a, cmd)...)
}
