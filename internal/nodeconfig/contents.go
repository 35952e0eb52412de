package nodeconfig

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_6/types"
	"github.com/vincent-petithory/dataurl"
)

// contents decodes a file's inline contents (data: URL, optionally gzip-compressed) and checks
// its verification hash. An empty source is an empty file, as Ignition writes it. Remote sources
// never get here: Parse refused them.
func contents(r types.Resource) ([]byte, error) {
	if r.Source == nil || *r.Source == "" {
		return []byte{}, nil
	}
	if !strings.HasPrefix(*r.Source, "data:") {
		return nil, fmt.Errorf("contents from %q: only inline (data:) contents can be applied to a running node", *r.Source)
	}
	u, err := dataurl.DecodeString(*r.Source)
	if err != nil {
		return nil, fmt.Errorf("contents: %w", err)
	}
	data := u.Data
	if r.Compression != nil && *r.Compression != "" {
		if *r.Compression != "gzip" {
			return nil, fmt.Errorf("compression %q: only gzip is known", *r.Compression)
		}
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("gzip contents: %w", err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("gzip contents: %w", err)
		}
	}
	if h := r.Verification.Hash; h != nil && *h != "" {
		algo, want, _ := strings.Cut(*h, "-")
		var sum hash.Hash
		switch algo {
		case "sha512":
			sum = sha512.New()
		case "sha256":
			sum = sha256.New()
		default:
			return nil, fmt.Errorf("verification hash %q: unknown algorithm", *h)
		}
		sum.Write(data)
		if got := hex.EncodeToString(sum.Sum(nil)); got != want {
			return nil, fmt.Errorf("verification hash mismatch: contents hash to %s-%s", algo, got)
		}
	}
	return data, nil
}
