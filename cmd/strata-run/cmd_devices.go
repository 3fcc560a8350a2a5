package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/runtime/gpu"

	_ "github.com/strata-hip/strata/runtime/cuda"
	_ "github.com/strata-hip/strata/runtime/hip"
)

// strata-run list-devices (also --list-devices): every GPU the runtimes see, which one
// would be selected and why each other one was passed over.
func init() {
	register(subcommand{
		name:  "list-devices",
		usage: "[--json] [--device SEL] [--allow-integrated] [--co-dir DIR] [--timeout D]  list GPUs, marking the one that would be used and why",
		run:   runListDevices,
	})
}

// deviceRow is one device in the --json output.
type deviceRow struct {
	gpu.DeviceInfo
	CodeObjects string `json:"code_objects,omitempty"` // the matching target, if this build has one
	Selected    bool   `json:"selected"`
	Reason      string `json:"reason"`
}

type deviceList struct {
	Devices    []deviceRow       `json:"devices"`
	Selected   int               `json:"selected"` // index, −1 when none
	Problem    string            `json:"problem,omitempty"`
	Backends   map[string]string `json:"backends"` // name → library loaded, or why not
	Visibility []gpu.VisibleVar  `json:"visibility,omitempty"`
	CodeDir    string            `json:"code_object_dir"`
	Have       []string          `json:"code_object_targets"`
}

func runListDevices(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("list-devices", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	device := fs.String("device", "", "show what --device SEL would select: an index, cuda:N / hip:N, a PCI bus id, or a name substring")
	coDir := fs.String("co-dir", defaultCODir(), "directory of compiled code objects (`just co`); env STRATA_CO_DIR")
	igpu := fs.Bool("allow-integrated", false, "let the default choice take an integrated GPU")
	timeout := fs.Duration("timeout", 30*time.Second, "enumerate in a child process and give up after this long (a GPU runtime can hang in initialisation); 0 enumerates in this process")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("list-devices takes no arguments, got %q: %w", fs.Args(), errUsage)
	}
	var out deviceList
	var err error
	if *timeout > 0 {
		out, err = probeDevices(*timeout, []string{"list-devices", "--json", "--timeout=0", "--device=" + *device,
			"--co-dir=" + *coDir, "--allow-integrated=" + strconv.FormatBool(*igpu)})
	} else {
		out, err = collectDevices(*device, *coDir, *igpu)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		printDevices(stdout, out)
	}
	if *device != "" && out.Selected < 0 {
		return errors.New(out.Problem)
	}
	return nil
}

// probeCommand makes the child process that enumerates devices; tests replace it.
var probeCommand = func(ctx context.Context, args []string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("list-devices: cannot find this program to run device discovery in a child: %w (use --timeout 0)", err)
	}
	return exec.CommandContext(ctx, self, args...), nil
}

// probeDevices runs discovery in a child process with a deadline, so a runtime that
// hangs or crashes while initialising a device (seen with integrated GPUs) cannot take
// this process with it; the child prints the list as JSON.
func probeDevices(timeout time.Duration, args []string) (deviceList, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd, err := probeCommand(ctx, args)
	if err != nil {
		return deviceList{}, err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return deviceList{}, fmt.Errorf("device discovery did not finish within %v: a GPU runtime hung while initialising a device; "+
			"hide that device with HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES, or raise --timeout", timeout)
	}
	var out deviceList
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return deviceList{}, fmt.Errorf("device discovery in a child process failed (%v): %s", runErr, strings.TrimSpace(stderr.String()))
	}
	return out, nil // a child that exits 1 for an unmatched --device still printed the list
}

// collectDevices enumerates in this process and applies selection.
func collectDevices(device, coDir string, igpu bool) (deviceList, error) {
	l, err := gpu.Enumerate()
	if err != nil {
		return deviceList{}, err
	}
	out := deviceList{Selected: -1, Backends: map[string]string{}, Visibility: l.Visibility, CodeDir: coDir, Have: targetsWithCodeObjects(coDir)}
	for _, b := range l.Backends {
		switch {
		case b.Err != nil && b.Library != "":
			out.Backends[b.Name] = b.Library + ": " + b.Err.Error()
		case b.Err != nil:
			out.Backends[b.Name] = b.Err.Error()
		default:
			out.Backends[b.Name] = fmt.Sprintf("%s: %d device(s)", b.Library, b.Devices)
		}
	}
	ch, selErr := gpu.Select(l.Devices, gpu.Request{Device: device, Have: out.Have, AllowIntegrated: igpu})
	if selErr != nil {
		var se *gpu.SelectError
		if errors.As(selErr, &se) {
			out.Problem = se.Problem
		} else {
			out.Problem = selErr.Error()
		}
	}
	out.Selected = ch.Index
	for i, d := range l.Devices {
		t, _ := gpu.MatchTarget(out.Have, d.Arch)
		out.Devices = append(out.Devices, deviceRow{DeviceInfo: d, CodeObjects: t, Selected: i == ch.Index, Reason: ch.Reasons[i]})
	}
	return out, nil
}

func printDevices(w io.Writer, l deviceList) {
	for _, name := range slices.Sorted(maps.Keys(l.Backends)) {
		line := l.Backends[name]
		if !strings.HasPrefix(line, name+": ") {
			line = name + ": " + line
		}
		fmt.Fprintln(w, line)
	}
	for _, v := range l.Visibility {
		fmt.Fprintf(w, "%s\n", v)
	}
	fmt.Fprintf(w, "code objects: %s %v\n\n", l.CodeDir, l.Have)
	if len(l.Devices) == 0 {
		fmt.Fprintln(w, "no GPU devices found; strata-run will use the CPU")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tindex\tid\tname\tarch\tfree/total GiB\tpci bus id\tkind\tcode objects\twhy")
	for _, d := range l.Devices {
		mark, kind, co := " ", "discrete", d.CodeObjects
		if d.Selected {
			mark = "*"
		}
		if d.Integrated {
			kind = "integrated"
		}
		if co == "" {
			co = "none"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%.1f/%.1f\t%s\t%s\t%s\t%s\n", mark, d.Index, d.ID(), d.Name, d.Arch,
			float64(d.FreeMem)/(1<<30), float64(d.TotalMem)/(1<<30), d.PCIBusID, kind, co, d.Reason)
	}
	tw.Flush()
	if l.Problem != "" {
		fmt.Fprintf(w, "\nno device selected: %s\n", l.Problem)
	}
}

// defaultCODir is $STRATA_CO_DIR or build/co.
func defaultCODir() string {
	if d := os.Getenv("STRATA_CO_DIR"); d != "" {
		return d
	}
	return filepath.Join("build", "co")
}

// targetsWithCodeObjects lists the targets with at least one code object file in dir.
func targetsWithCodeObjects(dir string) []string {
	var have []string
	for _, c := range abi.CodeObjects {
		if len(have) > 0 && have[len(have)-1] == c.Target {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, c.Path)); err == nil {
			have = append(have, c.Target)
		}
	}
	return have
}
