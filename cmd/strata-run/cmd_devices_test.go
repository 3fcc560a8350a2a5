package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-hip/strata/kernels/abi"
	"github.com/strata-hip/strata/runtime/gpu"
)

// fakeBackend lists constructed devices: an iGPU enumerated first, then a discrete
// card, the classic case where another tool's ordinal points at the wrong device.
type fakeBackend struct{}

func (fakeBackend) Name() string    { return "zfake" }
func (fakeBackend) Load() error     { return nil }
func (fakeBackend) Library() string { return "libzfake.so" }
func (fakeBackend) Devices() ([]gpu.DeviceInfo, error) {
	return []gpu.DeviceInfo{
		{Backend: "zfake", Ordinal: 0, Name: "Fake iGPU", Arch: abi.CodeObjects[0].Target, PCIBusID: "0000:7c:00.0", Integrated: true},
		{Backend: "zfake", Ordinal: 1, Name: "Fake dGPU", Arch: abi.CodeObjects[0].Target, PCIBusID: "0000:03:00.0"},
		{Backend: "zfake", Ordinal: 2, Name: "Fake old dGPU", Arch: "unsupported_1", PCIBusID: "0000:04:00.0"},
	}, nil
}
func (fakeBackend) Open(int) (gpu.Driver, error) { panic("not used") }

func init() { gpu.Register(fakeBackend{}) }

// coDir makes a code-object directory holding the first abi code object (empty file).
func coDir(t *testing.T) string {
	dir := t.TempDir()
	p := filepath.Join(dir, abi.CodeObjects[0].Path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestListDevicesJSON(t *testing.T) {
	var out, errb bytes.Buffer
	if err := runListDevices([]string{"--json", "--timeout=0", "--co-dir", coDir(t)}, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	var l deviceList
	if err := json.Unmarshal(out.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	byName := map[string]deviceRow{}
	for _, d := range l.Devices {
		byName[d.Name] = d
	}
	if !byName["Fake dGPU"].Selected || byName["Fake iGPU"].Selected {
		t.Fatalf("the discrete card must be selected over the iGPU listed first: %+v", l.Devices)
	}
	if !strings.Contains(byName["Fake iGPU"].Reason, "integrated") || !strings.Contains(byName["Fake old dGPU"].Reason, "no code objects for unsupported_1") {
		t.Fatalf("reasons: %+v", l.Devices)
	}
	if l.Devices[l.Selected].Name != "Fake dGPU" {
		t.Fatalf("selected index %d", l.Selected)
	}
}

func TestListDevicesTableAndDevice(t *testing.T) {
	var out, errb bytes.Buffer
	dir := coDir(t)
	if err := run([]string{"--list-devices", "--timeout=0", "--co-dir", dir, "--device", "7c:00.0"}, &out, &errb); err != 0 {
		t.Fatalf("exit %d: %s", err, errb.String())
	}
	var marked string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "*") {
			marked = line
		}
	}
	if !strings.Contains(marked, "Fake iGPU") || !strings.Contains(marked, "selected: named by --device") {
		t.Fatalf("naming the iGPU by PCI bus id selects it; marked line %q in\n%s", marked, out.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"list-devices", "--timeout=0", "--co-dir", dir, "--device", "geforce"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), `--device "geforce" matches no index, PCI bus id or device name`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

// TestListDevicesChild: discovery runs in a child process by default; its JSON is
// printed as the table, and a child that hangs is cut off with an explanation.
func TestListDevicesChild(t *testing.T) {
	dir := coDir(t)
	l, err := collectDevices("", dir, false)
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	old := probeCommand
	defer func() { probeCommand = old }()
	var gotArgs []string
	probeCommand = func(ctx context.Context, args []string) (*exec.Cmd, error) {
		gotArgs = args
		return exec.CommandContext(ctx, "sh", "-c", `printf '%s' "$0"; exit 1`, string(js)), nil
	}
	var out, errb bytes.Buffer
	if err := runListDevices([]string{"--co-dir", dir}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(gotArgs, " "), "--json --timeout=0") {
		t.Fatalf("child arguments %q", gotArgs)
	}
	if !strings.Contains(out.String(), "*  1      zfake:1  Fake dGPU") {
		t.Fatalf("the child's list must be printed with the selection marked:\n%s", out.String())
	}

	// The child is cut off, not waited for: it ends killed by a signal (exit code -1),
	// where a sleep that ran its course would exit 0.
	var child *exec.Cmd
	probeCommand = func(ctx context.Context, args []string) (*exec.Cmd, error) {
		child = exec.CommandContext(ctx, "sleep", "10")
		return child, nil
	}
	err = runListDevices([]string{"--timeout=200ms"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "did not finish within 200ms") {
		t.Fatalf("a hung child must be reported with an explanation, got %v", err)
	}
	if child.ProcessState == nil || child.ProcessState.ExitCode() != -1 {
		t.Fatalf("a hung child must be killed at the deadline, it ended with %v", child.ProcessState)
	}

	probeCommand = func(ctx context.Context, args []string) (*exec.Cmd, error) {
		return exec.CommandContext(ctx, "sh", "-c", "echo 'segfault in runtime init' >&2; exit 139"), nil
	}
	err = runListDevices(nil, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "segfault in runtime init") {
		t.Fatalf("a crashed child must be reported with its stderr, got %v", err)
	}
}

// TestDeviceTargetMatchesEngine: the target list-devices (and gpu.Select) shows for a
// device is the one the GPU engine loads (kernels/abi.TargetFor): for every target of this
// build, with a feature suffix, for NVIDIA devices newer than a target, and for none.
func TestDeviceTargetMatchesEngine(t *testing.T) {
	have := abi.TargetNames()
	var archs []string
	for _, tg := range have {
		archs = append(archs, tg, tg+":sramecc-:xnack-")
		if digits, ok := strings.CutPrefix(tg, "sm_"); ok {
			cc, err := strconv.Atoi(digits)
			if err != nil {
				t.Fatalf("target %s: %v", tg, err)
			}
			archs = append(archs, "sm_"+strconv.Itoa(cc+1), "sm_"+strconv.Itoa(cc+31))
		}
	}
	archs = append(archs, "unsupported_1", "")
	for _, a := range archs {
		got, ok := gpu.MatchTarget(have, a)
		want, wantOK := abi.TargetFor(a)
		if got != want || ok != wantOK {
			t.Errorf("device arch %q: list-devices and gpu.Select match %q (%v), the engine loads %q (%v)", a, got, ok, want, wantOK)
		}
	}
}
