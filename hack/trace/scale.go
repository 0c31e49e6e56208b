package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/liqo-auth/liqo-auth/internal/testenv"
	"github.com/liqo-auth/liqo-auth/pkg/apis/scheme"
)

// scale authenticates n virtual consumers at once into the provider, as the benchmark's
// scale run does, and prints the provider's requests per handshake by who asked, verb and
// resource, read from its audit log.
func (s *session) scale(ctx context.Context, n int, out io.Writer) error {
	c, err := testenv.UnthrottledClient(s.p.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	consumers, err := testenv.NewVirtualConsumers("cl-trace-", n)
	if err != nil {
		return err
	}
	start := time.Now()
	var eg errgroup.Group
	for _, v := range consumers {
		eg.Go(func() error {
			_, authErr := v.Authenticate(ctx, c, "cl-provider")
			return authErr
		})
	}
	if waitErr := eg.Wait(); waitErr != nil {
		return waitErr
	}
	end := time.Now()
	time.Sleep(2 * time.Second) // what follows the certificates (marks, deletions), and the audit log's writes
	evs, err := auditEvents(s.p, start, end.Add(2*time.Second), s.o.all)
	if err != nil {
		return err
	}
	type key struct{ user, verb, res string }
	counts := map[key]int{}
	for _, e := range evs {
		counts[key{strings.TrimPrefix(e.User.Username, "system:serviceaccount:"), e.Verb, e.resource()}]++
	}
	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(strings.Compare(a.user, b.user), -cmp.Compare(counts[a], counts[b]), strings.Compare(a.res, b.res), strings.Compare(a.verb, b.verb))
	})
	fmt.Fprintf(out, "%d virtual consumers into the provider's manager: %v; the provider's requests per handshake (%d in all)\n\n", n, end.Sub(start).Round(time.Millisecond), len(evs))
	fmt.Fprintln(out, "per handshake  user  verb  resource")
	for _, k := range keys {
		fmt.Fprintf(out, "%8.2f  %-34.34s %-7s %s\n", float64(counts[k])/float64(n), k.user, k.verb, k.res)
	}
	return reconciles(ctx, s.metrics, n, out)
}

// reconciles prints the reconciles of the manager serving its metrics at addr, per
// handshake of n, by controller and result.
func reconciles(ctx context.Context, addr string, n int, out io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	fmt.Fprintln(out, "\nthe manager's reconciles per handshake")
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		labels, value, ok := strings.Cut(sc.Text(), "} ")
		if !ok || !strings.HasPrefix(labels, "controller_runtime_reconcile_total{") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || v == 0 {
			continue
		}
		fmt.Fprintf(out, "%8.2f  %s}\n", v/float64(n), strings.TrimPrefix(labels, "controller_runtime_reconcile_total"))
	}
	return sc.Err()
}
