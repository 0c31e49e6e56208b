// Package version carries the build's version, stamped by the linker:
//
//	-ldflags "-X github.com/liqo-auth/liqo-auth/internal/version.version=v1.2.3 -X ...commit=abc"
package version

import (
	"fmt"
	"runtime"
)

// Set by -ldflags -X at build time; never written at run time.
var (
	version = "dev"
	commit  = "unknown"
	date    = "unknown"
)

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the build information.
func Get() Info {
	return Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// String renders the information on one line.
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s, %s)", i.Version, i.Commit, i.Date, i.GoVersion, i.Platform)
}
