package records

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	stagecoachv1 "github.com/stagecoach-dev/stagecoach/api/v1alpha1"
)

// APIVersion is the only record format this code reads and writes. A new format gets a new
// version, and readers refuse what they do not know rather than guess.
const APIVersion = "records.stagecoach.dev/v1"

// MaxRecordBytes bounds one record. Records are small (a few hundred bytes); the bound keeps a
// hostile registry from making a reader allocate without limit.
const maxRecordBytes = 64 << 10

// Action is what happened on the Stage.
type Action string

// Actions.
const (
	// ActionPromote: a version was applied to the Stage (verdict Started, then Succeeded or Failed).
	ActionPromote Action = "Promote"
	// ActionVerify: the landing verdict of a promoted version (Verified, Failed, DeadlineExceeded).
	ActionVerify Action = "Verify"
	// ActionRollback: Version was rolled back (RolledBack), to Restored.
	actionRollback Action = "Rollback"
	// ActionFreeze: the Stage was frozen; Version, when set, is the failed version that caused it.
	ActionFreeze Action = "Freeze"
	// ActionUnfreeze: the freeze ended.
	actionUnfreeze Action = "Unfreeze"
)

// Verdict is the outcome the record states. A promote or rollback ends in a phase, and its
// verdict is that phase's word (stagecoachv1.Phase: one vocabulary with Promotions and waves); a
// Verify record states a verification's outcome, which is not a phase.
type Verdict string

// Verdicts.
const (
	// verdictStarted is read in records of earlier versions; nothing writes it.
	verdictStarted          Verdict = "Started"
	VerdictSucceeded        Verdict = Verdict(stagecoachv1.PhaseSucceeded)
	VerdictFailed           Verdict = Verdict(stagecoachv1.PhaseFailed)
	verdictRolledBack       Verdict = Verdict(stagecoachv1.PhaseRolledBack)
	VerdictVerified         Verdict = "Verified"
	verdictDeadlineExceeded Verdict = "DeadlineExceeded"
)

// verificationOutcomes are the verdicts that are not phases: what a Verify record states.
var verificationOutcomes = []Verdict{VerdictVerified, VerdictFailed, verdictDeadlineExceeded}

// verdicts lists, per action, the verdicts a record of that action may carry ("" = none).
var verdicts = map[Action][]Verdict{
	ActionPromote:  {verdictStarted, VerdictSucceeded, VerdictFailed},
	ActionVerify:   verificationOutcomes,
	actionRollback: {verdictRolledBack, VerdictFailed},
	ActionFreeze:   {""},
	actionUnfreeze: {""},
}

// Record is one step on a Stage. Its canonical encoding (Encode) is what is signed, pushed and
// chained: the same record always has the same bytes and so the same digest.
//
// Field order here is the JSON key order (sorted), so encoding/json writes sorted keys directly.
type Record struct {
	Action      Action      `json:"action"`
	Actor       string      `json:"actor,omitempty"`
	APIVersion  string      `json:"apiVersion"`
	BreakGlass  *BreakGlass `json:"breakGlass,omitempty"`
	Environment string      `json:"environment"`
	Gates       []Gate      `json:"gates,omitempty"`
	// Prev is the digest of the record before this one that the recorder signed: the record at
	// Seq-1, unless the recorder had to move past tags it did not sign (see Writer.Write); empty
	// for the first record of the stream. The chain runs through signed records only, so what
	// anyone with push access puts between them cannot break it, and a signed record removed or
	// replaced still breaks it.
	Prev string `json:"prev,omitempty"`
	// Restored is the version a rollback went back to.
	Restored *Version `json:"restored,omitempty"`
	Seq      int64    `json:"seq"`
	Service  string   `json:"service"`
	Stage    StageRef `json:"stage"`
	Stream   string   `json:"stream"`
	Times    Times    `json:"times"`
	Verdict  Verdict  `json:"verdict,omitempty"`
	Version  *Version `json:"version,omitempty"`
}

// BreakGlass marks a step taken past a freeze; Reason is mandatory.
type BreakGlass struct {
	Reason string `json:"reason"`
}

// Gate is a gate the step passed, with what showed it passed.
type Gate struct {
	Evidence string `json:"evidence,omitempty"`
	Name     string `json:"name"`
}

// StageRef names the Stage in its own cluster.
type StageRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// Version is a release: the digest decides, the tag is for people.
type Version struct {
	Digest string `json:"digest"`
	Tag    string `json:"tag,omitempty"`
}

// Times of the step. Recorded is when the record was made; the others are set when known.
type Times struct {
	Finished *Time `json:"finished,omitempty"`
	Recorded Time  `json:"recorded"`
	Started  *Time `json:"started,omitempty"`
}

