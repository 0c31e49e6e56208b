package issuer

import (
	"context"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// DefaultSignerWait is how long an issuance that has just approved its request waits for
// the signer before it reports the certificate pending: the signer of a healthy cluster
// answers in milliseconds, and a certificate published by the reconcile that asked for it
// saves the Tenant a status write and a reconcile.
const DefaultSignerWait = time.Second

// Signatures tells issuances waiting for the signer that it answered, from the events of
// the manager's CertificateSigningRequest informer (Handler): nothing polls.
type Signatures struct {
	mu      sync.Mutex
	waiting map[string]chan struct{}
}

// NewSignatures returns Signatures with nobody waiting.
func NewSignatures() *Signatures { return &Signatures{waiting: map[string]chan struct{}{}} }

// expect returns a channel closed once the signer answers the CSR named name (it issued
// a certificate, or failed it); it is asked before the approval, so that no answer is
// missed. done forgets it.
func (s *Signatures) expect(name string) (answered <-chan struct{}, done func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.waiting[name]
	if !ok {
		ch = make(chan struct{})
		s.waiting[name] = ch
	}
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.waiting[name] == ch {
			delete(s.waiting, name)
		}
	}
}

// wait returns once answered is closed, wait has passed, or ctx ended.
func wait(ctx context.Context, answered <-chan struct{}, wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-answered:
	case <-t.C:
	case <-ctx.Done():
	}
}

// Handler is the informer event handler that feeds s: it runs after the informer's store
// holds the object, so a waiter that wakes up reads the answer from the cache.
func (s *Signatures) Handler() toolscache.ResourceEventHandler {
	notify := func(obj any) {
		csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
		if !ok {
			return
		}
		_, _, failed := CSRState(csr)
		if len(csr.Status.Certificate) == 0 && failed == nil {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if ch, ok := s.waiting[csr.Name]; ok {
			close(ch)
			delete(s.waiting, csr.Name)
		}
	}
	return toolscache.ResourceEventHandlerFuncs{AddFunc: notify, UpdateFunc: func(_, obj any) { notify(obj) }}
}
