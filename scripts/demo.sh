#!/usr/bin/env bash
# demo.sh BIN DIR: two local clusters, liqoctl install on both, authenticate, look at the
# identity and what it may do, verify it, ask for a resource slice and use its narrower
# identity, cordon, renew now, show the peer status and metrics, give the slice back,
# unauthenticate, show the old credential refused; then a declarative peering with kubectl
# apply only (a peering user, liqoctl generate peering, the managers carry it out), deleted
# again; clean up.
set -euo pipefail
bin=${1:-bin}; dir=${2:-.devclusters/demo}
liqoctl="$bin/liqoctl"; devclusters="$bin/devclusters"
command -v kubectl >/dev/null || { echo "demo: kubectl is needed to show the clusters" >&2; exit 1; }

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
managers=()
cleanup() {
  step "Cleaning up"
  for pid in "${managers[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  "$devclusters" down --dir "$dir" || true; rm -rf "$dir"
}
trap cleanup EXIT

step "Starting two local control planes (consumer, provider)"
"$devclusters" down --dir "$dir" >/dev/null 2>&1 || true
rm -rf "$dir"
"$devclusters" up --dir "$dir" consumer provider
C="$dir/consumer/kubeconfig"; P="$dir/provider/kubeconfig"

step "liqoctl install on both clusters"
"$liqoctl" install --kubeconfig "$C" --cluster-id cl-consumer
"$liqoctl" install --kubeconfig "$P" --cluster-id cl-provider

step "liqoctl authenticate: the consumer gets an identity on the provider"
start=$(date +%s%N)
"$liqoctl" authenticate --kubeconfig "$C" --remote-kubeconfig "$P"
echo "authenticate took $(( ($(date +%s%N) - start) / 1000000 )) ms"

step "Consumer: kubectl get identities -A"
kubectl --kubeconfig "$C" get identities -A
step "Provider: kubectl get tenants -A"
kubectl --kubeconfig "$P" get tenants -A

step "liqoctl verify: the identity works and holds exactly the tenant role"
"$liqoctl" verify --kubeconfig "$C" --remote-kubeconfig "$P"

step "Re-running authenticate is a no-op"
"$liqoctl" authenticate --kubeconfig "$C" --remote-kubeconfig "$P"

issued="$dir/issued.kubeconfig"
kubectl --kubeconfig "$C" -n liqo-tenant-cl-provider get secret kubeconfig-controlplane-cl-provider -o jsonpath='{.data.kubeconfig}' | base64 -d > "$issued"
step "With the issued kubeconfig: who am I, and what may I do in the provider's tenant namespace?"
kubectl --kubeconfig "$issued" auth whoami
kubectl --kubeconfig "$issued" auth can-i --list -n liqo-tenant-cl-consumer
kubectl --kubeconfig "$issued" get resourceslices.authentication.liqo.io -n liqo-tenant-cl-consumer
if kubectl --kubeconfig "$issued" get secrets -n liqo-tenant-cl-consumer >/dev/null 2>&1; then
  echo "demo: the issued identity can read Secrets: it must not" >&2; exit 1
fi
echo "Reading Secrets: refused, as it must be"

step "Resource acquisition: liqo-auth-manager on both clusters, then a ResourceSlice"
port=18080
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
"$bin/liqo-auth-manager" --kubeconfig "$C" --health-probe-bind-address=0 >"$C.manager.log" 2>&1 &
managers+=("$!")
"$bin/liqo-auth-manager" --kubeconfig "$P" --health-probe-bind-address=0 --metrics-bind-address "127.0.0.1:$port" >"$P.manager.log" 2>&1 &
managers+=("$!")
"$liqoctl" create resourceslice slice-a --kubeconfig "$C" --remote-cluster-id cl-provider --cpu 2 --memory 4Gi --timeout 60s
# rslice: since Kubernetes 1.34, plain "resourceslices" is resource.k8s.io's (DRA)
kubectl --kubeconfig "$C" get rslice -n liqo-tenant-cl-provider
sliceconf="$dir/slice.kubeconfig"
kubectl --kubeconfig "$C" -n liqo-tenant-cl-provider get secret kubeconfig-resourceslice-slice-a -o jsonpath='{.data.kubeconfig}' | base64 -d > "$sliceconf"
step "With the slice's own identity: who am I, and what may I do?"
kubectl --kubeconfig "$sliceconf" auth whoami
kubectl --kubeconfig "$sliceconf" auth can-i --list -n liqo-tenant-cl-consumer
step "Cordon the tenant on the provider: slice-b is refused, slice-a kept"
"$liqoctl" cordon tenant cl-consumer --kubeconfig "$P"
if "$liqoctl" create resourceslice slice-b --kubeconfig "$C" --remote-cluster-id cl-provider --cpu 1 --timeout 20s; then
  echo "demo: a cordoned tenant got a new slice" >&2; exit 1
