package main

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// sha256Digest is an OCI content digest in the one algorithm registries and Kubernetes all take.
var sha256Digest = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)

// ImageDigest is the digest of the image an OCI layout archive holds: the one descriptor its
// index.json names (the image index of all platforms), checked against the blob itself. It is the
// digest the registry serves after `skopeo copy --all --preserve-digests`, so the manifests that pin
// it pull exactly these bytes, whatever later happens to the tag.
func ImageDigest(archive string) (string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var index []byte
	blobs := map[string][]byte{} // read whole: the archive's blobs are small (two static binaries)
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", archive, err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		switch {
		case name == "index.json":
			index, err = io.ReadAll(tr)
		case strings.HasPrefix(name, "blobs/sha256/") && h.Typeflag == tar.TypeReg:
			blobs["sha256:"+strings.TrimPrefix(name, "blobs/sha256/")], err = io.ReadAll(tr)
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", archive, err)
		}
	}
	if index == nil {
		return "", fmt.Errorf("%s: no index.json: not an OCI image layout", archive)
	}
	var idx struct {
		Manifests []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
			Size      int64  `json:"size"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(index, &idx); err != nil {
		return "", fmt.Errorf("%s: index.json: %w", archive, err)
	}
	// One descriptor, or which of them the manifests pull would be a guess.
	if len(idx.Manifests) != 1 {
		return "", fmt.Errorf("%s: index.json names %d images, want 1", archive, len(idx.Manifests))
	}
	d := idx.Manifests[0]
	if !sha256Digest.MatchString(d.Digest) {
		return "", fmt.Errorf("%s: index.json: digest %q is not sha256:<64 hex>", archive, d.Digest)
	}
	if !strings.HasSuffix(d.MediaType, "image.index.v1+json") && !strings.HasSuffix(d.MediaType, "manifest.list.v2+json") &&
		!strings.HasSuffix(d.MediaType, "image.manifest.v1+json") && !strings.HasSuffix(d.MediaType, "manifest.v2+json") {
		return "", fmt.Errorf("%s: index.json: %s is no image index or manifest", archive, d.MediaType)
	}
	blob, ok := blobs[d.Digest]
	if !ok {
		return "", fmt.Errorf("%s: index.json names %s, which the archive does not hold", archive, d.Digest)
	}
	sum := sha256.Sum256(blob)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != d.Digest || int64(len(blob)) != d.Size {
		return "", fmt.Errorf("%s: the blob of %s is %s, %d bytes (index.json says %d)", archive, d.Digest, got, len(blob), d.Size)
	}
	return d.Digest, nil
}

// PinnedImage is the reference every manifest and chart of the release pulls: the tag, for people to
// read, and the digest, which is what the container runtime pulls (a tag@digest reference resolves
// by the digest alone).
func PinnedImage(image, version, digest string) string {
	return image + ":" + version + "@" + digest
}

// unpinned are the mentions in y of the repositories repos that are not ref: an image a manifest
// would pull by a tag someone can move.
func unpinned(y []byte, ref string, repos ...string) []string {
	var bad []string
	s := string(y)
	for _, repo := range repos {
		for i := 0; ; {
			j := strings.Index(s[i:], repo)
			if j < 0 {
				break
			}
			i += j
			if !strings.HasPrefix(s[i:], ref) {
				end := strings.IndexAny(s[i:], " \t\r\n\"'")
				if end < 0 {
					end = len(s) - i
				}
				bad = append(bad, s[i:i+end])
			}
			i += len(repo)
		}
	}
	return bad
}
