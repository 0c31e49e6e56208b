package testenv

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// PauseImage is the name of the sandbox image a node's containerd uses: built from
// scripts/node.sh's pause binary at each node start, never pulled.
const PauseImage = "localhost/liqo-auth/pause:node"

// NodeImage is an image imported into a node's containerd before its kubelet starts.
type NodeImage struct {
	// Name is the reference Pods name it by (e.g. ghcr.io/liqo-auth/liqo-auth-manager:latest).
	Name string
	// OCILayout is an OCI image layout directory (make image's dist/image): the image
	// for this machine's platform is taken from its index.
	OCILayout string
}

// imageFromLayout reads the image of this machine's platform from an OCI layout.
func imageFromLayout(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("testenv: reading the OCI layout %s: %w", dir, err)
	}
	top, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range top.Manifests {
		switch {
		case d.MediaType.IsIndex():
			inner, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			im, err := inner.IndexManifest()
			if err != nil {
				return nil, err
			}
			for _, m := range im.Manifests {
				if m.Platform != nil && m.Platform.OS == "linux" && m.Platform.Architecture == runtime.GOARCH {
					return inner.Image(m.Digest)
				}
			}
		case d.MediaType.IsImage() && (d.Platform == nil || d.Platform.Architecture == runtime.GOARCH):
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("testenv: the OCI layout %s holds no linux/%s image", dir, runtime.GOARCH)
}

// pauseImage wraps the static pause binary in an image, as Kubernetes' own (user 65535).
func pauseImage(bin string) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("testenv: the pause binary (scripts/node.sh builds it): %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		if headerErr := tw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o555, Size: int64(len(data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); headerErr != nil {
			return nil, headerErr
		}
		if _, writeErr := tw.Write(data); writeErr != nil {
			return nil, writeErr
		}
		if closeErr := tw.Close(); closeErr != nil {
			return nil, closeErr
		}
		return io.NopCloser(&buf), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config = v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"}
	return mutate.ConfigFile(img, cfg)
}

// importImage writes img as an image archive named ref and imports it into the
// containerd at socket, in the namespace the CRI uses, unpacked for its snapshotter.
func importImage(socket, workDir, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("testenv: image name %q: %w", ref, err)
	}
	f, err := os.CreateTemp(workDir, "image-*.tar")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }() // a temporary archive
	if err := tarball.Write(tag, img, f); err != nil {
		_ = f.Close() // the write failed: that is the error
		return fmt.Errorf("testenv: writing the archive of %s: %w", ref, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := run("ctr", "--address", socket, "--namespace", "k8s.io", "images", "import", f.Name()); err != nil {
		return fmt.Errorf("testenv: importing %s: %w", ref, err)
	}
	return nil
}

// importImages imports the pause image and the node's images.
func (n *Node) importImages(images []NodeImage) error {
	pause, err := pauseImage(filepath.Join(n.binDir, "pause"))
	if err != nil {
		return err
	}
	if err := importImage(n.socket(), n.Dir, PauseImage, pause); err != nil {
		return err
	}
	for _, im := range images {
		img, err := imageFromLayout(im.OCILayout)
		if err != nil {
			return err
		}
		if err := importImage(n.socket(), n.Dir, im.Name, img); err != nil {
			return err
		}
	}
	return nil
}
