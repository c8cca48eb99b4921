package cmd

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the release, set at build time:
// -ldflags "-X github.com/paas-org/vip-allocator-operator/cmd.version=0.1.0".
var version string

// Version is what "vip-allocator version" prints.
type Version struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// buildVersion reads the version set at build time, else the module's, and
// the commit the Go toolchain recorded.
func buildVersion() Version {
	v := Version{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if v.Version == "" {
		v.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func newVersionCmd(program string) *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Example: examples(program,
			"version", "for a person",
			"version -o json", "for a program"),
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			v := buildVersion()
			switch output {
			case "":
				commit := cmp.Or(v.Commit, "unknown")
				if v.Modified {
					commit += " (modified)"
				}
				_, err := fmt.Fprintf(c.OutOrStdout(), "%s %s\ncommit: %s\ngo: %s %s\n", Name, v.Version, commit, v.GoVersion, v.Platform)
				return err
			case "json", "yaml":
				return printObject(c.OutOrStdout(), v, output)
			}
			return usageError(c, fmt.Errorf("-o %q: want json or yaml", output))
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "", "json or yaml; empty: for a person")
	return c
}
