#!/usr/bin/env bash
# controlplane.sh: ensure etcd, kube-apiserver and kube-controller-manager are built at
# pinned versions from the Go module proxy into a cache directory outside the repository,
# then print that directory. Later calls return at once. Concurrent callers wait on a lock.
#
#   K8S_VERSION   Kubernetes release (k8s.io/kubernetes), default v1.37.1
#   ETCD_VERSION  etcd server release, default v3.7.0 (what that Kubernetes release requires)
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.1}
ETCD_VERSION=${ETCD_VERSION:-v3.7.0}
STAGING_VERSION=v0.${K8S_VERSION#v1.}
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/liqo-auth/controlplane
dir=$cache_root/${K8S_VERSION}-etcd-${ETCD_VERSION}
binaries=(etcd kube-apiserver kube-controller-manager)

log() { echo "controlplane: $*" >&2; }

ready() {
  [ -f "$dir/.complete" ] || return 1
  for b in "${binaries[@]}"; do [ -x "$dir/$b" ] || return 1; done
}

if ready; then echo "$dir"; exit 0; fi

command -v go >/dev/null || { log "go is not installed: install Go 1.26 and retry"; exit 1; }
mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
flock 9
if ready; then echo "$dir"; exit 0; fi

work=$(mktemp -d "$cache_root/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
log "building Kubernetes $K8S_VERSION and etcd $ETCD_VERSION from the Go module proxy (first time only, ~10 minutes on 2 cores)"

# Version stamps so the servers report e.g. v1.37.1 (kubectl cannot parse a server
# version of "v0.0.0-master"). Both component-base and client-go carry these variables.
major=${K8S_VERSION#v}; major=${major%%.*}
minor=${K8S_VERSION#v*.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitCommit=0000000000000000000000000000000000000000 -X $pkg.gitTreeState=clean"
  ldflags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 GOWORK=off

# Kubernetes: k8s.io/kubernetes replaces every staging module with ./staging/...,
# which a dependent module cannot use; point each at its published v0.x release.
mkdir -p "$work/k8s" "$work/out"
( cd "$work/k8s"
  go mod init liqo-auth.local/controlplane >/dev/null 2>&1
  modfile=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  [ -n "$modfile" ] || { log "cannot download k8s.io/kubernetes@$K8S_VERSION from the module proxy"; exit 1; }
  staging=$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$modfile")
  [ -n "$staging" ] || { log "no staging modules found in $modfile"; exit 1; }
  for m in $staging; do go mod edit -replace "$m=$m@$STAGING_VERSION"; done
  go mod edit -require "k8s.io/kubernetes@$K8S_VERSION"
  go mod download
  for b in kube-apiserver kube-controller-manager; do
    log "building $b"
    go build -trimpath -ldflags "$ldflags" -o "$work/out/$b" "k8s.io/kubernetes/cmd/$b"
  done )

( cd "$work" && mkdir etcd && cd etcd
  go mod init liqo-auth.local/etcd >/dev/null 2>&1
  go mod edit -require "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  log "building etcd"
  go build -trimpath -ldflags "-s -w" -o "$work/out/etcd" go.etcd.io/etcd/server/v3 )

"$work/out/kube-apiserver" --version >&2
mkdir -p "$dir"
for b in "${binaries[@]}"; do mv -f "$work/out/$b" "$dir/$b"; done
date -u +%FT%TZ > "$dir/.complete"
log "built in $(( $(date +%s) - start ))s into $dir"
echo "$dir"
