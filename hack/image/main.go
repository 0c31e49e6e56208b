// Command image builds the container image of liqo-auth-manager without a Docker daemon,
// with go-containerregistry: one static binary per platform (CGO_ENABLED=0) in a single
// layer on an empty base (scratch: the manager needs no shell, no libc and no CA bundle,
// since it trusts its API server through its ServiceAccount, and nothing has to be pulled
// to build it), run as an unprivileged user, assembled into a multi-platform OCI image
// index, and pushed to a registry or written to an OCI layout directory. It prints the
// index digest on stdout.
//
//	go run ./hack/image --version v1.2.3 --push ghcr.io/liqo-auth/liqo-auth-manager:v1.2.3
//	go run ./hack/image --oci-layout dist/image
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Entrypoint is where the binary sits in the image.
const Entrypoint = "/liqo-auth-manager"

// User is the unprivileged user and group the image runs as (the restricted Pod Security
// Standard wants a non-root user; the image has no /etc/passwd, so it is numeric).
const User = "65532:65532"

type options struct {
	version, commit, date string
	platforms             []string
	push, ociLayout       string
	insecure              bool
	created               time.Time
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "liqo-auth-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }() // best effort: a temporary directory
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.platforms {
		img, imageErr := o.image(ctx, work, p, stderr)
		if imageErr != nil {
			return imageErr
		}
		osName, arch, _ := strings.Cut(p, "/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: osName, Architecture: arch}}})
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	if o.ociLayout != "" {
		if _, writeErr := layout.Write(o.ociLayout, idx); writeErr != nil {
			return fmt.Errorf("writing the OCI layout %s: %w", o.ociLayout, writeErr)
		}
		fmt.Fprintf(stderr, "image: OCI layout written to %s\n", o.ociLayout)
	}
	if o.push != "" {
		var nameOpts []name.Option
		if o.insecure {
			nameOpts = append(nameOpts, name.Insecure)
		}
		ref, parseReferenceErr := name.ParseReference(o.push, nameOpts...)
		if parseReferenceErr != nil {
			return fmt.Errorf("--push: %w", parseReferenceErr)
		}
		// Credentials as docker login and crane store them (~/.docker/config.json).
		if writeIndexErr := remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); writeIndexErr != nil {
			return fmt.Errorf("pushing %s: %w", ref, writeIndexErr)
		}
		fmt.Fprintf(stderr, "image: pushed %s@%s\n", ref, digest)
	}
	_, err = fmt.Fprintln(stdout, digest)
	return err
}

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.version, "version", "dev", "version stamped into the binary and the image labels")
	fs.StringVar(&o.commit, "commit", "unknown", "commit stamped into the binary and the image labels")
	fs.StringVar(&o.date, "date", "unknown", "build date stamped into the binary")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	fs.StringVar(&o.push, "push", "", "push the image index to this reference (registry/repository:tag)")
	fs.StringVar(&o.ociLayout, "oci-layout", "", "write the image index to this OCI layout directory")
	fs.BoolVar(&o.insecure, "insecure", false, "allow a registry over plain HTTP (a local test registry)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.push == "" && o.ociLayout == "" {
		return nil, errors.New("say where the image goes: --push REFERENCE or --oci-layout DIR")
	}
	o.platforms = strings.Split(*platforms, ",")
	for _, p := range o.platforms {
		if osName, arch, ok := strings.Cut(p, "/"); !ok || osName == "" || arch == "" {
			return nil, fmt.Errorf("--platforms: %q is not os/arch", p)
		}
	}
	// Reproducible: the creation time is SOURCE_DATE_EPOCH when set, else the epoch.
	o.created = time.Unix(0, 0).UTC()
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds", v)
		}
		o.created = time.Unix(sec, 0).UTC()
	}
	return o, nil
}

// image builds the manager for one platform and wraps it in an image.
func (o *options) image(ctx context.Context, work, platform string, stderr io.Writer) (v1.Image, error) {
	osName, arch, _ := strings.Cut(platform, "/")
	bin := filepath.Join(work, osName+"-"+arch, "liqo-auth-manager")
	pkg := "github.com/liqo-auth/liqo-auth/internal/version"
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin,
		"-ldflags", fmt.Sprintf("-s -w -X %s.version=%s -X %s.commit=%s -X %s.date=%s", pkg, o.version, pkg, o.commit, pkg, o.date),
		"./cmd/liqo-auth-manager")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+osName, "GOARCH="+arch)
	build.Stdout, build.Stderr = stderr, stderr
	fmt.Fprintf(stderr, "image: building liqo-auth-manager for %s\n", platform)
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building for %s: %w", platform, err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return tarOf(Entrypoint, data, o.created) },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = osName, arch, v1.Time{Time: o.created}
	cfg.Config = v1.Config{
		Entrypoint: []string{Entrypoint},
		User:       User,
		WorkingDir: "/",
		Labels: map[string]string{
			"org.opencontainers.image.title":    "liqo-auth-manager",
			"org.opencontainers.image.version":  o.version,
			"org.opencontainers.image.revision": o.commit,
			"org.opencontainers.image.source":   "https://github.com/liqo-auth/liqo-auth",
		},
	}
	return mutate.ConfigFile(img, cfg)
}

// tarOf is a layer holding one executable file at path, owned by root, readable and
// executable by everyone, writable by no one.
func tarOf(path string, data []byte, mtime time.Time) (io.ReadCloser, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: strings.TrimPrefix(path, "/"), Mode: 0o555, Size: int64(len(data)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return io.NopCloser(&buf), nil
}