// Time is a UTC time with second precision, always written as RFC 3339 ("2026-12-01T11:10:19Z"):
// one instant has one spelling, which canonical bytes need.
type Time struct{ time.Time }

// NewTime truncates t to seconds in UTC.
func NewTime(t time.Time) Time { return Time{t.UTC().Truncate(time.Second)} }

// NewTimePtr is NewTime for optional fields.
func newTimePtr(t time.Time) *Time { tt := NewTime(t); return &tt }

// MarshalJSON writes the canonical spelling.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.UTC().Truncate(time.Second).Format(time.RFC3339) + `"`), nil
}

// UnmarshalJSON reads RFC 3339; canonical form is checked by Decode.
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("time must be an RFC 3339 string: %w", err)
	}
	p, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return fmt.Errorf("time %q is not RFC 3339: %w", s, err)
	}
	t.Time = p
	return nil
}

var (
	// digestRE: a record's digest (prev), always sha256.
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	// versionDigestRE: a version's digest, an OCI digest or a Git commit (a git source's).
	versionDigestRE = regexp.MustCompile(`^(sha256:[0-9a-f]{64}|sha1:[0-9a-f]{40})$`)
	// Stream ids are <cluster>/<namespace>/<name>: cluster a lowercase DNS label (the first hex
	// digits of kube-system's UID, or a name the operator chose), namespace a DNS label, name a
	// DNS subdomain.
	dnsLabel     = `[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?`
	dnsSubdomain = dnsLabel + `(\.` + dnsLabel + `)*`
	streamRE     = regexp.MustCompile(`^(` + dnsLabel + `)/(` + dnsLabel + `)/(` + dnsSubdomain + `)$`)
)

// StreamID is the stream of the Stage namespace/name in the cluster whose identity is cluster.
//
// Why cluster identity + namespace/name and not the Stage's UID: the stream must outlive the
// object. A Stage deleted and re-created by a GitOps sync, or restored from a backup, gets a new
// UID, and every follower bound to the old id would silently stop moving. The name is what people
// and trust configs speak of: "<cluster>/staging/*" binds a key to a namespace, which a UID cannot
// express. The cluster part (kube-system's UID, a stable identity for the life of the cluster)
// keeps two clusters with a "staging/payments" apart in one repository. A re-created Stage
// continues its stream from the registry's head, so history is never forked by a re-creation.
func StreamID(cluster, namespace, name string) (string, error) {
	id := cluster + "/" + namespace + "/" + name
	if err := validateStream(id); err != nil {
		return "", err
	}
	return id, nil
}

// ClusterIdentity turns the UID of the cluster's kube-system namespace (which lives as long as
// the cluster) into the cluster part of stream ids: its first 12 hex digits, lowercase.
func ClusterIdentity(kubeSystemUID string) (string, error) {
	h := strings.ToLower(strings.ReplaceAll(kubeSystemUID, "-", ""))
	if len(h) < 12 || strings.Trim(h, "0123456789abcdef") != "" {
		return "", fmt.Errorf("kube-system namespace UID %q is not a UUID; set the cluster identity explicitly", kubeSystemUID)
	}
	return h[:12], nil
}

// ValidateStream checks a stream id has the form <cluster>/<namespace>/<name>.
func validateStream(id string) error {
	if len(id) > 330 || !streamRE.MatchString(id) {
		return fmt.Errorf("stream id %q is not <cluster>/<namespace>/<name> in lowercase DNS labels; copy the upstream Stage's status.stream.id", id)
	}
	return nil
}

// maxTagPrefix leaves room in a 128-character OCI tag for "-" and a 19-digit seq.
const maxTagPrefix = 128 - 1 - 19

// TagPrefix is the stream's part of its records' tags. OCI tags cannot hold "/", so slashes
// become "." (unambiguous: the cluster and the namespace are DNS labels without dots). A prefix
// too long for a tag keeps its head and ends with "_" and a hash of the whole id ("_" cannot occur
// in a Kubernetes name, so it never collides with an unshortened prefix). The record inside names
// its stream too, and readers check it, so a collision could not mix streams anyway.
func tagPrefix(stream string) string {
	p := strings.ReplaceAll(stream, "/", ".")
	if len(p) <= maxTagPrefix {
		return p
	}
	sum := sha256.Sum256([]byte(stream))
	h := "_" + hex.EncodeToString(sum[:])[:16]
	return p[:maxTagPrefix-len(h)] + h
}

// Tag is the tag of the record seq of stream: <stream>-<seq>.
func Tag(stream string, seq int64) string {
	return tagPrefix(stream) + "-" + strconv.FormatInt(seq, 10)
}

