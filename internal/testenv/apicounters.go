package testenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// APICounters are counters of an API server, read from its /metrics: the requests it
// served by verb and resource ("request POST tenants", "request PUT tenants/status") and
// the watch events it sent by resource ("watch event tenants"). Watches themselves and
// non-resource requests (/metrics, discovery, /healthz) are not counted.
type APICounters map[string]float64

// ReadAPICounters reads apiserver_request_total and apiserver_watch_events_total from the
// API server of cfg (whose user may GET /metrics).
func ReadAPICounters(ctx context.Context, cfg *rest.Config) (APICounters, error) {
	var out APICounters
	err := readMetrics(ctx, cfg, func(r io.Reader) (err error) {
		out, err = parseAPICounters(r)
		return err
	})
	return out, err
}

// ReadMetricSum reads from the API server of cfg the sum of the series of metric name
// whose labels include every one of labels (the value of a gauge or a counter; a
// histogram's series by their full name).
func ReadMetricSum(ctx context.Context, cfg *rest.Config, name string, labels map[string]string) (float64, error) {
	var sum float64
	err := readMetrics(ctx, cfg, func(r io.Reader) error {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, name+"{") {
				continue
			}
			have := metricLabels(line)
			match := true
			for k, v := range labels {
				match = match && have[k] == v
			}
			if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); match && err == nil {
				sum += v
			}
		}
		return sc.Err()
	})
	return sum, err
}

// readMetrics hands the API server's /metrics to parse.
func readMetrics(ctx context.Context, cfg *rest.Config, parse func(io.Reader) error) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
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
		return fmt.Errorf("GET /metrics: %s: %s", resp.Status, b)
	}
	return parse(resp.Body)
}

func parseAPICounters(r io.Reader) (APICounters, error) {
	out := APICounters{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var key string
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
			l := metricLabels(line)
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
			key = "watch event " + metricLabels(line)["resource"]
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

// metricLabels parses the labels of one Prometheus text line.
func metricLabels(line string) map[string]string {
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

// Since is what each counter gained after before, for the counters that gained.
func (after APICounters) Since(before APICounters) APICounters {
	out := APICounters{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// APIRate is one counter's gain per handshake.
type APIRate struct {
	What string
	Per  float64
}

// PerHandshake is what each counter gained after before, divided by n, largest first
// (gains under 0.05 per handshake are left out).
func (after APICounters) PerHandshake(before APICounters, n int) []APIRate {
	var out []APIRate
	for k, v := range after.Since(before) {
		if d := v / float64(n); d >= 0.05 {
			out = append(out, APIRate{k, d})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Per > out[j].Per || out[i].Per == out[j].Per && out[i].What < out[j].What
	})
	return out
}

// FreeLoopbackAddr returns a loopback address with a port nothing listens on right now.
func FreeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }() // only its address was wanted
	return l.Addr().String(), nil
}
