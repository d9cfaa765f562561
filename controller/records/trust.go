package records

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stagecoach-dev/stagecoach/internal/records/trust"
	recordsource "github.com/stagecoach-dev/stagecoach/internal/source/records"
)

// No ClusterRole rule for ConfigMaps: the installation grants get on the one trust ConfigMap
// (stagecoach-system/stagecoach-upstream-trust) through a Role, and another needs its own grant.

const (
	// TrustConfigMapKey is the key of the trust ConfigMap holding the trust config.
	TrustConfigMapKey = "upstream-trust.yaml"
	// DefaultUpstreamTrustRecheck is how often a trust ConfigMap is read again.
	DefaultUpstreamTrustRecheck = 10 * time.Second
)

// setUpTrust gives the follower its trust config: a file is read once (a bad one stops the
// controller at start), a ConfigMap is read now and again every recheck by a runnable the
// caller adds to the manager.
func setUpTrust(ctx context.Context, reader client.Reader, cfg Config, follower *recordsource.Source) (*TrustWatch, error) {
	switch {
	case cfg.TrustConfigMap != nil:
		w := &TrustWatch{Reader: reader, Key: *cfg.TrustConfigMap, Follower: follower, Every: cfg.TrustRecheck}
		w.load(ctx)
		return w, nil
	case cfg.TrustFile != "":
		data, err := os.ReadFile(cfg.TrustFile)
		if err != nil {
			return nil, fmt.Errorf("cannot read --upstream-trust %q: %w", cfg.TrustFile, err)
		}
		tc, err := trust.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("invalid --upstream-trust %q: %w", cfg.TrustFile, err)
		}
		follower.Trust = tc
	}
	return nil, nil
}

// TrustWatch keeps the follower's trust config that of a ConfigMap. It polls with a live get
// (no cache, no list): the controller needs to read that one ConfigMap only.
type TrustWatch struct {
	Reader   client.Reader
	Key      client.ObjectKey
	Follower *recordsource.Source
	Every    time.Duration

	// loaded is the hash of the data last applied ("" before the first): an unchanged
	// ConfigMap leaves the follower's views alone.
	loaded string
}

// Start re-reads the ConfigMap until ctx ends; every replica runs it, so that a replica that
// becomes leader already holds the current keys.
func (w *TrustWatch) Start(ctx context.Context) error {
	every := w.Every
	if every <= 0 {
		every = DefaultUpstreamTrustRecheck
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			w.load(ctx)
		}
	}
}

func (w *TrustWatch) NeedLeaderElection() bool { return false }

// load reads the ConfigMap and applies it when it changed. A ConfigMap that is missing,
// forbidden, without the key or invalid leaves followers UpstreamUntrusted, saying what to fix:
// half-edited keys must not keep vouching for streams. Other read errors (a timeout) keep the
// config in force and are retried.
func (w *TrustWatch) load(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithValues("configMap", w.Key.String())
	where := fmt.Sprintf("upstream trust ConfigMap %s (--upstream-trust)", w.Key)
	untrusted := func(state, why string) {
		if w.loaded == state {
			return
		}
		w.loaded = state
		log.Info("upstream trust config unusable", "reason", why)
		w.Follower.SetTrust(nil, why+"; until then no upstream record is trusted and Stages following upstreamRecords take nothing")
	}
	cm := &corev1.ConfigMap{}
	if err := w.Reader.Get(ctx, w.Key, cm); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			untrusted("missing", fmt.Sprintf("%s does not exist: create it with the upstream recorders' public keys (or keyless identities) under key %s", where, TrustConfigMapKey))
		case apierrors.IsForbidden(err):
			untrusted("forbidden", fmt.Sprintf("%s cannot be read: grant the controller's service account get on it: %v", where, err))
		default:
			log.Error(err, "cannot read the upstream trust ConfigMap; keeping the config in force")
		}
		return
	}
	data, ok := cm.Data[TrustConfigMapKey]
	if !ok {
		untrusted("nokey", fmt.Sprintf("%s has no key %s: put the trust config ({keys: [{name, publicKey or matchOIDCIdentity, repositories, streams}]}) there", where, TrustConfigMapKey))
		return
	}
	state := fmt.Sprintf("%x", sha256.Sum256([]byte(data)))
	if state == w.loaded {
		return
	}
	tc, err := trust.Parse([]byte(data))
	if err != nil {
		untrusted(state, fmt.Sprintf("%s key %s is invalid: %v", where, TrustConfigMapKey, err))
		return
	}
	w.loaded = state
	log.Info("upstream trust config loaded", "keys", len(tc.Keys))
	w.Follower.SetTrust(tc, "")
}