// seqOfTag returns the seq a tag holds for the stream whose prefix is prefix, or false when the
// tag is not one of its records.
func seqOfTag(prefix, tag string) (int64, bool) {
	rest, ok := strings.CutPrefix(tag, prefix+"-")
	if !ok || rest == "" || rest[0] == '0' || len(rest) > 19 {
		return 0, false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil && n > 0
}

// Validate checks the record is well formed (Decode runs it; Encode too, so nothing malformed is
// ever signed).
func (r *Record) Validate() error {
	if r.APIVersion != APIVersion {
		return fmt.Errorf("record apiVersion %q is not supported (this reader knows %q): upgrade stagecoach", r.APIVersion, APIVersion)
	}
	if err := validateStream(r.Stream); err != nil {
		return err
	}
	if r.Seq < 1 {
		return fmt.Errorf("record seq %d: seqs start at 1", r.Seq)
	}
	switch {
	case r.Seq == 1 && r.Prev != "":
		return errors.New("record seq 1 has a prev digest: the first record of a stream has none")
	case r.Prev != "" && !digestRE.MatchString(r.Prev):
		// Empty after seq 1 is allowed: the first record written past junk at seq 1.
		return fmt.Errorf("record seq %d: prev %q must be the sha256 digest of the record before it", r.Seq, r.Prev)
	}
	if r.Stage.Name == "" || r.Stage.Namespace == "" || r.Service == "" || r.Environment == "" {
		return fmt.Errorf("record seq %d: stage namespace and name, service and environment are required", r.Seq)
	}
	allowed, ok := verdicts[r.Action]
	if !ok {
		return fmt.Errorf("record seq %d: unknown action %q", r.Seq, r.Action)
	}
	if !containsVerdict(allowed, r.Verdict) {
		return fmt.Errorf("record seq %d: action %s cannot have verdict %q", r.Seq, r.Action, r.Verdict)
	}
	needsVersion := r.Action == ActionPromote || r.Action == ActionVerify || r.Action == actionRollback
	if needsVersion && r.Version == nil {
		return fmt.Errorf("record seq %d: action %s needs a version", r.Seq, r.Action)
	}
	for _, v := range []*Version{r.Version, r.Restored} {
		if v != nil && !versionDigestRE.MatchString(v.Digest) {
			return fmt.Errorf("record seq %d: version digest %q is not sha256:<64 hex> (nor a Git commit, sha1:<40 hex>)", r.Seq, v.Digest)
		}
	}
	if r.BreakGlass != nil && strings.TrimSpace(r.BreakGlass.Reason) == "" {
		return fmt.Errorf("record seq %d: a break-glass step needs a reason", r.Seq)
	}
	for i, g := range r.Gates {
		if g.Name == "" {
			return fmt.Errorf("record seq %d: gates[%d] has no name", r.Seq, i)
		}
	}
	if r.Times.Recorded.IsZero() {
		return fmt.Errorf("record seq %d: times.recorded is required", r.Seq)
	}
	return nil
}

func containsVerdict(vs []Verdict, v Verdict) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// Encode returns the canonical bytes of r: keys sorted, no insignificant whitespace, no HTML
// escaping, UTC RFC 3339 times, no trailing newline.
func Encode(r *Record) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) > maxRecordBytes {
		return nil, fmt.Errorf("record seq %d is %d bytes, more than %d: shorten gate evidence", r.Seq, len(b), maxRecordBytes)
	}
	return b, nil
}

// Decode parses record bytes strictly: size-limited, the apiVersion checked first, unknown fields
// and trailing data refused, the record validated, and the bytes required to be canonical (so
// one record has exactly one digest and nothing can hide in whitespace or key order).
func Decode(b []byte) (*Record, error) {
	if len(b) > maxRecordBytes {
		return nil, fmt.Errorf("record is %d bytes, more than %d", len(b), maxRecordBytes)
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
	}
	// Only the first value: trailing data gets its own message below.
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&head); err != nil {
		return nil, fmt.Errorf("record is not a JSON object: %w", err)
	}
	if head.APIVersion != APIVersion {
		return nil, fmt.Errorf("record apiVersion %q is not supported (this reader knows %q): upgrade stagecoach", head.APIVersion, APIVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r Record
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("record is not valid: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("record has data after its JSON object")
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	canon, err := Encode(&r)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(canon, b) {
		return nil, fmt.Errorf("record seq %d is not in canonical form (sorted keys, no spaces, UTC RFC 3339 times)", r.Seq)
	}
	return &r, nil
}

// Digest is the digest of record bytes: "sha256:<hex>". It is the OCI digest of the record's
// layer, and what the next record's Prev and a follower's status.upstreamSeen hold.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
