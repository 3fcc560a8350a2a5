package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelp: help lists every subcommand and the default command's flags, on stdout.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"help", "-h", "--help"} {
		var out, errb bytes.Buffer
		if code := run([]string{arg}, &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d, stderr %q", arg, code, errb.String())
		}
		for name := range subcommands {
			if !strings.Contains(out.String(), "  "+name+" ") {
				t.Errorf("%s: subcommand %s not listed:\n%s", arg, name, out.String())
			}
		}
		for _, flag := range []string{"-m string", "-p string", "-temp float"} {
			if !strings.Contains(out.String(), flag) {
				t.Errorf("%s: generation flag %q not listed:\n%s", arg, flag, out.String())
			}
		}
		if errb.Len() != 0 {
			t.Errorf("%s: help wrote to stderr: %q", arg, errb.String())
		}
	}
}

// TestUnknownFirstArgument: a word that is no subcommand goes to the default command,
// which refuses it as a usage error (exit 2) pointing at help.
func TestUnknownFirstArgument(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"inpsect", "x.gguf"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "strata-run help") {
		t.Fatalf("exit %d, stderr %q; want 2 and a pointer to strata-run help", code, errb.String())
	}
}

// TestFlagErrorsAreUsageErrors: an unknown flag or a bad flag value, in the default command
// and in every subcommand, exits with status 2 (errUsage); -h exits 0.
func TestFlagErrorsAreUsageErrors(t *testing.T) {
	cases := [][]string{{"--no-such-flag"}, {"-n", "many"}, {"--temp", "hot"}}
	for name := range subcommands {
		cases = append(cases, []string{name, "--no-such-flag"})
	}
	cases = append(cases, []string{"perplexity", "-c", "x"}, []string{"convert", "dir", "-o"})
	for _, args := range cases {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2; stderr %q", args, code, errb.String())
		}
	}
	for name := range subcommands {
		var out, errb bytes.Buffer
		if code := run([]string{name, "-h"}, &out, &errb); code != 0 {
			t.Errorf("%s -h: exit %d, want 0", name, code)
		}
	}
}
