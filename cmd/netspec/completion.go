package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"

	"netspec.dev/netspec/render/ipvsmodel"
)

var completionCommand = &command{
	name:    "completion",
	args:    "bash|zsh|fish",
	summary: "print a shell completion script for netspec's commands and flags",
	help: `Completion prints a script that teaches a shell to complete netspec's
commands, their flags, the values of flags that take one of a few words
(--dataplane nftables|ipvs, --output text|json, ...), directories for flags
that take a DIR, and files and directories for TREE. The script is made
from the same table as --help, so it knows exactly this binary's commands.

Install it for your shell:

  bash   for the running shell:
           source <(netspec completion bash)
         for every new shell (needs the bash-completion package):
           netspec completion bash > ~/.local/share/bash-completion/completions/netspec
         or system-wide: > /etc/bash_completion.d/netspec
  zsh    into a directory of your $fpath, before compinit runs in ~/.zshrc:
           mkdir -p ~/.zfunc
           netspec completion zsh > ~/.zfunc/_netspec
           # in ~/.zshrc: fpath=(~/.zfunc $fpath); autoload -U compinit; compinit
         or for the running shell: source <(netspec completion zsh)
  fish   into fish's completions directory:
           netspec completion fish > ~/.config/fish/completions/netspec.fish

Regenerate it after upgrading netspec.

Exit status: 0 printed; 1 any error (an unknown shell, a usage error such
as an unknown flag).

Examples:
  source <(netspec completion bash)
  netspec completion zsh > "${fpath[1]}/_netspec"`,
	nargs: 1, want: "one shell: bash, zsh or fish",
	opts: func() options { return runFunc(runCompletion) },
}

func runCompletion(e *env, args []string) int {
	cmds := completionModel()
	switch args[0] {
	case "bash":
		writeBash(e.stdout, cmds)
	case "zsh":
		writeZsh(e.stdout, cmds)
	case "fish":
		writeFish(e.stdout, cmds)
	default:
		return e.fail("completion", "unknown shell %q: want bash, zsh or fish", args[0])
	}
	return exitOK
}

// How a word is completed.
const (
	compNone  = iota // nothing to offer (a node name, a duration)
	compFiles        // files and directories
	compDirs         // directories
	compWords        // one of words
)

// compFlag is a flag as the completion scripts see it.
type compFlag struct {
	name  string
	desc  string // the first clause of its usage
	value bool   // takes a value (is not a bool flag)
	comp  int
	words []string
}

// compCommand is a command as the completion scripts see it.
type compCommand struct {
	name, summary string
	flags         []compFlag
	args          int // how its positional arguments complete
	words         []string
}

// flagWords are the values of flags whose usage line does not list them
// as a|b|c (those are read from the command's args).
var flagWords = map[string][]string{
	"ipvs-scheduler": ipvsmodel.Schedulers,
	"log-level":      {"debug", "info", "warn", "error"},
}

// enumFlag matches "--flag a|b|c" in a command's usage line.
var enumFlag = regexp.MustCompile(`--([a-z][-a-z]*) ([a-z]+(?:\|[a-z]+)+)`)

// completionModel reads the command table: every command (and help), its
// flags with the values they take, and what its arguments are.
func completionModel() []compCommand {
	var out []compCommand
	for _, n := range sortedCommandNames() {
		c := commands[n]
		cc := compCommand{name: n, summary: c.summary}
		enums := map[string][]string{}
		for _, m := range enumFlag.FindAllStringSubmatch(c.args, -1) {
			enums[m[1]] = strings.Split(m[2], "|")
		}
		switch pos := strings.Fields(strings.Split(c.args, "--")[0]); {
		case strings.Contains(c.args, "TREE"):
			cc.args = compFiles
		case len(pos) == 1 && strings.Contains(pos[0], "|"):
			cc.args, cc.words = compWords, strings.Split(pos[0], "|")
		}
		fs, _ := c.flagSet()
		fs.VisitAll(func(f *flag.Flag) {
			name, usage := flag.UnquoteUsage(f)
			cf := compFlag{name: f.Name, desc: firstClause(usage)}
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				cf.value = true
				switch {
				case enums[f.Name] != nil:
					cf.comp, cf.words = compWords, enums[f.Name]
				case flagWords[f.Name] != nil:
					cf.comp, cf.words = compWords, flagWords[f.Name]
				case name == "DIR":
					cf.comp = compDirs
				case name == "FILE" || name == "PATH":
					cf.comp = compFiles
				}
			}
			cc.flags = append(cc.flags, cf)
		})
		out = append(out, cc)
	}
	help := compCommand{name: "help", summary: "show the help of netspec or of a command",
		args: compWords, words: sortedCommandNames()}
	return append(out, help)
}

