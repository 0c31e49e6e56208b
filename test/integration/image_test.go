package integration

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestManagerImage builds the liqo-auth-manager image as a release does (hack/image: no
// Docker daemon), pushes it to a registry served on loopback, and reads it back: one
// manifest per platform, an unprivileged user, the binary as entrypoint and the only file
// (no shell), statically linked for its architecture; the amd64 one runs.
func TestManagerImage(t *testing.T) {
	// Serial: it builds the image for two platforms: it computes.
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	ref := strings.TrimPrefix(reg.URL, "http://") + "/liqo-auth/liqo-auth-manager:v9.9.9-test"
	build := exec.Command("go", "run", "./hack/image", "--version", "v9.9.9-test", "--commit", "abc1234", "--push", ref, "--insecure")
	build.Dir = moduleRoot(t)
	out, err := build.Output()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		t.Log(string(exitErr.Stderr))
	}
	require.NoError(t, err)
	digest := strings.TrimSpace(string(out))
	require.True(t, strings.HasPrefix(digest, "sha256:"), "the index digest is printed: %q", digest)

	parsed, err := name.ParseReference(ref, name.Insecure)
	require.NoError(t, err)
	idx, err := remote.Index(parsed)
	require.NoError(t, err)
	got, err := idx.Digest()
	require.NoError(t, err)
	assert.Equal(t, digest, got.String())
	manifest, err := idx.IndexManifest()
	require.NoError(t, err)
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var seen []string
	for _, desc := range manifest.Manifests {
		arch := desc.Platform.Architecture
		seen = append(seen, desc.Platform.OS+"/"+arch)
		img, err := idx.Image(desc.Digest)
		require.NoError(t, err)
		cfg, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, arch, cfg.Architecture)
		assert.Equal(t, "linux", cfg.OS)
		assert.Equal(t, "65532:65532", cfg.Config.User, "not root")
		assert.Equal(t, []string{"/liqo-auth-manager"}, cfg.Config.Entrypoint)
		assert.Equal(t, "v9.9.9-test", cfg.Config.Labels["org.opencontainers.image.version"])
		layers, err := img.Layers()
		require.NoError(t, err)
		require.Len(t, layers, 1, "one layer on an empty base")
		rc, err := layers[0].Uncompressed()
		require.NoError(t, err)
		tr := tar.NewReader(rc)
		hdr, err := tr.Next()
		require.NoError(t, err)
		assert.Equal(t, "liqo-auth-manager", hdr.Name)
		assert.Equal(t, int64(0o555), hdr.Mode, "executable, writable by no one")
		bin := filepath.Join(t.TempDir(), "liqo-auth-manager-"+arch)
		f, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
		require.NoError(t, err)
		_, err = io.Copy(f, tr)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		_, err = tr.Next()
		assert.ErrorIs(t, err, io.EOF, "the binary is the only file: no shell, no libc")
		require.NoError(t, rc.Close())
		e, err := elf.Open(bin)
		require.NoError(t, err)
		assert.Equal(t, machines[arch], e.Machine)
		for _, p := range e.Progs {
			assert.NotEqual(t, elf.PT_INTERP, p.Type, "statically linked")
		}
		require.NoError(t, e.Close())
		if arch == "amd64" {
			out, err := exec.Command(bin, "--version").CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.Contains(t, string(out), "v9.9.9-test")
		}
	}
	assert.ElementsMatch(t, []string{"linux/amd64", "linux/arm64"}, seen)
}
