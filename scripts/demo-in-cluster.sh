#!/usr/bin/env bash
# demo-in-cluster.sh BIN DIR IMAGE_LAYOUT: liqo-auth-manager as the release manifest deploys
# it, on a real node. Two local control planes; the provider gets a node (containerd,
# kubelet, kube-proxy: scripts/node.sh, root only) with the manager image make image built
# imported into its runtime. kubectl apply -f deploy/liqo-auth.yaml; both replicas Ready
# under the restricted Pod Security level; the Lease, the probes and the metrics from the
# Pods; liqoctl authenticate served by the in-cluster manager; the leader Pod deleted and
# the other replica taking over; clean up.
set -euo pipefail
bin=${1:-bin}; dir=${2:-.devclusters/demo-in-cluster}; layout=${3:-dist/image}
liqoctl="$bin/liqoctl"; devclusters="$bin/devclusters"
command -v kubectl >/dev/null || { echo "demo: kubectl is needed to show the clusters" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "demo: a node (containerd, kubelet, a network namespace) needs root" >&2; exit 1; }
image=$(sed -n 's/^[[:space:]]*image: //p' deploy/liqo-auth.yaml | head -1)

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
cleanup() {
  step "Cleaning up"
  "$devclusters" down --dir "$dir" || true; rm -rf "$dir"
}
trap cleanup EXIT

step "Starting two local control planes; the provider gets a node with $image imported"
"$devclusters" down --dir "$dir" >/dev/null 2>&1 || true
rm -rf "$dir"
"$devclusters" up --dir "$dir" --with-node provider --node-image "$image=$layout" consumer provider
C="$dir/consumer/kubeconfig"; P="$dir/provider/kubeconfig"
kubectl --kubeconfig "$P" get nodes -o wide

step "Provider: kubectl apply -f deploy/liqo-auth.yaml"
kubectl --kubeconfig "$P" apply -f deploy/liqo-auth.yaml | tail -4
server=$(kubectl --kubeconfig "$P" config view -o jsonpath='{.clusters[0].cluster.server}')
step "Provider: the API server URL consumers reach ($server); a replica started without it restarts"
kubectl --kubeconfig "$P" -n liqo create configmap liqo-auth-config --from-literal=apiServerURL="$server"
kubectl --kubeconfig "$P" -n liqo rollout status deployment liqo-auth-manager --timeout 3m
for _ in $(seq 120); do
  n=0
  for pod in $(kubectl --kubeconfig "$P" -n liqo get pods -o name); do
    kubectl --kubeconfig "$P" -n liqo logs "$pod" 2>/dev/null | grep -q "\"apiServer\":\"$server\"" && n=$((n + 1))
  done
  [ "$n" = 2 ] && break
  sleep 1
done
kubectl --kubeconfig "$P" -n liqo wait --for=condition=Ready pod -l app.kubernetes.io/name=liqo-auth-manager --timeout 2m
kubectl --kubeconfig "$P" get namespace liqo --show-labels
kubectl --kubeconfig "$P" -n liqo get pods -o wide
kubectl --kubeconfig "$P" -n liqo get lease liqo-auth-manager -o jsonpath='{"Lease held by "}{.spec.holderIdentity}{"\n"}'

step "The probes and the metrics, from each Pod (metrics only for a token allowed to get /metrics)"
kubectl --kubeconfig "$P" create clusterrole metrics-reader --verb=get --non-resource-url=/metrics
kubectl --kubeconfig "$P" create serviceaccount prometheus
kubectl --kubeconfig "$P" create clusterrolebinding metrics-reader --clusterrole=metrics-reader --serviceaccount=default:prometheus
token=$(kubectl --kubeconfig "$P" create token prometheus)
for ip in $(kubectl --kubeconfig "$P" -n liqo get pods -o jsonpath='{.items[*].status.podIP}'); do
  echo "$ip: healthz $(curl -s http://"$ip":8081/healthz), readyz $(curl -s http://"$ip":8081/readyz)," \
    "metrics without a token: HTTP $(curl -sk -o /dev/null -w '%{http_code}' https://"$ip":8443/metrics)," \
    "with one: $(curl -sk -H "Authorization: Bearer $token" https://"$ip":8443/metrics | grep -c '^liqo_auth\|^controller_runtime') series"
done

step "liqoctl install on the consumer; liqoctl authenticate: the provider's side is the in-cluster manager"
"$liqoctl" install --kubeconfig "$C" --cluster-id cl-consumer
"$liqoctl" authenticate --kubeconfig "$C" --remote-kubeconfig "$P"
"$liqoctl" info --kubeconfig "$P" | head -8

step "Delete the leader Pod: the other replica takes the Lease"
leader=$(kubectl --kubeconfig "$P" -n liqo get lease liqo-auth-manager -o jsonpath='{.spec.holderIdentity}'); leader=${leader%%_*}
kubectl --kubeconfig "$P" -n liqo delete pod "$leader"
for _ in $(seq 60); do
  holder=$(kubectl --kubeconfig "$P" -n liqo get lease liqo-auth-manager -o jsonpath='{.spec.holderIdentity}')
  [ "${holder%%_*}" != "$leader" ] && break
  sleep 1
done
echo "Lease now held by $holder"
"$liqoctl" verify --kubeconfig "$C" --remote-kubeconfig "$P"