// firstClause shortens a flag's usage for a completion menu.
func firstClause(s string) string {
	for _, sep := range []string{" (", "; ", ": "} {
		if i := strings.Index(s, sep); i > 0 {
			s = s[:i]
		}
	}
	if len(s) > 70 {
		cut := strings.LastIndexByte(s[:67], ' ')
		if cut < 0 {
			cut = 67
		}
		s = s[:cut] + "..."
	}
	return s
}

// writeBash writes a bash completion function: commands first, then per
// command the values of the flag before the cursor, its flags when the word
// starts with -, else its arguments. --flag=value words are understood.
func writeBash(w io.Writer, cmds []compCommand) {
	var names []string
	for _, c := range cmds {
		names = append(names, c.name)
	}
	fmt.Fprintf(w, `# bash completion for netspec; made by 'netspec completion bash'.
# Load it with: source <(netspec completion bash)
_netspec_files() {
    compopt -o filenames 2>/dev/null
    mapfile -t COMPREPLY < <(compgen -f -- "$1")
}
_netspec_dirs() {
    compopt -o filenames 2>/dev/null
    mapfile -t COMPREPLY < <(compgen -d -- "$1")
}
_netspec() {
    local cur prev cmd i
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev=""
    (( COMP_CWORD > 0 )) && prev="${COMP_WORDS[COMP_CWORD-1]}"
    # --flag=value: bash splits it at '=' (COMP_WORDBREAKS).
    if [[ "$cur" == "=" ]]; then
        cur=""
    elif [[ "$prev" == "=" ]] && (( COMP_CWORD > 1 )); then
        prev="${COMP_WORDS[COMP_CWORD-2]}"
    fi
    cmd=""
    for (( i = 1; i < COMP_CWORD; i++ )); do
        case "${COMP_WORDS[i]}" in
        -*) ;;
        *) cmd="${COMP_WORDS[i]}"; break ;;
        esac
    done
    COMPREPLY=()
    if [[ -z "$cmd" ]]; then
        if [[ "$cur" == -* ]]; then
            COMPREPLY=($(compgen -W "--help --version" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "%s" -- "$cur"))
        fi
        return 0
    fi
    case "$cmd" in
`, strings.Join(names, " "))
	for _, c := range cmds {
		fmt.Fprintf(w, "    %s)\n", c.name)
		var values, all []string
		for _, f := range c.flags {
			all = append(all, "--"+f.name)
			if !f.value {
				continue
			}
			switch f.comp {
			case compWords:
				values = append(values, fmt.Sprintf("        --%s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return 0 ;;", f.name, strings.Join(f.words, " ")))
			case compDirs:
				values = append(values, fmt.Sprintf("        --%s) _netspec_dirs \"$cur\"; return 0 ;;", f.name))
			case compFiles:
				values = append(values, fmt.Sprintf("        --%s) _netspec_files \"$cur\"; return 0 ;;", f.name))
			default:
				values = append(values, fmt.Sprintf("        --%s) return 0 ;;", f.name))
			}
		}
		if len(values) > 0 {
			fmt.Fprintf(w, "        case \"$prev\" in\n%s\n        esac\n", strings.Join(values, "\n"))
		}
		all = append(all, "--help")
		fmt.Fprintf(w, "        if [[ \"$cur\" == -* ]]; then\n            COMPREPLY=($(compgen -W %q -- \"$cur\"))\n            return 0\n        fi\n", strings.Join(all, " "))
		switch c.args {
		case compFiles:
			fmt.Fprintf(w, "        _netspec_files \"$cur\"\n")
		case compWords:
			fmt.Fprintf(w, "        COMPREPLY=($(compgen -W %q -- \"$cur\"))\n", strings.Join(c.words, " "))
		}
		fmt.Fprintf(w, "        ;;\n")
	}
	fmt.Fprintf(w, `    esac
    return 0
}
complete -F _netspec netspec
`)
}

