package main

import (
	"context"
	"flag"
	"fmt"
	"runtime/debug"
)

// runVersion is `boxbroker version` (and `boxbroker --version`): the main
// module's version and the VCS revision it was built from, as the Go
// toolchain recorded them in the binary's build information.
func runVersion(_ context.Context, c *cli, args []string) error {
	fs := flag.NewFlagSet("boxbroker version", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: version takes no arguments", errUsage)
	}
	fmt.Fprintln(c.stdout, versionLine(debug.ReadBuildInfo()))
	return nil
}

// versionLine says the module path and version, the revision, its time
// and whether the tree had changes, from what debug.ReadBuildInfo gives.
func versionLine(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "boxbroker (no build information in this binary)"
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", with uncommitted changes"
			}
		}
	}
	line := fmt.Sprintf("boxbroker %s %s", bi.Main.Path, version)
	if rev == "" {
		line += ", no VCS revision recorded"
	} else {
		line += ", revision " + rev
		if at != "" {
			line += " (" + at + ")"
		}
		line += modified
	}
	return line + ", " + bi.GoVersion
}
