package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// apiCounters are counters of the provider's API server, read from its /metrics: the
// requests it served by verb and resource, and the watch events it sent by kind.
type apiCounters map[string]float64

// readAPICounters reads apiserver_request_total (by verb, resource, subresource) and
// apiserver_watch_events_total (by kind) from the API server of cfg.
func readAPICounters(ctx context.Context, cfg *rest.Config) (apiCounters, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET /metrics: %s: %s", resp.Status, b)
	}
	out := apiCounters{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var key string
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
			l := labels(line)
			if l["verb"] == "WATCH" || l["verb"] == "CONNECT" {
				continue
			}
			r := l["resource"]
			if l["subresource"] != "" {
				r += "/" + l["subresource"]
			}
			if r == "" {
				continue // non-resource URLs: /healthz, /metrics
			}
			key = "request " + l["verb"] + " " + r
		case strings.HasPrefix(line, "apiserver_watch_events_total{"):
			key = "watch event " + labels(line)["resource"]
		default:
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			continue
		}
		out[key] += v
	}
	return out, sc.Err()
}

// labels parses the labels of one Prometheus text line.
func labels(line string) map[string]string {
	out := map[string]string{}
	open, end := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
	if open < 0 || end < open {
		return out
	}
	for _, kv := range strings.Split(line[open+1:end], ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

// perHandshake is what changed between two readings, divided by n, largest first.
func (after apiCounters) perHandshake(before apiCounters, n int) []apiRate {
	var out []apiRate
	for k, v := range after {
		if d := (v - before[k]) / float64(n); d >= 0.05 {
			out = append(out, apiRate{k, d})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].per > out[j].per || out[i].per == out[j].per && out[i].what < out[j].what
	})
	return out
}

type apiRate struct {
	what string
	per  float64
}

// cpuProfile fetches a CPU profile of seconds from the pprof endpoint at base (an API
// server through cfg's client, or a manager's --pprof-bind-address) into path.
func cpuProfile(ctx context.Context, hc *http.Client, base string, seconds int, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(base, "/"), seconds), nil)
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
		return fmt.Errorf("profile from %s: %s: %s", base, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// freeLoopbackAddr returns a loopback address with a port free right now.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