// zshQuote escapes s for a description inside a single-quoted _arguments
// spec or _describe entry.
func zshQuote(s string) string {
	r := strings.NewReplacer("'", `'\''`, "[", `\[`, "]", `\]`, ":", `\:`)
	return r.Replace(s)
}

// writeZsh writes a zsh completion function (#compdef) built on _arguments.
func writeZsh(w io.Writer, cmds []compCommand) {
	fmt.Fprintf(w, "#compdef netspec\n# zsh completion for netspec; made by 'netspec completion zsh'.\n# Save it as _netspec in a directory of $fpath, or: source <(netspec completion zsh)\n\n_netspec() {\n    local -a commands\n    commands=(\n")
	for _, c := range cmds {
		fmt.Fprintf(w, "        '%s:%s'\n", c.name, zshQuote(c.summary))
	}
	fmt.Fprintf(w, "    )\n    if (( CURRENT == 2 )); then\n        _describe -t commands 'netspec command' commands\n        return\n    fi\n    local cmd=$words[2]\n    shift words\n    (( CURRENT-- ))\n    case $cmd in\n")
	for _, c := range cmds {
		fmt.Fprintf(w, "    %s)\n        _arguments -S \\\n", c.name)
		for _, f := range c.flags {
			if !f.value {
				fmt.Fprintf(w, "            '--%s[%s]' \\\n", f.name, zshQuote(f.desc))
				continue
			}
			action := " "
			switch f.comp {
			case compWords:
				action = "(" + strings.Join(f.words, " ") + ")"
			case compDirs:
				action = "_files -/"
			case compFiles:
				action = "_files"
			}
			fmt.Fprintf(w, "            '--%s=[%s]:%s:%s' \\\n", f.name, zshQuote(f.desc), f.name, action)
		}
		fmt.Fprintf(w, "            '(- *)--help[show the help of %s]' \\\n", c.name)
		switch c.args {
		case compFiles:
			fmt.Fprintf(w, "            '*:TREE:_files'\n")
		case compWords:
			fmt.Fprintf(w, "            '1:argument:(%s)'\n", strings.Join(c.words, " "))
		default:
			fmt.Fprintf(w, "            \n")
		}
		fmt.Fprintf(w, "        ;;\n")
	}
	fmt.Fprintf(w, "    esac\n}\n\nif [[ $zsh_eval_context[-1] == loadautofunc ]]; then\n    _netspec \"$@\"\nelse\n    compdef _netspec netspec\nfi\n")
}

// fishQuote escapes s for a single-quoted fish string.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// writeFish writes fish complete commands: no files unless a command's
// TREE or a flag's FILE or DIR asks for them.
func writeFish(w io.Writer, cmds []compCommand) {
	fmt.Fprintf(w, "# fish completion for netspec; made by 'netspec completion fish'.\n# Save it as ~/.config/fish/completions/netspec.fish\ncomplete -c netspec -f\n")
	for _, c := range cmds {
		fmt.Fprintf(w, "complete -c netspec -n __fish_use_subcommand -a %s -d %s\n", c.name, fishQuote(c.summary))
	}
	for _, c := range cmds {
		cond := fishQuote("__fish_seen_subcommand_from " + c.name)
		for _, f := range c.flags {
			opt := ""
			switch {
			case !f.value:
			case f.comp == compWords:
				opt = " -x -a " + fishQuote(strings.Join(f.words, " "))
			case f.comp == compDirs:
				opt = " -x -a '(__fish_complete_directories (commandline -ct))'"
			case f.comp == compFiles:
				opt = " -r -F"
			default:
				opt = " -x"
			}
			fmt.Fprintf(w, "complete -c netspec -n %s -l %s%s -d %s\n", cond, f.name, opt, fishQuote(f.desc))
		}
		switch c.args {
		case compFiles:
			fmt.Fprintf(w, "complete -c netspec -n %s -F\n", cond)
		case compWords:
			fmt.Fprintf(w, "complete -c netspec -n %s -a %s\n", cond, fishQuote(strings.Join(c.words, " ")))
		}
	}
}
