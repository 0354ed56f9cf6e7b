// Command runcwrap is the container runtime the kind suite's private Docker engine runs
// containers with: it takes CAP_SYS_RESOURCE out of what a container asks for and then
// runs the real runc with the same arguments.
//
// Why: on VMs whose root has no CAP_SYS_RESOURCE in its bounding set, runc cannot grant
// it, so every privileged container (a kind node is one) fails with "unable to apply
// caps: operation not permitted". No runc or Docker option drops one capability from
// privileged containers, hence this small wrapper, registered in the engine's
// daemon.json as its default runtime. Where the capability is held, it changes nothing
// that runc would have granted.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// withheld is the capability the machine does not give.
const withheld = "CAP_SYS_RESOURCE"

func main() {
	if err := rewrite(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "runcwrap:", err)
		os.Exit(1)
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		fmt.Fprintln(os.Stderr, "runcwrap:", err)
		os.Exit(1)
	}
	args := append([]string{runc}, os.Args[1:]...)
	if err := syscall.Exec(runc, args, os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "runcwrap:", err)
		os.Exit(1)
	}
}

// rewrite finds the OCI files runc is about to read — the bundle's config.json on
// create and run, the --process file on exec — and drops the withheld capability from
// them.
func rewrite(args []string) error {
	command, flags := subcommand(args)
	switch command {
	case "create", "run":
		bundle := flagValue(flags, "--bundle", "-b")
		if bundle == "" {
			bundle = "."
		}
		return dropCapability(filepath.Join(bundle, "config.json"), func(doc map[string]any) map[string]any {
			process, _ := doc["process"].(map[string]any)
			return process
		})
	case "exec":
		if file := flagValue(flags, "--process", "-p"); file != "" {
			return dropCapability(file, func(doc map[string]any) map[string]any { return doc })
		}
	}
	return nil
}

// subcommand returns runc's command and the arguments after it; global flags come
// before it (dockerd passes --root, --log and --log-format, each with a value).
func subcommand(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "" || arg[0] != '-' {
			return arg, args[i+1:]
		}
		if !strings.Contains(arg, "=") && takesValue(arg) {
			i++
		}
	}
	return "", nil
}

func takesValue(flag string) bool {
	return slices.Contains([]string{"--root", "--log", "--log-format", "--criu", "--rootless"}, flag)
}

// flagValue is the value of the first of names among flags, as "--name value" or
// "--name=value".
func flagValue(flags []string, names ...string) string {
	for i, arg := range flags {
		for _, name := range names {
			if arg == name && i+1 < len(flags) {
				return flags[i+1]
			}
			if value, ok := strings.CutPrefix(arg, name+"="); ok {
				return value
			}
		}
	}
	return ""
}

// dropCapability removes the withheld capability from every set of the process that
// process(doc) returns, keeping every other field of the file as it was.
func dropCapability(file string, process func(map[string]any) map[string]any) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	proc := process(doc)
	caps, _ := proc["capabilities"].(map[string]any)
	changed := false
	for set, list := range caps {
		names, _ := list.([]any)
		kept := slices.DeleteFunc(slices.Clone(names), func(name any) bool { return name == withheld })
		if len(kept) != len(names) {
			caps[set] = kept
			changed = true
		}
	}
	if !changed {
		return nil
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	info, err := os.Stat(file)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, info.Mode())
}
