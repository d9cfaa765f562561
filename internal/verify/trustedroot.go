package verify

import (
	"crypto/sha256"
	_ "embed" // the public Sigstore instance's trusted root
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/sigstore/sigstore-go/pkg/root"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
)

// MaxTrustedRootBytes bounds a trusted_root.json: a Secret cannot hold more, and
// the parser must not be made to read more.
const MaxTrustedRootBytes = 1 << 20

// publicGoodRoot is the trusted root of the public Sigstore instance (Fulcio, Rekor, CT log and
// timestamp authority at sigstore.dev), as its TUF repository publishes it. It is a copy of
// github.com/sigstore/sigstore v1.10.8 pkg/tuf/repository/targets/trusted_root.json, so the
// controller checks keyless signatures offline, with nothing fetched at build or run time. When
// the public instance adds keys (a new Rekor shard, a new CT log), a newer copy comes with a
// newer Stagecoach, or a Stage names one in verify.trustedRoot meanwhile.
//
//go:embed roots/public-good.json
var publicGoodRoot []byte

// PublicGoodTrustedRoot returns the trusted_root.json of the public Sigstore instance that
// Stagecoach ships with.
func PublicGoodTrustedRoot() []byte { return publicGoodRoot }

// TrustedRoot is a parsed trusted_root.json: the Fulcio certificate authorities a keyless
// certificate must chain to, the transparency logs, CT logs and timestamp authorities whose
// signatures count. It is safe for concurrent use.
type TrustedRoot struct {
	material *root.TrustedRoot
	// Fingerprint is the SHA-256 of the JSON, hex: verdicts are cached per trusted root content.
	Fingerprint string
	verifier    *sgverify.Verifier
}

// ParseTrustedRoot parses a trusted_root.json (the form Sigstore publishes its trust roots in,
// application/vnd.dev.sigstore.trustedroot+json) and checks it can vouch for a keyless
// signature: it names a Fulcio certificate authority, and a transparency log or a timestamp
// authority to say when the short-lived certificate signed.
func ParseTrustedRoot(data []byte) (*TrustedRoot, error) {
	if len(data) == 0 {
		return nil, errors.New("trusted root is empty: give the trusted_root.json of the Sigstore instance")
	}
	if len(data) > MaxTrustedRootBytes {
		return nil, fmt.Errorf("trusted root is %d bytes, more than the %d a trusted_root.json may have", len(data), MaxTrustedRootBytes)
	}
	tr, err := root.NewTrustedRootFromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not a Sigstore trusted_root.json: %w", err)
	}
	if len(tr.FulcioCertificateAuthorities()) == 0 {
		return nil, errors.New("trusted root names no Fulcio certificate authority: keyless certificates cannot chain to it")
	}
	logs, tsas := len(tr.RekorLogs()), len(tr.TimestampingAuthorities())
	if logs == 0 && tsas == 0 {
		return nil, errors.New("trusted root names neither a transparency log nor a timestamp authority: " +
			"nothing could say when a short-lived certificate signed")
	}
	// What the instance offers is what a signature must carry: a log entry when the root names
	// logs (the public instance always does), an SCT when it names CT logs, and a time (the
	// log's or a signed timestamp) inside the certificate's validity.
	opts := []sgverify.VerifierOption{sgverify.WithObserverTimestamps(1)}
	if logs > 0 {
		opts = append(opts, sgverify.WithTransparencyLog(1))
	}
	if len(tr.CTLogs()) > 0 {
		opts = append(opts, sgverify.WithSignedCertificateTimestamps(1))
	}
	v, err := sgverify.NewVerifier(tr, opts...)
	if err != nil {
		return nil, fmt.Errorf("trusted root: %w", err)
	}
	sum := sha256.Sum256(data)
	return &TrustedRoot{material: tr, Fingerprint: hex.EncodeToString(sum[:]), verifier: v}, nil
}

// requiresLog reports whether signatures need a transparency log entry.
func (t *TrustedRoot) requiresLog() bool { return len(t.material.RekorLogs()) > 0 }

// parsedRoots keeps the trusted roots parsed lately, by content: the controller builds a
// Verifier per reconcile, and parsing the same JSON each time would cost more than the cached
// verdict it then returns.
var parsedRoots = struct {
	sync.Mutex
	byHash map[[sha256.Size]byte]*TrustedRoot
}{byHash: map[[sha256.Size]byte]*TrustedRoot{}}

// maxParsedRoots bounds parsedRoots; a cluster rarely trusts more than a few Sigstore instances.
const maxParsedRoots = 16

// trustedRootFor returns the parsed trusted root of data (the public instance's when nil).
func trustedRootFor(data []byte) (*TrustedRoot, error) {
	if data == nil {
		data = publicGoodRoot
	}
	sum := sha256.Sum256(data)
	parsedRoots.Lock()
	tr, ok := parsedRoots.byHash[sum]
	parsedRoots.Unlock()
	if ok {
		return tr, nil
	}
	tr, err := ParseTrustedRoot(data)
	if err != nil {
		return nil, err
	}
	parsedRoots.Lock()
	defer parsedRoots.Unlock()
	if len(parsedRoots.byHash) >= maxParsedRoots {
		// Dropping them all is simplest; they are parsed again when next used.
		clear(parsedRoots.byHash)
	}
	parsedRoots.byHash[sum] = tr
	return tr, nil
}