fi
"$liqoctl" uncordon tenant cl-consumer --kubeconfig "$P"
step "Give slice-a back: its identity loses its access, proven"
"$liqoctl" delete resourceslice slice-a --kubeconfig "$C" --remote-cluster-id cl-provider
"$liqoctl" delete resourceslice slice-b --kubeconfig "$C" --remote-cluster-id cl-provider

step "Renew the consumer's certificate now (provider), then the status of the peer on both sides"
"$liqoctl" renew tenant cl-consumer --kubeconfig "$P"
kubectl --kubeconfig "$C" wait -n liqo-tenant-cl-provider identity/controlplane-cl-provider --for=jsonpath='{.status.lastRenewal}' --timeout=30s >/dev/null
kubectl --kubeconfig "$P" get tenants -A
kubectl --kubeconfig "$C" get identities -A
"$liqoctl" verify --kubeconfig "$C"
step "Rotate the consumer's key: each provider issues for the new key, the old certificate authorizes nothing"
"$liqoctl" rotate key --kubeconfig "$C" --timeout 60s
if out=$(kubectl --kubeconfig "$issued" get resourceslices.authentication.liqo.io -n liqo-tenant-cl-consumer 2>&1); then
  echo "demo: the certificate of the replaced key still works: $out" >&2; exit 1
fi
echo "The replaced key's certificate: $out"
issued="$dir/issued-rotated.kubeconfig"
kubectl --kubeconfig "$C" -n liqo-tenant-cl-provider get secret kubeconfig-controlplane-cl-provider -o jsonpath='{.data.kubeconfig}' | base64 -d > "$issued"
kubectl --kubeconfig "$issued" auth whoami
step "Rotate the provider's key: every acceptance is sealed again with the new key"
"$liqoctl" rotate key --kubeconfig "$P" --timeout 60s
"$liqoctl" verify --kubeconfig "$C"
step "The provider's metrics (liqo-auth-manager --metrics-bind-address)"
if command -v curl >/dev/null; then
  curl -fsS "http://127.0.0.1:$port/metrics" | grep '^liqo_auth_'
else
  echo "(curl is not installed: http://127.0.0.1:$port/metrics not shown)"
fi

step "liqoctl info on both clusters"
"$liqoctl" info --kubeconfig "$C"
"$liqoctl" info --kubeconfig "$P"

step "liqoctl unauthenticate: teardown and proof of revocation"
"$liqoctl" unauthenticate --kubeconfig "$C" --remote-kubeconfig "$P" --delete-namespaces

step "The old credential is refused"
if out=$(kubectl --kubeconfig "$issued" get resourceslices.authentication.liqo.io -n liqo-tenant-cl-consumer 2>&1); then
  echo "demo: the old credential still works: $out" >&2; exit 1
fi
echo "$out"

step "Declarative peering: a peering user (provider), liqoctl generate peering, kubectl apply (consumer)"
# The managers started above carry it out: the provider's answers the peering user's
# handshake, the consumer's runs it. The YAML holds the peering user's credential: it stays
# in $dir, removed at the end.
"$liqoctl" generate peering-user --kubeconfig "$P" --consumer-cluster-id cl-consumer \
  | "$liqoctl" generate peering --peering-user-kubeconfig - \
  | tee "$dir/peering.yaml" | kubectl --kubeconfig "$C" apply -f -
echo "The Peering, as committed to Git (the Secret printed before it holds the credential: not shown):"
awk '/^---$/{n++; next} n' "$dir/peering.yaml"
start=$(date +%s%N)
kubectl --kubeconfig "$C" -n liqo wait peering/peering-cl-provider --for=jsonpath='{.status.state}'=Peered --timeout=60s
echo "peered $(( ($(date +%s%N) - start) / 1000000 )) ms after kubectl apply"
kubectl --kubeconfig "$C" -n liqo get peerings -o wide
kubectl --kubeconfig "$C" get identities -A
kubectl --kubeconfig "$P" get tenants -A

step "kubectl delete peering: the consumer leaves the provider with its own identity"
if ! kubectl --kubeconfig "$C" -n liqo delete peering peering-cl-provider --timeout=60s; then
  echo "demo: the Peering did not leave within 60s; where it stands:" >&2
  kubectl --kubeconfig "$C" -n liqo get peerings -o wide >&2
  kubectl --kubeconfig "$C" -n liqo get events --field-selector involvedObject.kind=Peering | tail -n 6 >&2
  grep -i peering "$C.manager.log" | tail -n 5 | cut -c1-400 >&2
  exit 1
fi
kubectl --kubeconfig "$C" -n liqo get peerings
if kubectl --kubeconfig "$P" -n liqo-tenant-cl-consumer get tenant cl-consumer >/dev/null 2>&1; then
  echo "demo: the provider still holds the Tenant of the consumer that left" >&2; exit 1
fi
kubectl --kubeconfig "$P" get tenants -A
kubectl --kubeconfig "$C" get identities -A
step "Demo complete"
