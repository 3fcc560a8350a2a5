// Command strata-run runs quantized Mixture-of-Experts GGUF models on the CPU or a GPU,
// and carries the project's tools (inspect, tokenize, convert, check-logits, ...).
//
// Subcommands register themselves from their own files (cmd_<name>.go) through
// register, so each concern stays in one file and main stays small.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
)

// subcommand is one `strata-run NAME ...` entry.
type subcommand struct {
	name  string
	usage string                                              // one line for the help text
	run   func(args []string, stdout, stderr io.Writer) error // args exclude the name
}

var subcommands = map[string]subcommand{}

// register adds a subcommand; called from init functions of cmd_<name>.go files.
func register(c subcommand) {
	if _, dup := subcommands[c.name]; dup {
		panic("strata-run: subcommand registered twice: " + c.name)
	}
	subcommands[c.name] = c
}

// defaultRun is what `strata-run [flags]` without a subcommand does (generation).
// cmd_generate.go sets it; until then the default prints the help.
var defaultRun func(args []string, stdout, stderr io.Writer) error

// flagCommands maps flags that users type like llama.cpp's (`strata-run --list-devices`)
// to the subcommand that implements them.
var flagCommands = map[string]string{"--list-devices": "list-devices"}

// errUsage marks an error whose message already explains the usage problem (exit status 2).
var errUsage = errors.New("usage")

// parseFlags parses a subcommand's flags. A bad flag or flag value, which the flag package
// has already reported on the FlagSet's output with the flag list, becomes a usage error
// (exit status 2); -h/--help stays flag.ErrHelp (exit status 0).
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return fmt.Errorf("%w: %w", errUsage, err)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	var err error
	if len(args) > 0 && flagCommands[args[0]] != "" {
		args = append([]string{flagCommands[args[0]]}, args[1:]...)
	}
	switch {
	case len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help"):
		printHelp(stdout)
		if defaultRun != nil {
			// The default command's flags (-m, -p, --temp, ...) are otherwise only shown
			// after a mistake; its -h prints them and returns flag.ErrHelp.
			fmt.Fprintln(stdout, "\nflags of the default command (generation):")
			_ = defaultRun([]string{"-h"}, stdout, stdout)
		}
		return 0
	case len(args) > 0 && subcommands[args[0]].run != nil:
		err = subcommands[args[0]].run(args[1:], stdout, stderr)
	case defaultRun != nil:
		err = defaultRun(args, stdout, stderr)
	default:
		printHelp(stderr)
		return 2
	}
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(stderr, "strata-run:", err)
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "usage: strata-run [-m MODEL.gguf] [-p PROMPT] [flags]   generate text (default model: the embedded demo)")
	fmt.Fprintln(w, "       strata-run COMMAND [args]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-14s %s\n", n, subcommands[n].usage)
	}
}
