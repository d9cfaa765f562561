package controller

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
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
	// TrustConfigMapPrefix marks --upstream-trust as a ConfigMap: configmap:NAMESPACE/NAME.
	TrustConfigMapPrefix = "configmap:"
	// TrustConfigMapKey is the key of that ConfigMap holding the trust config.
	TrustConfigMapKey = "upstream-trust.yaml"
	// DefaultUpstreamTrustRecheck is how often a trust ConfigMap is read again.
	DefaultUpstreamTrustRecheck = 10 * time.Second
)

// trustConfigMap returns the ConfigMap --upstream-trust names; ok is false for a file.
func trustConfigMap(flag string) (key client.ObjectKey, ok bool, err error) {
	ref, ok := strings.CutPrefix(flag, TrustConfigMapPrefix)
	if !ok {
		return client.ObjectKey{}, false, nil
	}
	key, err = parseSecretRef(ref)
	if err != nil {
		return client.ObjectKey{}, true, fmt.Errorf("must be configmap:NAMESPACE/NAME of a ConfigMap with key %s", TrustConfigMapKey)
	}
	return key, true, nil
}

// setUpTrust gives the follower its trust config: a file is read once (a bad one stops the
// controller at start), a ConfigMap is read now and again every recheck by a runnable the
// caller adds to the manager.
func setUpTrust(ctx context.Context, reader client.Reader, opts Options, follower *recordsource.Source) (*trustWatch, error) {
	if opts.UpstreamTrust == "" {
		return nil, nil
	}
	key, isConfigMap, err := trustConfigMap(opts.UpstreamTrust)
	if err != nil {
		return nil, fmt.Errorf("invalid --upstream-trust %q: %w", opts.UpstreamTrust, err)
	}
	if !isConfigMap {
		data, err := os.ReadFile(opts.UpstreamTrust)
		if err != nil {
			return nil, fmt.Errorf("cannot read --upstream-trust %q: %w", opts.UpstreamTrust, err)
		}
		tc, err := trust.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("invalid --upstream-trust %q: %w", opts.UpstreamTrust, err)
		}
		follower.Trust = tc
		return nil, nil
	}
	w := &trustWatch{Reader: reader, Key: key, Follower: follower, Every: opts.UpstreamTrustRecheck}
	w.load(ctx)
	return w, nil
}

// trustWatch keeps the follower's trust config that of a ConfigMap. It polls with a live get
// (no cache, no list): the controller needs to read that one ConfigMap only.
type trustWatch struct {
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
func (w *trustWatch) Start(ctx context.Context) error {
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

func (w *trustWatch) NeedLeaderElection() bool { return false }

// load reads the ConfigMap and applies it when it changed. A ConfigMap that is missing,
// forbidden, without the key or invalid leaves followers UpstreamUntrusted, saying what to fix:
// half-edited keys must not keep vouching for streams. Other read errors (a timeout) keep the
// config in force and are retried.
func (w *trustWatch) load(ctx context.Context) {
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
