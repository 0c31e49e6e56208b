package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// cpuProfile fetches a CPU profile of seconds from the pprof endpoint at base (an API
// server through cfg's client, or a manager's --pprof-bind-address) into path.
func cpuProfile(ctx context.Context, hc *http.Client, base string, seconds int, path string) error {
	return fetch(ctx, hc, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(base, "/"), seconds), path)
}

// fetch writes what url serves, through hc, to path.
func fetch(ctx context.Context, hc *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close() // the copy already failed; its error is the one to report
		return err
	}
	return f.Close()
}
